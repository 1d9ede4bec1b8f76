"""Partition moves under faults on four brokers: the controller is SIGKILLed while two partitions of a
topic move (an idempotent acks=all producer and a two-member consumer group keep using it; its leader
is being removed) and the move completes; a topic deleted mid-move is deleted only once its move is done.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_support import (
    QUIET,
    AckedWriter,
    alter_reassignments,
    controller_epoch,
    exactly_once,
    listed_reassignments,
    partition_dirs,
    read_all,
    topic_known,
    wait_until,
)
from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import TopicPartition as KpTopicPartition
from kazoo.client import KazooClient

from kafkalite.local_cluster import LocalCluster
from kafkalite.protocol.errors import ErrorCode
from kafkalite.zkserver import ZooKeeperServer

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

TOPIC, DOOMED = "moving", "doomed"
SESSION_MS, HEARTBEAT_MS, INITIAL_DELAY_MS = 6000, 1000, 0  # the consumer group's settings


@pytest.fixture
def cluster(tmp_path: Path, zookeeper: ZooKeeperServer) -> Iterator[LocalCluster]:
    c = LocalCluster(
        tmp_path / "cluster",
        4,
        zookeeper=zookeeper,
        chroot=f"/{tmp_path.name}",
        config={
            "replica.lag.time.max.ms": 3000,
            "zookeeper.session.timeout.ms": 5000,
            "min.insync.replicas": 2,
            "replica.fetch.backoff.ms": 200,
            "group.initial.rebalance.delay.ms": INITIAL_DELAY_MS,
        },
    )
    with c:
        yield c


class Member(threading.Thread):
    """A member of the consumer group: when it first got each record (monotonic clock)."""

    def __init__(self, bootstrap: str, name: str) -> None:
        super().__init__(name=name, daemon=True)
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "movers",
                "auto.offset.reset": "earliest",
                "session.timeout.ms": SESSION_MS,
                "heartbeat.interval.ms": HEARTBEAT_MS,
                **QUIET,
            }
        )
        self.got: list[tuple[float, int, bytes]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        self.consumer.subscribe([TOPIC])
        while not self.stop.is_set():
            m = self.consumer.poll(0.1)
            if m is not None and not m.error():
                self.got.append((time.monotonic(), m.partition(), m.value()))
        self.consumer.close()


def longest_stall(members: list[Member], acked_at: dict[bytes, float], until: float) -> float:
    """The longest time a partition's consumption stood still while a record acknowledged to the
    producer waited to be consumed: gaps between the records a partition delivered to the group,
    each counted from the later of the previous delivery and the waiting record's ack."""
    first: dict[bytes, tuple[float, int]] = {}
    for m in members:
        for t, p, v in m.got:
            if v not in first or t < first[v][0]:
                first[v] = (t, p)
    worst = 0.0
    for p in {p for _t, p in first.values()}:
        seen = sorted((t, v) for v, (t, q) in first.items() if q == p and t <= until)
        for (t_a, _), (t_b, v) in itertools.pairwise(seen):
            worst = max(worst, t_b - max(t_a, acked_at.get(v, t_b)))
    return worst


