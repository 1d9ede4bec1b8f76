"""Two kafka-python 3.0.12 join bugs behind the occasional slow or stuck groups of issue 16, made
deterministic: one consumer, a broker in its own process, and the client's SyncGroup answer held back
150 ms inside the client (a latency any broker may have) so the race windows are always hit.

A. `join_group_async` replaces a join task that finished while no `poll()` was waiting on it with a
   new one: the finished JoinGroup+SyncGroup is thrown away and a fresh JoinGroup goes out. From the
   leader, a JoinGroup in Stable forces a rebalance (Kafka's rule), so a leader whose poll loop does
   work between polls rejoins forever and never gets its assignment.
B. A leader that rejoins because its metadata changed (`_assignment_snapshot != _metadata_snapshot`)
   stops needing to rejoin as soon as it computes the new assignment; if `poll()`'s timer runs out
   before SyncGroup answers, no later `poll()` awaits the join again: the member sits in REBALANCING
   with no partitions and no heartbeats while the broker's group is Stable with it as leader.

    PYTHONPATH=src python tests/compat/kafka_python_join_bugs.py [--sync-delay-ms 150]

With --sync-delay-ms 0 (the control) both scenarios usually end well: the windows are then only a few
milliseconds wide, which is how often they are hit by chance in the four-consumer reproducer.
"""

from __future__ import annotations

import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from group_timing_support import broker_process, create_topic

SYNC_DELAY_S = 0.15  # --sync-delay-ms


def delay_sync_group_answers(consumer: Any) -> None:
    """Hold each SyncGroup response back SYNC_DELAY_S inside the client (no broker change)."""
    coordinator = consumer._coordinator
    manager = coordinator._manager
    original = manager.send

    def send(request: Any, node_id: Any = None, request_timeout_ms: Any = None) -> Any:
        future = original(request, node_id=node_id, request_timeout_ms=request_timeout_ms)
        if type(request).__name__ != "SyncGroupRequest" or SYNC_DELAY_S <= 0:
            return future

        async def later() -> Any:
            response = await future
            await manager._net.sleep(SYNC_DELAY_S)
            return response

        return later()

    manager.send = send


def client_state(consumer: Any) -> str:
    c = consumer._coordinator
    task = c._join_task
    return (
        f"state={c.state} need_rejoin={c.need_rejoin()} generation={c._generation.generation_id} "
        f"join_task={'none' if task is None else ('done' if task.is_done else 'pending')} "
        f"assignment={sorted(tp.partition for tp in consumer.assignment())}"
    )


def bug_a(bootstrap: str) -> bool:
    """A leader that works 200 ms between polls of 100 ms: every finished join lands outside poll()."""
    from kafka import KafkaConsumer

    topic = f"bug-a-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, 2)
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=f"g-{topic}")
    delay_sync_group_answers(consumer)
    deadline = time.monotonic() + 15
    joins = 0
    last_gen = None
    try:
        while time.monotonic() < deadline and not consumer.assignment():
            consumer.poll(timeout_ms=100)
            gen = consumer._coordinator._generation.generation_id
            if gen != last_gen:
                joins, last_gen = joins + 1, gen
            time.sleep(0.2)  # "processing" the (empty) batch
        got = bool(consumer.assignment())
        print(
            f"A: assignment after 15 s: {got}; generations seen {joins}; {client_state(consumer)}"
        )
        return not got
    finally:
        consumer.close()


def bug_b(bootstrap: str) -> bool:
    """The topic grows from 2 to 4 partitions under a Stable one-member group."""
    from confluent_kafka.admin import AdminClient, NewPartitions
    from kafka import KafkaConsumer

    topic = f"bug-b-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, 2)
    consumer = KafkaConsumer(
        topic, bootstrap_servers=bootstrap, group_id=f"g-{topic}", metadata_max_age_ms=500
    )
    try:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and len(consumer.assignment()) != 2:
            consumer.poll(timeout_ms=100)
        print(f"B: before growing: {client_state(consumer)}")
        delay_sync_group_answers(consumer)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for f in admin.create_partitions([NewPartitions(topic, 4)]).values():
            f.result(30)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and len(consumer.assignment()) != 4:
            consumer.poll(timeout_ms=100)
        stuck = len(consumer.assignment()) != 4
        group = admin.describe_consumer_groups([f"g-{topic}"])[f"g-{topic}"].result(10)
        print(f"B: 15 s after growing: {client_state(consumer)}")
        print(f"B: broker: group {group.state} with {len(group.members)} member(s)")
        return stuck
    finally:
        consumer.close()


def main() -> int:
    global SYNC_DELAY_S
    if "--sync-delay-ms" in sys.argv:
        SYNC_DELAY_S = int(sys.argv[sys.argv.index("--sync-delay-ms") + 1]) / 1000
    with (
        tempfile.TemporaryDirectory() as tmp,
        broker_process(Path(tmp) / "data", "num.partitions=1") as bootstrap,
    ):
        a = bug_a(bootstrap)
        b = bug_b(bootstrap)
    print(f"bug A reproduced: {a}; bug B reproduced: {b}")
    return 0 if a and b else 1


if __name__ == "__main__":
    sys.exit(main())
