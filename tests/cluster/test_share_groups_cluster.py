"""KIP-932 in a 3-broker cluster: two confluent-kafka ShareConsumers accept records from a replicated
partition while a producer writes, and the partition's leader (the share-partition leader) is SIGKILLed
and restarted; the new leader rebuilds the share-partition from the replicated `__share_group_state`.
Every acknowledged record is delivered, and none whose acceptance the broker confirmed comes back.
"""

from __future__ import annotations

import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalite.local_cluster import LocalCluster
from kafkalite.zkserver import ZooKeeperServer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "compat"))
from share_support import ACCEPT, consumer, set_group_configs

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


@pytest.fixture
def cluster(tmp_path: Path, zookeeper: ZooKeeperServer) -> Iterator[LocalCluster]:
    c = LocalCluster(
        tmp_path / "cluster",
        3,
        zookeeper=zookeeper,
        chroot=f"/{tmp_path.name}",
        config={
            "group.share.min.record.lock.duration.ms": 1000,
            "group.share.record.lock.duration.ms": 3000,
            "group.share.min.session.timeout.ms": 6000,
            "group.share.session.timeout.ms": 6000,
            "group.share.min.heartbeat.interval.ms": 500,
            "group.share.heartbeat.interval.ms": 500,
            "replica.lag.time.max.ms": 2000,
            "min.insync.replicas": 2,
        },
    )
    with c:
        yield c


EVENTS: list[tuple[float, str, int]] = []  # (time, "deliver" | "confirm", offset)
EVENTS_LOCK = threading.Lock()


class ShareWorker:
    """A ShareConsumer in a thread: accepts every record and commits; logs each delivery and each
    acceptance the broker confirmed."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        self.delivered: list[int] = []
        self.confirmed: set[int] = set()
        self.unconfirmed = 0
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(bootstrap, group, topic))
        self.thread.start()

    def _run(self, bootstrap: str, group: str, topic: str) -> None:
        try:
            c = consumer(bootstrap, group, **{"max.poll.records": 50})
            c.subscribe([topic])
            while not self.stop.is_set():
                msgs = [m for m in c.poll(0.3) if m.error() is None]
                if not msgs:
                    continue
                for m in msgs:
                    c.acknowledge(m, ACCEPT)
                offsets = [m.offset() for m in msgs]
                now = time.monotonic()
                with self.lock:
                    self.delivered += offsets
                with EVENTS_LOCK:
                    EVENTS.extend((now, "deliver", o) for o in offsets)
                try:
                    result = c.commit_sync(30)
                    ok = all(v is None for v in result.values())
                except Exception:
                    ok = False
                now = time.monotonic()
                with self.lock:
                    if ok:
                        self.confirmed.update(offsets)
                    else:
                        self.unconfirmed += len(offsets)
                if ok:
                    with EVENTS_LOCK:
                        EVENTS.extend((now, "confirm", o) for o in offsets)
            c.close()
        except BaseException as exc:
            self.error = exc


def _wait_for(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def test_share_group_survives_its_partition_leader(cluster: LocalCluster) -> None:
    bs = cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bs})
    topic = f"sharec-{uuid.uuid4().hex[:6]}"
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
    group = f"sg-{uuid.uuid4().hex[:6]}"
    set_group_configs(bs, group, {"share.auto.offset.reset": "earliest"})
    acked: set[int] = set()
    stop_producing = threading.Event()

    def produce() -> None:
        p = Producer({"bootstrap.servers": bs, "acks": "all", "enable.idempotence": True,
                      "linger.ms": 5})  # fmt: skip

        def done(err: Any, msg: Any) -> None:
            if err is None:
                acked.add(msg.offset())

        i = 0
        while not stop_producing.is_set():
            p.produce(topic, value=f"r{i}".encode(), partition=0, on_delivery=done)
            i += 1
            p.poll(0)
            time.sleep(0.004)
        p.flush(60)

    producer = threading.Thread(target=produce)
    producer.start()
    workers = [ShareWorker(bs, group, topic) for _ in range(2)]

    def accepted() -> set[int]:
        out: set[int] = set()
        for w in workers:
            with w.lock:
                out |= w.confirmed | set(w.delivered)
        return out

    def confirmed_count() -> int:
        return sum(len(w.confirmed) for w in workers)

    try:
        # the share group is consuming: acceptances confirmed by the partition's leader
        _wait_for(lambda: confirmed_count() >= 100, 60, "the share consumers to accept records")
        leader = int(admin.list_topics(topic, timeout=10).topics[topic].partitions[0].leader)
        cluster.brokers[leader].kill()
        time.sleep(5)  # down for a while, within its ZooKeeper session (6 s)
        cluster.brokers[leader].start()
        # back: in the ISR again, and records produced after its restart are accepted and confirmed
        restarted_at = max(acked, default=0)
        _wait_for(
            lambda: (
                leader in admin.list_topics(topic, timeout=10).topics[topic].partitions[0].isrs
                and any(o > restarted_at + 200 for w in workers for o in list(w.confirmed))
            ),
            60,
            "the restarted broker back in the ISR and acceptances confirmed after it",
        )
    finally:
        stop_producing.set()
        producer.join(90)

    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and not acked <= accepted():
        time.sleep(0.5)
    time.sleep(4)  # anything still to be redelivered (an expired lock) has time to come back
    for w in workers:
        w.stop.set()
    for w in workers:
        w.thread.join(60)
    assert all(w.error is None for w in workers), [w.error for w in workers]
    delivered = [o for w in workers for o in w.delivered]
    confirmed: dict[int, int] = {}
    for w in workers:
        for o in w.confirmed:
            confirmed[o] = confirmed.get(o, 0) + 1
    lost = acked - set(delivered)
    # a record the broker confirmed accepted is never accepted twice, nor handed out again
    duplicated = {o for o, k in confirmed.items() if k > 1}
    first_confirm: dict[int, float] = {}
    for t, kind, o in sorted(EVENTS):
        if kind == "confirm":
            first_confirm.setdefault(o, t)
    redelivered_after_confirm = {
        o for t, kind, o in EVENTS if kind == "deliver" and t > first_confirm.get(o, float("inf"))
    }
    unconfirmed = sum(w.unconfirmed for w in workers)
    print(
        f"share group across a leader SIGKILL: acknowledged {len(acked)}, lost {len(lost)}, "
        f"duplicated {len(duplicated)}, delivered {len(delivered)}, "
        f"acceptances unconfirmed {unconfirmed}"
    )
    assert not lost, sorted(lost)[:20]
    assert not duplicated, sorted(duplicated)[:20]
    assert not redelivered_after_confirm, sorted(redelivered_after_confirm)[:20]
