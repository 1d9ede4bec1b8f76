"""A consumer-group member in its own process, for tests that kill members with SIGKILL.

Usage: python group_member_proc.py LIB BOOTSTRAP GROUP TOPIC STRATEGY [INSTANCE_ID]
(LIB: confluent | kafka-python). Prints `A <sorted partitions>` whenever its assignment changes and
`M <partition> <offset> <value>` for each message, committing synchronously after printing it.
"""

from __future__ import annotations

import os
import sys
import time


def out(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def run_confluent(
    bootstrap: str, group: str, topic: str, strategy: str, instance: str | None
) -> None:
    from confluent_kafka import Consumer, KafkaException

    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 500,
        "partition.assignment.strategy": strategy,
        "topic.metadata.refresh.interval.ms": 1000,
    }
    if instance:
        conf["group.instance.id"] = instance
    if os.environ.get("KL_RDKAFKA_DEBUG"):
        conf["debug"] = os.environ["KL_RDKAFKA_DEBUG"]
    c = Consumer(conf)
    c.subscribe([topic])
    last: list[int] | None = None
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        m = c.poll(0.1)
        now = sorted(tp.partition for tp in c.assignment())
        if now != last:
            last = now
            out("A " + ",".join(map(str, now)))
        if m is None or m.error() is not None:
            continue
        out(f"M {m.partition()} {m.offset()} {m.value().decode()}")
        try:
            c.commit(message=m, asynchronous=False)
        except KafkaException as exc:  # e.g. the group moved on under us: it will be redelivered
            sys.stderr.write(f"commit failed: {exc}\n")
        time.sleep(0.005)


def run_kafka_python(
    bootstrap: str, group: str, topic: str, strategy: str, instance: str | None
) -> None:
    from kafka import KafkaConsumer, OffsetAndMetadata
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.errors import KafkaError

    assignor = RoundRobinPartitionAssignor if strategy == "roundrobin" else RangePartitionAssignor
    c = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
        partition_assignment_strategy=[assignor],
        metadata_max_age_ms=1000,
    )
    last: list[int] | None = None
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        # A long timer: kafka-python 3.0.12 drops the assignment of a rejoin that outlives
        # poll()'s timer (see test_groups_kafka_python.KP_POLL_MS); records end the wait early.
        batch = c.poll(timeout_ms=3000, max_records=1)
        now = sorted(tp.partition for tp in c.assignment())
        if now != last:
            last = now
            out("A " + ",".join(map(str, now)))
        for tp, msgs in batch.items():
            for m in msgs:
                out(f"M {m.partition} {m.offset} {m.value.decode()}")
                try:
                    c.commit({tp: OffsetAndMetadata(m.offset + 1, "", -1)})
                except KafkaError as exc:  # a rebalance raced the commit: redelivered later
                    sys.stderr.write(f"commit failed: {exc!r}\n")
                time.sleep(0.005)


if __name__ == "__main__":
    lib, bootstrap, group, topic, strategy = sys.argv[1:6]
    instance = sys.argv[6] if len(sys.argv) > 6 else None
    {"confluent": run_confluent, "kafka-python": run_kafka_python}[lib](
        bootstrap, group, topic, strategy, instance
    )
