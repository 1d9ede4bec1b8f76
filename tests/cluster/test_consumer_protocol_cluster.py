"""KIP-848 in a 3-broker cluster: confluent-kafka `group.protocol=consumer` members keep consuming while
the broker coordinating their group is SIGKILLed and restarted; the new coordinator rebuilds the group
from the replicated `__consumer_offsets`; no partition is held twice and every acknowledged record is
consumed.
"""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Iterator
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
        time.sleep(6)
        victim = _coordinator(admin, group)
        cluster.brokers[victim].kill()
        time.sleep(4)
        cluster.brokers[victim].start()
        time.sleep(6)
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
