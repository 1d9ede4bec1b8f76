"""KIP-848 with librdkafka (`group.protocol=consumer`): consumers join, leave cleanly and are SIGKILLed
while a producer runs; no partition is ever held by two members (from their assignment callbacks), every
acknowledged record is consumed, committed offsets survive a broker restart, and an empty classic group
becomes a consumer group that resumes from its offsets.
"""

from __future__ import annotations

import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import (
    ConsumerGroupTopicPartitions,
    ConsumerGroupType,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic
from consumer_protocol_support import BackgroundProducer, Worker, check_exclusive

from kafkalite.cli.main import main as cli

pytestmark = pytest.mark.compat

OVERRIDES = (
    "group.consumer.session.timeout.ms=6000",
    "group.consumer.min.session.timeout.ms=6000",
    "group.consumer.heartbeat.interval.ms=500",
    "group.consumer.min.heartbeat.interval.ms=500",
    "num.partitions=6",
)


@pytest.fixture
def broker(tmp_path: Path, spawn_broker: Any, port: int) -> Iterator[Any]:
    """`kafkalite serve` in its own process (conftest.BrokerProcess), so it can be restarted."""
    b = spawn_broker(tmp_path / "data", port, *OVERRIDES).start()
    yield b


def _topic(bootstrap: str, partitions: int = 6) -> str:
    name = f"k848-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    return name


def _committed(bootstrap: str, group: str, topic: str, partitions: int = 6) -> dict[int, int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    parts = [TopicPartition(topic, p) for p in range(partitions)]
    request = [ConsumerGroupTopicPartitions(group, parts)]
    (future,) = admin.list_consumer_group_offsets(request).values()
    return {tp.partition: tp.offset for tp in future.result(30).topic_partitions}


@pytest.mark.slow
def test_members_come_and_go_while_a_producer_runs(broker: Any) -> None:
    bs = broker.bootstrap_servers
    topic = _topic(bs)
    group = f"g-{uuid.uuid4().hex[:6]}"
    producer = BackgroundProducer(bs, topic, 6)
    acked = producer.acked
    workers: list[Worker] = []

    def settled(*live: Worker) -> None:
        """Until the live members hold the six partitions between them, each some, and consume."""
        start = len(set().union(*(w.consumed() for w in workers)))
        assert _wait(
            lambda: (
                set().union(*(w.assigned() for w in live)) == set(range(6))
                and all(w.assigned() for w in live)
                and len(set().union(*(w.consumed() for w in workers))) >= start + 50
            ),
            60,
        ), [(w.name, w.changes()) for w in workers]

    try:
        for i in range(3):
            workers.append(Worker(bs, group, topic, f"c{i}", "consumer"))
            settled(*workers)
        workers[1].close()  # a clean leave
        settled(workers[0], workers[2])
        workers.append(Worker(bs, group, topic, "c3", "consumer"))
        settled(workers[0], workers[2], workers[3])
        workers[2].kill()  # SIGKILL: its partitions move once its session ends (6 s)
        workers.append(Worker(bs, group, topic, "c4", "consumer"))
        settled(workers[0], workers[3], workers[4])
    finally:
        producer.stop()
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline:
        consumed = set().union(*(w.consumed() for w in workers))
        if acked <= consumed:
            break
        time.sleep(0.5)
    # the last auto-commits: every acknowledged record committed (checked again below, after the closes)
    _wait(lambda: sum(_committed(bs, group, topic).values()) == len(acked), 15)
    for w in workers:
        w.close()
    consumed = set().union(*(w.consumed() for w in workers))
    missing = acked - consumed
    changes = check_exclusive(workers)
    print(
        f"\nacknowledged {len(acked)}, consumed {len(consumed & acked)}, missing {len(missing)}, "
        f"{changes} assignment changes over {len(workers)} members"
    )
    if missing:
        for w in workers:
            print(
                w.name,
                w.killed_at,
                [(round(e["t"], 2), e["ev"], e.get("parts")) for e in w.events if e["ev"] != "msg"],
            )
    assert not missing
    assert changes >= 6
    # what the group committed is still there after a restart, and the group is a consumer group
    before = _committed(bs, group, topic)
    assert sum(before.values()) == len(acked)  # every partition committed up to its end
    broker.stop(signal.SIGTERM)
    broker.start()
    assert _committed(bs, group, topic) == before
    admin = AdminClient({"bootstrap.servers": bs})
    (desc,) = [f.result(30) for f in admin.describe_consumer_groups([group]).values()]
    assert str(desc.type).endswith("CONSUMER")
    assert not desc.members


def test_an_empty_classic_group_becomes_a_consumer_group(
    broker: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    bs = broker.bootstrap_servers
    topic = _topic(bs, partitions=2)
    group = f"up-{uuid.uuid4().hex[:6]}"
    p = Producer({"bootstrap.servers": bs})
    for i in range(100):
        p.produce(topic, f"old-{i}".encode(), partition=i % 2)
    assert p.flush(30) == 0
    classic = Worker(bs, group, topic, "classic", "classic")
    deadline = time.monotonic() + 30
    while len(classic.consumed()) < 100 and time.monotonic() < deadline:
        time.sleep(0.2)
    _wait(lambda: _committed(bs, group, topic, 2) == {0: 50, 1: 50}, 15)  # its last auto-commit
    classic.close()
    assert len(classic.consumed()) == 100
    assert _committed(bs, group, topic, 2) == {0: 50, 1: 50}
    modern = Worker(bs, group, topic, "modern", "consumer")
    try:
        for i in range(20):
            p.produce(topic, f"new-{i}".encode(), partition=i % 2)
        assert p.flush(30) == 0
        deadline = time.monotonic() + 30
        while len(modern.consumed()) < 20 and time.monotonic() < deadline:
            time.sleep(0.2)
        # while it runs: listed as a consumer group, described with its epochs and assignor
        admin = AdminClient({"bootstrap.servers": bs})
        listed = admin.list_consumer_groups(types={ConsumerGroupType.CONSUMER}).result(30)
        assert group in {g.group_id for g in listed.valid}
        capsys.readouterr()
        assert cli(["groups", "describe", "--bootstrap-server", bs, "--group", group]) == 0
        out = capsys.readouterr().out
        assert "consumer group (KIP-848), state Stable" in out
        assert "assignor uniform, 1 member(s)" in out
    finally:
        modern.close()
    # it resumed from the classic group's offsets: only the new records
    assert modern.consumed() == {(i % 2, 50 + i // 2) for i in range(20)}


def _wait(check: Any, timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.2)
    return bool(check())


@pytest.mark.slow
def test_a_restarted_static_member_gets_its_partitions_back_without_a_rebalance(
    broker: Any,
) -> None:
    bs = broker.bootstrap_servers
    topic = _topic(bs)
    group = f"st-{uuid.uuid4().hex[:6]}"
    workers = [Worker(bs, group, topic, f"s{i}", "consumer", f"inst-{i}") for i in range(3)]
    admin = AdminClient({"bootstrap.servers": bs})

    def members() -> list[Any]:
        (desc,) = [f.result(30) for f in admin.describe_consumer_groups([group]).values()]
        return list(desc.members)

    try:
        # three static members on 6 partitions: two each once the group is stable
        assert _wait(lambda: [len(w.assigned()) for w in workers] == [2, 2, 2], 60), [
            w.changes() for w in workers
        ]
        assert sorted(m.group_instance_id for m in members()) == ["inst-0", "inst-1", "inst-2"]
        a, leaving, c = workers
        before = {w.name: w.changes() for w in (a, c)}
        held = leaving.assigned()
        leaving.close()  # librdkafka leaves with member epoch -2: the member stays, with its partitions
        assert leaving.events[-1]["ev"] == "closed"
        assert sorted(m.group_instance_id for m in members()) == ["inst-0", "inst-1", "inst-2"]
        back = Worker(bs, group, topic, "s1-again", "consumer", "inst-1")
        workers.append(back)
        assert _wait(lambda: back.assigned() == held, 30), back.changes()
        time.sleep(3)  # a few more heartbeats: still nothing moves for the others
        assert {w.name: w.changes() for w in (a, c)} == before
        assert back.assigned() == held and back.changes() == [("assign", sorted(held))]
        described = members()
        assert sorted(m.group_instance_id for m in described) == ["inst-0", "inst-1", "inst-2"]
        check_exclusive(workers)
    finally:
        for w in workers:
            w.close()
