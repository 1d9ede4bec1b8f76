"""The fault test of transactions: three brokers, RF=3, min.insync.replicas=2; a confluent-kafka
transactional producer commits numbered batches across two partitions while the test SIGKILLs the
broker coordinating its transactional id, then the leader of a data partition (and restarts each). Afterwards a read_committed consumer must
see every committed batch exactly once and nothing of a batch whose abort was acknowledged.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalite.coordinator.txn_records import partition_for
from kafkalite.local_cluster import LocalCluster
from kafkalite.zkserver import ZooKeeperServer

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

QUIET = {"log_level": 0}
TOPIC = "txn-chaos"
TXN_ID = "chaos-txn"
RUN_SECONDS = 24
# The run ends after RUN_SECONDS once both kills (and restarts) are done, so that a loaded machine
# cannot skip the second kill (issue 36, c: `kills == 2` failed on old commits too). Measured at load
# average 12 on 2 cores, no broker at fault: the first transaction after the coordinator's kill took
# 9-11 s (the dead broker is declared gone after zookeeper.session.timeout.ms, 6 s here, as Kafka's ZK
# mode does for a SIGKILL; librdkafka asks FindCoordinator again when its reconnect backoff to the
# dead coordinator expires, up to reconnect.backoff.max.ms = 10 s), then the restart below blocked
# 19-23 s, of which the new broker process spent 17 s importing kafkalite (2 s of CPU) and 1.2 s
# starting. The cap keeps a stuck run from running on.
MAX_RUN_SECONDS = 120


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
            "transaction.state.log.min.isr": 2,
            "replica.fetch.backoff.ms": 200,
        },
    )
    with c:
        yield c


def _leader(admin: AdminClient, topic: str, partition: int) -> int:
    md = admin.list_topics(topic, timeout=10)
    return int(md.topics[topic].partitions[partition].leader)


def _last_stable_offset(c: Consumer, partition: int) -> int:
    """read_committed high mark; the restarted broker may still be taking leadership back."""
    deadline = time.monotonic() + 60
    while True:
        try:
            return int(c.get_watermark_offsets(TopicPartition(TOPIC, partition), timeout=10)[1])
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def _coordinator(admin: AdminClient) -> int:
    p = partition_for(TXN_ID, 5)
    md = admin.list_topics("__transaction_state", timeout=10)
    return int(md.topics["__transaction_state"].partitions[p].leader)


def _new_producer(bs: str) -> Producer:
    p = Producer(
        {
            "bootstrap.servers": bs,
            "transactional.id": TXN_ID,
            "linger.ms": 2,
            "transaction.timeout.ms": 20000,
            "message.timeout.ms": 20000,
            **QUIET,
        }
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            p.init_transactions(20)
            return p
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def test_committed_batches_survive_coordinator_kills(cluster: LocalCluster) -> None:
    bs = cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bs, **QUIET})
    for f in admin.create_topics([NewTopic(TOPIC, 2, 3)], operation_timeout=20).values():
        f.result()
    producer = _new_producer(bs)
    committed: list[bytes] = []
    aborted: list[bytes] = []
    uncertain = 0
    kills = 0
    next_kill = time.monotonic() + 5
    started = time.monotonic()
    end, cap = started + RUN_SECONDS, started + MAX_RUN_SECONDS
    longest = 0.0  # the slowest transaction, begin to commit or abort
    n = 0
    while (time.monotonic() < end or kills < 2) and time.monotonic() < cap:
        if time.monotonic() >= next_kill and kills < 2:
            if kills == 0:
                victim, role = _coordinator(admin), f"the coordinator of {TXN_ID!r}"
            else:
                victim, role = _leader(admin, TOPIC, 1), f"the leader of {TOPIC}-1"
            cluster.brokers[victim].kill()
            kills += 1
            print(f"killed broker {victim} ({role})")
            next_kill = time.monotonic() + 8
            restart_at = time.monotonic() + 3
        else:
            restart_at = None
        batch = [b"b%05d-%d" % (n, j) for j in range(6)]
        n += 1
        began = time.monotonic()
        try:
            producer.begin_transaction()
            for j, v in enumerate(batch):
                producer.produce(TOPIC, value=v, partition=j % 2)
            producer.commit_transaction(30)
            committed += batch
        except KafkaException as exc:
            err = exc.args[0]
            if err.txn_requires_abort():
                try:
                    producer.abort_transaction(30)
                    aborted += batch
                except KafkaException:
                    uncertain += 1
                    producer = _new_producer(bs)
            else:
                uncertain += 1  # the outcome of this batch is not known to us: either is allowed
                producer = _new_producer(bs)
        longest = max(longest, time.monotonic() - began)
        if restart_at is not None:
            time.sleep(max(0.0, restart_at - time.monotonic()))
            for b in cluster.brokers.values():
                if not b.running:
                    b.start()
    c = Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": "txn-checker",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            **QUIET,
        }
    )
    ends = {p: _last_stable_offset(c, p) for p in (0, 1)}
    c.assign([TopicPartition(TOPIC, p, 0) for p in (0, 1)])
    seen: list[bytes] = []
    positions = {0: 0, 1: 0}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and any(positions[p] < ends[p] for p in ends):
        m = c.poll(0.5)
        if m is None:
            for p in ends:
                tp = c.position([TopicPartition(TOPIC, p)])[0]
                positions[p] = max(positions[p], tp.offset)
            continue
        if m.error():
            continue
        seen.append(m.value())
        positions[m.partition()] = m.offset() + 1
    c.close()
    counts = collections.Counter(seen)
    lost = [v for v in committed if counts[v] == 0]
    dup = {v: k for v, k in counts.items() if k > 1}
    leaked = [v for v in aborted if counts[v]]
    print(
        f"kills {kills} in {time.monotonic() - started:.0f} s, longest transaction {longest:.1f} s; "
        f"batches committed {len(committed) // 6}, aborted {len(aborted) // 6}, "
        f"uncertain {uncertain}; records acknowledged {len(committed)}, lost {len(lost)}, "
        f"duplicated {len(dup)}, aborted but visible {len(leaked)}"
    )
    assert kills == 2
    assert len(committed) > 0
    assert not lost and not dup and not leaked
