"""Consumer groups of kafka-python (and a group mixing kafka-python with confluent-kafka) against kafkalite:
balance, failover after a SIGKILL, commits that resume, and mixed-client membership."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from groups_support import GROUP_BROKER_PROPS, MemberProcess, produce_numbered, wait_until

from kafkalite.testing import Broker

kafka = pytest.importorskip("kafka")
from kafka import KafkaConsumer, TopicPartition  # noqa: E402

pytestmark = pytest.mark.compat

# kafka-python 3.0.12 loses an assignment when a leader's metadata-triggered rejoin is still
# waiting on SyncGroup as poll()'s timer runs out: once the leader has computed the assignment
# its need_rejoin() turns False, the next poll() never awaits the pending join task, and the
# member is left with no partitions and no heartbeat. poll() returns as soon as records arrive,
# so a timer that covers a JoinGroup+SyncGroup round trip costs these tests nothing.
KP_POLL_MS = 3000


@pytest.fixture(scope="module")
def gbroker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    with Broker(tmp_path_factory.mktemp("groups-kafka-python"), **GROUP_BROKER_PROPS) as b:
        yield b


def new_topic(b: Broker, partitions: int) -> str:
    name = f"kp-{uuid.uuid4().hex[:10]}"
    b.create_topic(name, partitions)
    return name


@pytest.mark.slow
def test_three_members_two_partitions_each_then_one_is_killed(gbroker: Broker) -> None:
    topic = new_topic(gbroker, 6)
    group = f"kp-{uuid.uuid4().hex[:6]}"
    produced = produce_numbered(gbroker.bootstrap_servers, topic, 0, 300, 6)
    members = [
        MemberProcess("kafka-python", gbroker.bootstrap_servers, group, topic, "range")
        for _ in range(3)
    ]
    try:
        wait_until(
            lambda: (
                sorted(len(m.assignment) for m in members) == [2, 2, 2]
                and all(len(m.values) >= 3 for m in members)
            ),
            90,
            "three kafka-python members with two partitions each",
            detail=lambda: str([m.assignments_seen for m in members]),
        )
        assert sorted(p for m in members for p in m.assignment) == [0, 1, 2, 3, 4, 5]
        members[0].kill()
        survivors = members[1:]
        produced |= produce_numbered(gbroker.bootstrap_servers, topic, 300, 60, 6)
        wait_until(
            lambda: sorted(len(m.assignment) for m in survivors) == [3, 3],
            45,
            "the killed member's partitions moving to the survivors",
            detail=lambda: str([m.assignments_seen for m in members]),
        )
        wait_until(
            lambda: set().union(*(m.consumed() for m in members)) >= produced,
            90,
            "every message consumed by someone",
        )
    finally:
        for m in members:
            m.terminate()


def test_commits_resume_where_the_group_left_off(gbroker: Broker) -> None:
    topic = new_topic(gbroker, 3)
    group = f"kp-resume-{uuid.uuid4().hex[:6]}"
    first = produce_numbered(gbroker.bootstrap_servers, topic, 0, 30, 3)
    c = KafkaConsumer(
        topic,
        bootstrap_servers=gbroker.bootstrap_servers,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
    )
    seen: set[str] = set()
    deadline = time.monotonic() + 60
    while seen != first and time.monotonic() < deadline:
        for msgs in c.poll(timeout_ms=KP_POLL_MS).values():
            seen.update(m.value.decode() for m in msgs)
    assert seen == first
    c.commit()
    committed = {p: c.committed(TopicPartition(topic, p)) for p in range(3)}
    assert committed == {0: 10, 1: 10, 2: 10}
    c.close()
    second = produce_numbered(gbroker.bootstrap_servers, topic, 30, 15, 3)
    c2 = KafkaConsumer(
        topic,
        bootstrap_servers=gbroker.bootstrap_servers,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=6000,
    )
    seen2: set[str] = set()
    deadline = time.monotonic() + 60
    while seen2 != second and time.monotonic() < deadline:
        for msgs in c2.poll(timeout_ms=KP_POLL_MS).values():
            seen2.update(m.value.decode() for m in msgs)
    c2.close()
    assert seen2 == second  # only what came after the commit


def test_group_mixing_kafka_python_and_confluent(gbroker: Broker) -> None:
    topic = new_topic(gbroker, 6)
    group = f"mixed-{uuid.uuid4().hex[:6]}"
    produced = produce_numbered(gbroker.bootstrap_servers, topic, 0, 120, 6)
    members = [
        MemberProcess("kafka-python", gbroker.bootstrap_servers, group, topic, "range"),
        MemberProcess("confluent", gbroker.bootstrap_servers, group, topic, "range"),
        MemberProcess("confluent", gbroker.bootstrap_servers, group, topic, "range"),
    ]
    try:
        wait_until(
            lambda: sorted(len(m.assignment) for m in members) == [2, 2, 2],
            90,
            "two partitions for each member of a mixed group",
            detail=lambda: str([m.assignments_seen for m in members]),
        )
        assert sorted(p for m in members for p in m.assignment) == [0, 1, 2, 3, 4, 5]
        wait_until(
            lambda: set().union(*(m.consumed() for m in members)) >= produced, 60, "every message"
        )
    finally:
        for m in members:
            m.terminate()