def test_controller_killed_mid_move_and_a_topic_deleted_mid_move(cluster: LocalCluster) -> None:
    t0 = time.monotonic()
    bs = cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bs, **QUIET})
    controller = admin.describe_cluster().result().controller.id
    # the leader (first replica) leaves, the controller stays, the joining broker is the other one
    leaving, staying, joining = [b for b in (1, 2, 3, 4) if b != controller]
    origin, target = [leaving, controller, staying], [controller, staying, joining]
    new = [
        NewTopic(TOPIC, 2, replication_factor=-1, replica_assignment=[origin, origin]),
        NewTopic(DOOMED, 1, replication_factor=-1, replica_assignment=[origin]),
    ]
    for f in admin.create_topics(new, operation_timeout=20).values():
        f.result()
    raw = KazooClient(hosts=cluster.zookeeper_connect)
    raw.start()
    epoch = controller_epoch(raw)
    writer = AckedWriter(bs, TOPIC, 2)
    members = [Member(bs, "member-a"), Member(bs, "member-b")]
    writer.start()
    for m in members:
        m.start()
    moves = {KpTopicPartition(TOPIC, 0), KpTopicPartition(TOPIC, 1), KpTopicPartition(DOOMED, 0)}
    try:
        wait_until("both members consuming", lambda: all(m.got for m in members), 30, t0)
        # the joining broker is held still so the moves are surely in flight when listed
        cluster.brokers[joining].pause()
        try:
            # asked of the controller itself: a client's admin may pick the stopped broker
            res = alter_reassignments(cluster, raw, dict.fromkeys(moves, target))
            assert res == dict.fromkeys(moves, ErrorCode.NO_ERROR)
            assert set(listed_reassignments(cluster, raw) or ()) == moves
            # Kafka's ZooKeeper mode: a topic being reassigned is ineligible for deletion; the
            # request times out, the topic stays (its move listed) and goes once the move is done
            (deletion,) = admin.delete_topics([DOOMED], operation_timeout=1.0).values()
            with pytest.raises(KafkaException) as exc:
                deletion.result(10)
            assert exc.value.args[0].code() == KafkaError.REQUEST_TIMED_OUT
            assert topic_known(cluster, controller, DOOMED)
            assert set(listed_reassignments(cluster, raw) or ()) == moves
            # the controller dies mid-move (a crash, not a resignation)
            cluster.brokers[controller].kill()
            killed = time.monotonic()
        finally:
            cluster.brokers[joining].resume()
        wait_until("a new controller", lambda: controller_epoch(raw) > epoch, 20, t0)
        cluster.brokers[controller].start()
        # the old controller is dead: the new one resumed the moves from the topic znodes
        wait_until("the moves to finish", lambda: listed_reassignments(cluster, raw) == [], 30, t0)
        print(f"moves done {time.monotonic() - killed:.1f} s after the controller was killed")
        seen: list[object] = []

        def moved() -> bool:  # any broker may answer; one just restarted may lag a moment
            try:
                seen[:] = [replicas(admin)]
            except Exception as exc:  # a broker of the answer may be restarting
                seen[:] = [exc]
            return seen[0] == [target, target]

        try:
            wait_until("metadata of the move", moved, 30, t0)
        except AssertionError as exc:
            raise AssertionError(f"{exc}; last seen {seen} for {target}") from None
        wait_until("the deletion held back to finish", lambda: not has_topic(admin, DOOMED), 15, t0)
        time.sleep(1.0)  # keep producing and consuming against the new replica sets
    finally:
        writer.stop.set()
        writer.join(90)
        stopped_at = time.monotonic()
        for m in members:
            m.stop.set()
        for m in members:
            m.join(30)
    for p in (0, 1):
        wait_until(
            f"broker {leaving} to delete its copy of {TOPIC}-{p}",
            lambda p=p: not partition_dirs(cluster, leaving, TOPIC, p),
            15,
            t0,
        )
        assert partition_dirs(cluster, joining, TOPIC, p)
    for b in (1, 2, 3, 4):
        wait_until(
            f"broker {b} to delete {DOOMED}-0",
            lambda b=b: not partition_dirs(cluster, b, DOOMED, 0),
            15,
            t0,
        )
    raw.stop()

    stall = longest_stall(members, writer.acked_at, stopped_at)
    acks = sorted(writer.acked_at.values())
    ack_gap = max((b - a for a, b in itertools.pairwise(acks)), default=0.0)
    bound = (SESSION_MS + 2 * HEARTBEAT_MS + INITIAL_DELAY_MS) / 1000  # one rebalance, at worst
    got = read_all(bs, TOPIC, 2)
    lost, duplicated, misplaced = exactly_once(writer.acked, got)
    print(
        f"controller {controller} killed; {TOPIC} moved {origin} -> {target}; "
        f"acknowledged {len(writer.acked)}, failed {writer.failed}, read {len(got)}, "
        f"lost {len(lost)}, duplicated {len(duplicated)}, misplaced {len(misplaced)}; "
        f"group consumed {sum(len(m.got) for m in members)}, longest stall {stall:.2f} s "
        f"(bound {bound:.1f} s); longest pause of the producer's acks {ack_gap:.2f} s"
    )
    assert len(writer.acked) > 500, "the writer made too little progress to judge"
    assert not lost and not duplicated and not misplaced
    assert stall < bound


def replicas(admin: AdminClient) -> list[list[int]]:
    md = admin.list_topics(TOPIC, timeout=10).topics[TOPIC]
    return [list(md.partitions[p].replicas) for p in sorted(md.partitions)]


def has_topic(admin: AdminClient, name: str) -> bool:
    return name in admin.list_topics(timeout=10).topics
