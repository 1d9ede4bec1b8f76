"""KIP-848 in a 3-broker cluster: confluent-kafka `group.protocol=consumer` members keep consuming while
the broker coordinating their group is SIGKILLed and restarted; the new coordinator rebuilds the group
from the replicated `__consumer_offsets`; no partition is held twice and every acknowledged record is
consumed.
"""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalite.coordinator.records import partition_for
from kafkalite.local_cluster import LocalCluster
from kafkalite.zkserver import ZooKeeperServer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "compat"))
from consumer_protocol_support import BackgroundProducer, Worker, check_exclusive

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


@pytest.fixture
def cluster(tmp_path: Path, zookeeper: ZooKeeperServer) -> Iterator[LocalCluster]:
    c = LocalCluster(
        tmp_path / "cluster",
        3,
        zookeeper=zookeeper,
        chroot=f"/{tmp_path.name}",
        config={
            "group.consumer.session.timeout.ms": 6000,
            "group.consumer.min.session.timeout.ms": 6000,
            "group.consumer.heartbeat.interval.ms": 500,
            "group.consumer.min.heartbeat.interval.ms": 500,
            "replica.lag.time.max.ms": 2000,
            "min.insync.replicas": 2,
        },
    )
    with c:
        yield c


def _coordinator(admin: AdminClient, group: str) -> int:
    md = admin.list_topics("__consumer_offsets", timeout=10)
    return int(md.topics["__consumer_offsets"].partitions[partition_for(group, 5)].leader)


def _wait_for(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def _in_every_isr(admin: AdminClient, topic: str, broker: int) -> bool:
    md = admin.list_topics(topic, timeout=10)
    return all(broker in p.isrs for p in md.topics[topic].partitions.values())


def _survive_coordinator_kill(cluster: LocalCluster) -> tuple[set[tuple[int, int]], int]:
    """One run: (acknowledged records nobody consumed, assignment changes)."""
    bs = cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bs})
    topic = f"k848c-{uuid.uuid4().hex[:6]}"
    admin.create_topics([NewTopic(topic, 6, 3)])[topic].result(30)
    group = f"g-{uuid.uuid4().hex[:6]}"
    producer = BackgroundProducer(bs, topic, 6, **{"acks": "all", "enable.idempotence": True})
    acked = producer.acked
    workers = [Worker(bs, group, topic, f"c{i}", "consumer") for i in range(3)]
    try:
        # the group has settled: each member holds its two of the six partitions (so no revocation
        # is pending: a kill during reconciliation is another scenario) and they are consuming
        _wait_for(
            lambda: (
                set().union(*(w.assigned() for w in workers)) == set(range(6))
                and all(len(w.assigned()) == 2 for w in workers)
                and len(set().union(*(w.consumed() for w in workers))) >= 100
            ),
            60,
            "the three members to settle on two partitions each and consume",
        )
        victim = _coordinator(admin, group)
        cluster.brokers[victim].kill()
        time.sleep(4)  # down for a while, within its ZooKeeper session (6 s)
        cluster.brokers[victim].start()
        # back: it serves again, and the members consume what is produced after its restart
        restarted_at = len(acked)
        _wait_for(
            lambda: (
                _in_every_isr(admin, topic, victim)
                and len(set().union(*(w.consumed() for w in workers))) >= restarted_at + 200
            ),
            60,
            "the restarted broker back in the ISRs and the members consuming on",
        )
    finally:
        producer.stop()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if acked <= set().union(*(w.consumed() for w in workers)):
            break
        time.sleep(0.5)
    for w in workers:
        w.close()
    consumed = set().union(*(w.consumed() for w in workers))
    missing = acked - consumed
    changes = check_exclusive(workers)
    print(
        f"\ncoordinator {victim} killed and restarted: acknowledged {len(acked)}, "
        f"missing {len(missing)}, {changes} assignment changes"
    )
    assert acked
    return missing, changes


def test_consumer_group_survives_its_coordinator(cluster: LocalCluster) -> None:
    missing, _ = _survive_coordinator_kill(cluster)
    assert not missing, (
        f"{len(missing)} acknowledged records unconsumed, e.g. {sorted(missing)[:3]}"
    )
