"""ZooKeeper failures under a running three-broker cluster: brokers keep serving what they lead while
ZooKeeper is down and the controller resumes when it returns; a paused controller whose session expired
comes back as a zombie, is fenced, steps down and registers again.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalite.cluster.zk import KafkaZkClient
from kafkalite.local_cluster import LocalCluster
from kafkalite.zkserver import ZooKeeperServer

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

QUIET = {"log_level": 0}
SESSION_MS = 4000


@pytest.fixture
def own_zk_cluster(tmp_path: Path, zookeeper: ZooKeeperServer) -> Iterator[LocalCluster]:
    # a ZooKeeper of its own (`zookeeper` only ensures the package is there): this test kills it
    zk = ZooKeeperServer(tmp_path / "zookeeper").start()
    c = LocalCluster(
        tmp_path / "cluster",
        3,
        zookeeper=zk,
        config={
            "zookeeper.session.timeout.ms": SESSION_MS,
            "replica.lag.time.max.ms": 3000,
            "controlled.shutdown.retry.backoff.ms": 200,
        },
    )
    try:
        with c:
            yield c
    finally:
        zk.stop()


def wait_for(cond: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            got = cond()
        except Exception:
            got = None
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def leaders(admin: AdminClient, topic: str) -> dict[int, int]:
    md = admin.list_topics(topic, timeout=5)
    return {p.id: p.leader for p in md.topics[topic].partitions.values()}


class Writer:
    def __init__(self, bootstrap: str) -> None:
        self.p = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "message.timeout.ms": 30000,
                # a request in flight to a SIGSTOPped leader is given up on (and metadata refreshed)
                # after this, not after the default 30 s
                "request.timeout.ms": 5000,
                **QUIET,
            }
        )
        self.acked: dict[tuple[int, int], bytes] = {}
        self.failed = 0
        self.errors: list[str] = []
        self.reacked: list[tuple[tuple[int, int], bytes, bytes]] = []  # two records, one offset

    def send(self, topic: str, n: int, tag: str) -> None:
        def done(err: Any, m: Any) -> None:
            if err is None:
                key = (m.partition(), m.offset())
                if key in self.acked:
                    self.reacked.append((key, self.acked[key], m.value()))
                self.acked[key] = m.value()
            else:
                self.failed += 1
                self.errors.append(f"{m.value()!r}: {err}")

        for i in range(n):
            self.p.produce(topic, f"{tag}-{i}".encode(), partition=i % 3, on_delivery=done)
        assert self.p.flush(40) == 0


def read_all(bootstrap: str, topic: str, expect: int) -> dict[tuple[int, int], bytes]:
    c = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False, **QUIET}
    )
    c.assign([TopicPartition(topic, p, 0) for p in range(3)])
    seen: dict[tuple[int, int], bytes] = {}
    deadline = time.monotonic() + 30
    while len(seen) < expect and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            seen[(m.partition(), m.offset())] = m.value()
    c.close()
    return seen


def registered(zk: KafkaZkClient) -> dict[int, int]:
    return {b: r.epoch for b, r in zk.live_brokers().items()}


def test_brokers_serve_through_a_zookeeper_outage_and_the_controller_resumes(
    own_zk_cluster: LocalCluster,
) -> None:
    cluster = own_zk_cluster
    bs = cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bs, **QUIET})
    for f in admin.create_topics(
        [NewTopic("steady", 3, 3, config={"min.insync.replicas": "2"})], operation_timeout=20
    ).values():
        f.result()
    w = Writer(bs)
    w.send("steady", 30, "before")

    # ZooKeeper dies for longer than the session timeout: produce and fetch go on
    cluster.zookeeper.kill()
    down_at = time.monotonic()
    w.send("steady", 60, "during")
    assert len(read_all(bs, "steady", 90)) == 90
    time.sleep(max(0.0, SESSION_MS / 1000 * 2 - (time.monotonic() - down_at)))
    w.send("steady", 30, "late")
    cluster.zookeeper.start()

    # ZooKeeper is back: the controller works again — a new topic gets leaders, a leader's death
    # is noticed and its partitions move
    zk = KafkaZkClient(cluster.zookeeper_connect)
    zk.start()
    try:
        wait_for(lambda: len(registered(zk)) == 3, 30, "all brokers registered again")
        _create_after_outage(admin, NewTopic("after", 3, 3))
        wait_for(lambda: all(x >= 0 for x in leaders(admin, "after").values()), 20, "leaders")
        victim = leaders(admin, "steady")[0]
        cluster.brokers[victim].kill()
        wait_for(
            lambda: leaders(admin, "steady")[0] not in (victim, -1),
            SESSION_MS / 1000 + 20,
            "partition 0 to get a new leader",
        )
        w.send("steady", 30, "failover")
        cluster.brokers[victim].start()
    finally:
        zk.close()
    seen = read_all(bs, "steady", len(w.acked))
    lost = {k for k in w.acked if k not in seen}
    moved = {k for k in w.acked if k in seen and seen[k] != w.acked[k]}
    print(f"acknowledged {len(w.acked)}, failed {w.failed}, lost {len(lost)}, moved {len(moved)}")
    assert not w.reacked, f"offsets acknowledged twice: {w.reacked[:5]}"
    assert len(w.acked) == 150 and not lost and not moved


def test_a_paused_controller_is_fenced_steps_down_and_registers_again(
    own_zk_cluster: LocalCluster,
) -> None:
    cluster = own_zk_cluster
    bs = cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bs, **QUIET})
    for f in admin.create_topics([NewTopic("z", 3, 3)], operation_timeout=20).values():
        f.result()
    w = Writer(bs)
    w.send("z", 30, "before")
    zk = KafkaZkClient(cluster.zookeeper_connect)
    zk.start()
    try:
        first = zk.read_controller()
        assert first is not None
        old_id, old_epoch = first
        epochs = registered(zk)
        # SIGSTOP the controller past its session: the others elect a new one (a higher epoch)
        cluster.brokers[old_id].pause()
        now = wait_for(
            lambda: (c := zk.read_controller()) is not None and c[0] != old_id and c,
            SESSION_MS / 1000 + 20,
            "a new controller",
        )
        assert now[1] > old_epoch
        # the survivors carry on (the paused broker's partitions have new leaders); a fresh producer
        # that knows only them, as a client in flight to a SIGSTOPped broker would hang on it
        survivors = ",".join(b.bootstrap for i, b in cluster.brokers.items() if i != old_id)
        w2 = Writer(survivors)
        w2.send("z", 30, "without")
        cluster.brokers[old_id].resume()
        # the zombie learns its session expired, steps down and registers with a new broker epoch
        wait_for(
            lambda: registered(zk).get(old_id, -1) > epochs[old_id],
            30,
            "the paused broker to register again",
        )
        assert zk.read_controller() == now  # it did not take the office back
        wait_for(
            lambda: all(
                len(p.isrs) == 3 for p in admin.list_topics("z").topics["z"].partitions.values()
            ),
            30,
            "the paused broker to rejoin every ISR",
        )
        w.send("z", 30, "after")
    finally:
        zk.close()
    acked = {**w.acked, **w2.acked}
    print(f"acknowledged {len(acked)}, failed {w.failed + w2.failed}: {(w.errors + w2.errors)[:3]}")
    assert len(acked) == 90 and not w.reacked and not w2.reacked
    seen = read_all(bs, "z", len(acked))
    assert seen == acked
    log = cluster.brokers[old_id].log_path.read_text()
    assert "steps down as controller" in log or "no longer the controller" in log
    assert "registered broker" in log and "again" in log


def _create_after_outage(admin: AdminClient, topic: NewTopic) -> None:
    """CreateTopics once ZooKeeper is back. A connection that breaks while the answer is on its way
    (seen once in three full runs, not yet diagnosed) is retried; a retry that finds the topic made
    by the first attempt counts as made."""
    for attempt in range(3):
        try:
            for f in admin.create_topics([topic], operation_timeout=20).values():
                f.result()
            return
        except KafkaException as exc:
            err = exc.args[0]
            if attempt and err.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                return
            if err.code() != KafkaError._TRANSPORT or attempt == 2:
                raise
            time.sleep(1)
