"""Replication throttles on a real cluster: a reassignment copies a 24 MB partition to a new broker at about
a 2 MB/s follower, then leader, throttle, and completes once the throttles are removed."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from kafka import KafkaAdminClient
from kafka import TopicPartition as KpTopicPartition

from kafkalite.local_cluster import LocalCluster
from kafkalite.zkserver import ZooKeeperServer

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

QUIET = {"log_level": 0}
TOPIC = "throttled"
SIZE = 24_000_000
RATE = 2_000_000


@pytest.fixture
def cluster(tmp_path: Path, zookeeper: ZooKeeperServer) -> Iterator[LocalCluster]:
    c = LocalCluster(
        tmp_path / "cluster",
        2,
        zookeeper=zookeeper,
        chroot=f"/{tmp_path.name}",
        config={"replica.fetch.backoff.ms": 200, "default.replication.factor": 1},
    )
    with c:
        yield c


def _set(
    admin: AdminClient, kind: ConfigResource.Type, name: str, key: str, value: str | None
) -> None:
    op = AlterConfigOpType.SET if value is not None else AlterConfigOpType.DELETE
    res = ConfigResource(
        kind, name, incremental_configs=[ConfigEntry(key, value or "", incremental_operation=op)]
    )
    admin.incremental_alter_configs([res])[res].result(20)


def _copied(cluster: LocalCluster, broker: int) -> int:
    """Bytes of log segments broker `broker` holds for the moving partition."""
    return sum(
        f.stat().st_size
        for d in cluster.brokers[broker].data_dir.rglob(f"{TOPIC}-0")
        for f in d.glob("*.log")
    )


def _rate_over(cluster: LocalCluster, seconds: float) -> tuple[float, int]:
    before = _copied(cluster, 2)
    time.sleep(seconds)
    after = _copied(cluster, 2)
    return (after - before) / seconds, after


def test_a_throttled_move_copies_at_the_throttle(cluster: LocalCluster) -> None:
    bs = cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bs, **QUIET})
    new = NewTopic(TOPIC, 1, replication_factor=-1, replica_assignment=[[1]])
    admin.create_topics([new], operation_timeout=20)[TOPIC].result()
    producer = Producer({"bootstrap.servers": bs, "acks": "1", "linger.ms": 20, **QUIET})
    value = os.urandom(64_000)
    for _ in range(SIZE // len(value)):
        while True:
            try:
                producer.produce(TOPIC, value, partition=0)
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(60) == 0
    size = _copied(cluster, 1)
    assert size >= SIZE

    # Kafka's way: the moving replica (2) follower-throttled, the current one (1) leader-throttled
    _set(admin, ConfigResource.Type.TOPIC, TOPIC, "follower.replication.throttled.replicas", "0:2")
    _set(admin, ConfigResource.Type.TOPIC, TOPIC, "leader.replication.throttled.replicas", "0:1")
    _set(admin, ConfigResource.Type.BROKER, "2", "follower.replication.throttled.rate", str(RATE))
    kadmin = KafkaAdminClient(bootstrap_servers=bs, request_timeout_ms=20_000)
    started = time.monotonic()
    assert kadmin.alter_partition_reassignments({KpTopicPartition(TOPIC, 0): [1, 2]}) == {
        KpTopicPartition(TOPIC, 0): None
    }
    deadline = time.monotonic() + 15
    while _copied(cluster, 2) == 0:
        assert time.monotonic() < deadline, "the new replica never started copying"
        time.sleep(0.1)
    follower_rate, copied = _rate_over(cluster, 4.0)
    print(f"follower-throttled copy: {follower_rate / 1e6:.2f} MB/s ({copied:,} of {size:,} bytes)")
    assert 0.25 * RATE < follower_rate < 2 * RATE
    assert kadmin.list_partition_reassignments() != {}

    # the follower's throttle off, the leader's on: still about the rate
    _set(admin, ConfigResource.Type.BROKER, "1", "leader.replication.throttled.rate", str(RATE))
    _set(admin, ConfigResource.Type.BROKER, "2", "follower.replication.throttled.rate", None)
    time.sleep(0.5)
    leader_rate, copied = _rate_over(cluster, 3.0)
    print(f"leader-throttled copy: {leader_rate / 1e6:.2f} MB/s ({copied:,} of {size:,} bytes)")
    assert 0.25 * RATE < leader_rate < 2 * RATE
    assert copied < size

    # no throttle: the move completes at once
    _set(admin, ConfigResource.Type.BROKER, "1", "leader.replication.throttled.rate", None)
    released = time.monotonic()
    deadline = released + 20
    while kadmin.list_partition_reassignments() != {}:
        assert time.monotonic() < deadline, "the move did not complete without its throttle"
        time.sleep(0.2)
    print(
        f"move done {time.monotonic() - released:.1f} s after the throttle went "
        f"({time.monotonic() - started:.1f} s in all)"
    )
    assert _copied(cluster, 2) >= size
    kadmin.close()
