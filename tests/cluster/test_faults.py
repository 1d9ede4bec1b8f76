"""The fault test of replication: three brokers, RF=3, min.insync.replicas=2, a confluent-kafka
producer (acks=all, idempotence) writing numbered records while the test SIGKILLs a partition
leader and the controller (and restarts them) and SIGSTOPs a follower past replica.lag.time.max.ms,
each fault once by default; KAFKALITE_CHAOS_SECONDS=60 goes on with random faults for a minute (a soak).
Afterwards every acknowledged record must be read back exactly once, at the offset it was acknowledged
with.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalite.local_cluster import LocalCluster
from kafkalite.zkserver import ZooKeeperServer

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

QUIET = {"log_level": 0}
TOPIC = "chaos"
PARTITIONS = 3
# 0: each of the three faults once; more: random faults after them until this many seconds have passed
CHAOS_SECONDS = int(os.environ.get("KAFKALITE_CHAOS_SECONDS", "0"))


@pytest.fixture
def cluster(tmp_path: Path, zookeeper: ZooKeeperServer) -> Iterator[LocalCluster]:
    c = LocalCluster(
        tmp_path / "cluster",
        3,
        zookeeper=zookeeper,
        chroot=f"/{tmp_path.name}",
        config={
            "replica.lag.time.max.ms": 2000,
            "zookeeper.session.timeout.ms": 6000,
            "min.insync.replicas": 2,
            "replica.fetch.backoff.ms": 200,
        },
    )
    with c:
        yield c


class Writer(threading.Thread):
    """Numbered records, as fast as acks=all allows; remembers where each was acknowledged."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(name="writer", daemon=True)
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.timeout.ms": 120_000,
                **QUIET,
            }
        )
        self.acked: dict[bytes, tuple[int, int]] = {}
        self.failed = 0
        self.sent = 0
        self.refused: list[str] = []
        self.stop = threading.Event()

    def _done(self, err: Any, msg: Any) -> None:
        if err is None:
            self.acked[msg.value()] = (msg.partition(), msg.offset())
        else:
            self.failed += 1

    def run(self) -> None:
        n = 0
        while not self.stop.is_set():
            if len(self.producer) > 2000:
                self.producer.poll(0.05)
                continue
            try:
                self.producer.produce(
                    TOPIC, f"r{n:08d}".encode(), partition=n % PARTITIONS, on_delivery=self._done
                )
            except KafkaException as exc:  # a local refusal: not acknowledged, keep writing
                self.refused.append(str(exc))
                self.producer.poll(0.1)
            n += 1
            self.sent = n
            if n % 50 == 0:
                self.producer.poll(0.002)
        self.producer.flush(120)


def _metadata(admin: AdminClient) -> Any:
    return admin.list_topics(TOPIC, timeout=10)


def _read_all(bootstrap: str) -> dict[tuple[int, int], bytes]:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "checker",
            "enable.auto.commit": False,
            **QUIET,
        }
    )
    got: dict[tuple[int, int], bytes] = {}
    errors: list[str] = []
    ends = {}
    for p in range(PARTITIONS):
        _, hi = c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)
        ends[p] = hi
    c.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    counts = dict.fromkeys(ends, 0)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and any(counts[p] < ends[p] for p in ends):
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            errors.append(str(m.error()))
            continue
        got[(m.partition(), m.offset())] = m.value()
        counts[m.partition()] += 1
    c.close()
    print(f"high watermarks {ends}, records read per partition {counts}, errors {errors[:5]}")
    return got


def test_acknowledged_records_survive_kills_stops_and_controller_failover(
    cluster: LocalCluster,
) -> None:
    rng = random.Random(int(time.time()))
    bs = cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bs, **QUIET})
    for f in admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)], operation_timeout=20).values():
        f.result()
    writer = Writer(bs)
    writer.start()
    log: list[str] = []
    started = time.monotonic()
    actions = ["kill-leader", "stop-follower", "kill-controller"]
    i = 0
    while i < len(actions) or time.monotonic() - started < CHAOS_SECONDS:
        time.sleep(rng.uniform(2, 5))
        action = actions[i % len(actions)] if i < len(actions) else rng.choice(actions)
        i += 1
        md = _metadata(admin)
        parts = list(md.topics[TOPIC].partitions.values())
        if action == "kill-leader":
            victim = rng.choice([p.leader for p in parts if p.leader > 0] or [1])
            cluster.brokers[victim].kill()
            time.sleep(rng.uniform(0.5, 3))
            cluster.brokers[victim].start()
        elif action == "kill-controller":
            victim = md.controller_id if md.controller_id > 0 else rng.choice([1, 2, 3])
            cluster.brokers[victim].kill()
            time.sleep(rng.uniform(0.5, 3))
            cluster.brokers[victim].start()
        else:
            p = rng.choice(parts)
            followers = [r for r in p.replicas if r != p.leader]
            victim = rng.choice(followers or [1])
            cluster.brokers[victim].pause()
            time.sleep(3.0)  # past replica.lag.time.max.ms, short of the session timeout
            cluster.brokers[victim].resume()
        log.append(f"{time.monotonic() - started:5.1f}s {action} broker {victim}")
    writer.stop.set()
    writer.join(180)
    for b in cluster.brokers.values():
        if not b.running:
            b.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        parts = list(_metadata(admin).topics[TOPIC].partitions.values())
        if all(len(p.isrs) == 3 and p.leader > 0 for p in parts):
            break
        time.sleep(0.5)
    got = _read_all(bs)
    by_value: dict[bytes, list[tuple[int, int]]] = {}
    for where, value in got.items():
        by_value.setdefault(value, []).append(where)
    lost = [v for v, where in writer.acked.items() if v not in by_value]
    moved = [v for v, where in writer.acked.items() if v in by_value and where not in by_value[v]]
    duplicated = [v for v, where in by_value.items() if len(where) > 1]
    print("\n".join(log))
    print(
        f"sent {writer.sent}, acknowledged {len(writer.acked)}, failed {writer.failed}, "
        f"refused by the client {len(writer.refused)} {writer.refused[:1]}, "
        f"read {len(got)}, lost {len(lost)}, moved {len(moved)}, duplicated {len(duplicated)}"
    )
    assert len(writer.acked) > 1000, "the writer made too little progress to judge"
    assert not lost, f"acknowledged but lost: {lost[:5]}"
    assert not moved, f"acknowledged at another offset: {moved[:5]}"
    assert not duplicated, f"stored twice: {duplicated[:5]}"
