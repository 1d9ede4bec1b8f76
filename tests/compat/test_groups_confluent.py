"""Consumer groups of confluent-kafka (librdkafka) against kafkalite's group coordinator: range, roundrobin
and cooperative-sticky balance, failover after a SIGKILL, static membership, joins and new partitions."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from groups_support import GROUP_BROKER_PROPS, MemberProcess, produce_numbered, wait_until

from kafkalite.testing import Broker

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewPartitions  # noqa: E402

pytestmark = pytest.mark.compat


@pytest.fixture(scope="module")
def gbroker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    with Broker(tmp_path_factory.mktemp("groups-confluent"), **GROUP_BROKER_PROPS) as b:
        yield b


def new_topic(b: Broker, partitions: int) -> str:
    name = f"g-{uuid.uuid4().hex[:10]}"
    b.create_topic(name, partitions)
    return name


def consumer(b: Broker, group: str, strategy: str = "range", **extra: Any) -> Consumer:
    conf = {
        "bootstrap.servers": b.bootstrap_servers,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 500,
        "partition.assignment.strategy": strategy,
        "topic.metadata.refresh.interval.ms": 1000,
        **extra,
    }
    return Consumer(conf)


class Pump:
    """Polls several consumers in turn (librdkafka serves rebalances from poll) and collects values."""

    def __init__(self, consumers: list[Consumer]) -> None:
        self.consumers = consumers
        self.values: dict[int, list[str]] = {i: [] for i in range(len(consumers))}

    def poll_once(self) -> None:
        for i, c in enumerate(self.consumers):
            m = c.poll(0.02)
            if m is not None and m.error() is None:
                self.values[i].append(m.value().decode())

    def until(self, cond: Any, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.poll_once()
            if cond():
                return
        raise AssertionError(
            f"timed out after {timeout:.0f} s waiting for {what}; assignments {self.assignments()}"
        )

    def assignments(self) -> list[list[int]]:
        return [sorted(tp.partition for tp in c.assignment()) for c in self.consumers]

    def all_values(self) -> set[str]:
        return {v for vs in self.values.values() for v in vs}


def group_state(b: Broker, group: str) -> tuple[str, int, str | None, int]:
    def read() -> tuple[str, int, str | None, int]:
        g = b.server.groups.coordinator.groups[group]
        return str(g.state), g.generation_id, g.protocol_name, len(g.members)

    return b.call(read)  # type: ignore[no-any-return]


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "cooperative-sticky"])
def test_three_consumers_share_six_partitions_then_a_fourth_joins(
    gbroker: Broker, strategy: str
) -> None:
    topic = new_topic(gbroker, 6)
    group = f"grp-{strategy}-{uuid.uuid4().hex[:6]}"
    produced = produce_numbered(gbroker.bootstrap_servers, topic, 0, 60, 6)
    consumers = [consumer(gbroker, group, strategy) for _ in range(3)]
    pump = Pump(consumers)
    try:
        for c in consumers:
            c.subscribe([topic])
        pump.until(
            lambda: (
                [len(a) for a in pump.assignments()] == [2, 2, 2] and pump.all_values() == produced
            ),
            60,
            "2 partitions each and every message",
        )
        assert sorted(p for a in pump.assignments() for p in a) == [0, 1, 2, 3, 4, 5]
        state, generation, protocol, members = group_state(gbroker, group)
        assert (state, protocol, members) == ("Stable", strategy, 3)

        # a fourth member joins: the group rebalances and everyone gets a share
        consumers.append(consumer(gbroker, group, strategy))
        pump.values[3] = []
        consumers[3].subscribe([topic])
        more = produce_numbered(gbroker.bootstrap_servers, topic, 60, 60, 6)
        pump.until(
            lambda: (
                sorted(len(a) for a in pump.assignments()) == [1, 1, 2, 2]
                and more <= pump.all_values()
            ),
            60,
            "a rebalance over four members",
        )
        assert sorted(p for a in pump.assignments() for p in a) == [0, 1, 2, 3, 4, 5]
        state, generation2, _, members = group_state(gbroker, group)
        assert generation2 > generation and members == 4
    finally:
        for c in consumers:
            c.close()


def test_new_partitions_are_picked_up_by_a_rebalance(gbroker: Broker) -> None:
    topic = new_topic(gbroker, 2)
    group = f"grp-grow-{uuid.uuid4().hex[:6]}"
    consumers = [consumer(gbroker, group) for _ in range(2)]
    pump = Pump(consumers)
    try:
        for c in consumers:
            c.subscribe([topic])
        pump.until(lambda: [len(a) for a in pump.assignments()] == [1, 1], 60, "one partition each")
        admin = AdminClient({"bootstrap.servers": gbroker.bootstrap_servers})
        for fut in admin.create_partitions([NewPartitions(topic, 6)]).values():
            fut.result(30)
        values = produce_numbered(gbroker.bootstrap_servers, topic, 0, 60, 6)
        pump.until(
            lambda: [len(a) for a in pump.assignments()] == [3, 3] and pump.all_values() == values,
            60,
            "three partitions each after the topic grew",
        )
    finally:
        for c in consumers:
            c.close()


def test_static_member_restart_gets_its_partitions_back_without_rebalance(gbroker: Broker) -> None:
    topic = new_topic(gbroker, 6)
    group = f"grp-static-{uuid.uuid4().hex[:6]}"
    first = [
        consumer(gbroker, group, **{"group.instance.id": f"inst-{i}", "session.timeout.ms": 30000})
        for i in range(2)
    ]
    pump = Pump(first)
    try:
        for c in first:
            c.subscribe([topic])
        pump.until(lambda: [len(a) for a in pump.assignments()] == [3, 3], 60, "3 partitions each")
        before = pump.assignments()
        state, generation, _, _ = group_state(gbroker, group)
        # a static member's close does not leave the group (KIP-345): it comes back under a new member id
        first[1].close()
        replacement = consumer(
            gbroker, group, **{"group.instance.id": "inst-1", "session.timeout.ms": 30000}
        )
        replacement.subscribe([topic])
        pump.consumers = [first[0], replacement]
        pump.until(
            lambda: pump.assignments() == before, 60, "the same partitions for the restarted member"
        )
        for _ in range(20):  # and the group stays where it was
            pump.poll_once()
        assert group_state(gbroker, group) == (state, generation, "range", 2)
        first[1] = replacement
    finally:
        for c in first:
            c.close()


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_killed_member_partitions_move_and_no_message_is_skipped(
    gbroker: Broker, strategy: str
) -> None:
    topic = new_topic(gbroker, 6)
    group = f"grp-kill-{uuid.uuid4().hex[:6]}"
    produced = produce_numbered(gbroker.bootstrap_servers, topic, 0, 600, 6)
    members = [
        MemberProcess("confluent", gbroker.bootstrap_servers, group, topic, strategy)
        for _ in range(3)
    ]
    try:
        wait_until(
            lambda: (
                sorted(len(m.assignment) for m in members) == [2, 2, 2]
                and all(len(m.values) >= 5 for m in members)
            ),
            60,
            "three members with two partitions each, consuming",
        )
        victim = members[1]
        victim.kill()
        survivors = [members[0], members[2]]
        produced |= produce_numbered(gbroker.bootstrap_servers, topic, 600, 60, 6)
        wait_until(
            lambda: sorted(len(m.assignment) for m in survivors) == [3, 3],
            30,
            "the victim's partitions moving to the survivors (session timeout 6 s)",
            detail=lambda: f"assignments seen: {[m.assignments_seen for m in members]}",
        )
        consumed = lambda: set().union(*(m.consumed() for m in members))  # noqa: E731
        wait_until(lambda: consumed() >= produced, 60, "every message consumed by someone")
        assert sorted(p for m in survivors for p in m.assignment) == [0, 1, 2, 3, 4, 5]
    finally:
        for m in members:
            m.terminate()
