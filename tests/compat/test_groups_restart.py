"""Group state across broker restarts: committed offsets and group metadata come back from
`__consumer_offsets`, consumers resume where they committed (clean stop and SIGKILL)."""

from __future__ import annotations

import signal
import time
import uuid
from pathlib import Path

import pytest
from groups_support import GROUP_BROKER_PROPS, produce_numbered, wait_until

from kafkalite.testing import Broker

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, TopicPartition  # noqa: E402

pytestmark = [pytest.mark.compat, pytest.mark.slow]


def member(bootstrap: str, group: str, **extra: object) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
            **extra,
        }
    )


def consume_exactly(c: Consumer, expected: set[str], timeout: float = 60) -> set[str]:
    seen: set[str] = set()
    deadline = time.monotonic() + timeout
    while seen != expected and time.monotonic() < deadline:
        m = c.poll(0.1)
        if m is not None and m.error() is None:
            seen.add(m.value().decode())
    return seen


def test_offsets_and_group_survive_a_clean_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    topic, group = "orders", f"g-{uuid.uuid4().hex[:6]}"
    with Broker(data, **GROUP_BROKER_PROPS) as b:
        b.create_topic(topic, 4)
        first = produce_numbered(b.bootstrap_servers, topic, 0, 80, 4)
        c = member(
            b.bootstrap_servers,
            group,
            **{"group.instance.id": "static-1", "session.timeout.ms": 60000},
        )
        c.subscribe([topic])
        assert consume_exactly(c, first) == first
        c.commit(asynchronous=False)
        before = b.call(lambda: b.server.groups.coordinator.groups[group].persisted_view())
        # a static member's close does not leave: the group stays Stable with its member
        c.close()
    with Broker(data, **GROUP_BROKER_PROPS) as b:
        g = b.call(lambda: b.server.groups.coordinator.groups[group])
        assert str(g.state) == "Stable"
        assert b.call(g.persisted_view) == before
        second = produce_numbered(b.bootstrap_servers, topic, 80, 20, 4)
        c = member(
            b.bootstrap_servers,
            group,
            **{"group.instance.id": "static-1", "session.timeout.ms": 60000},
        )
        c.subscribe([topic])
        try:
            assert consume_exactly(c, second) == second  # resumes after the committed offsets
            committed = c.committed([TopicPartition(topic, p) for p in range(4)], timeout=10)
            assert sorted(tp.offset for tp in committed) == [20, 20, 20, 20]
        finally:
            c.close()


def test_offsets_survive_sigkill(spawn_broker, port: int, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    overrides = ("group.initial.rebalance.delay.ms=0", "num.partitions=3")
    proc = spawn_broker(tmp_path / "data", port, *overrides).start()
    topic, group = "events", f"g-{uuid.uuid4().hex[:6]}"
    values = produce_numbered(proc.bootstrap_servers, topic, 0, 30, 3)
    c = member(proc.bootstrap_servers, group)
    c.subscribe([topic])
    try:
        assert consume_exactly(c, values) == values
        c.commit(asynchronous=False)
    finally:
        c.close()
    proc.stop(signal.SIGKILL)
    proc = spawn_broker(tmp_path / "data", port, *overrides).start()
    probe = member(proc.bootstrap_servers, group)
    try:
        parts = [TopicPartition(topic, p) for p in range(3)]
        got: list[int] = []

        def committed() -> bool:
            nonlocal got
            try:
                got = [tp.offset for tp in probe.committed(parts, timeout=5)]
            except confluent_kafka.KafkaException:
                return False  # still loading
            return got == [10, 10, 10]

        wait_until(committed, 30, "committed offsets after the restart", detail=lambda: str(got))
    finally:
        probe.close()
        proc.stop(signal.SIGTERM)
