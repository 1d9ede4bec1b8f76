"""A real three-broker cluster (ZooKeeper, separate broker processes) with confluent-kafka as the
client: RF=3 topics, acks=all, leader failover after SIGKILL, a restarted broker rejoining the ISR,
acks=all refused below min.insync.replicas, a topic deleted while a replica was down. (Forged
controller requests are refused: test_clients.py, on a cluster nobody stops.)
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from kafkalite.local_cluster import LocalCluster
from kafkalite.zkserver import ZooKeeperServer

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

QUIET = {"log_level": 0}


@pytest.fixture
def cluster(tmp_path: Path, zookeeper: ZooKeeperServer) -> Iterator[LocalCluster]:
    c = LocalCluster(
        tmp_path / "cluster",
        3,
        zookeeper=zookeeper,
        chroot=f"/{tmp_path.name}",
        config={"replica.lag.time.max.ms": 3000, "zookeeper.session.timeout.ms": 4000},
    )
    with c:
        yield c


def wait_for(cond: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = cond()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def partitions(admin: AdminClient, topic: str) -> dict[int, Any]:
    md = admin.list_topics(topic, timeout=10)
    return {p.id: p for p in md.topics[topic].partitions.values()}


def create(admin: AdminClient, topic: str, n: int = 3, rf: int = 3, **cfg: str) -> None:
    for f in admin.create_topics(
        [NewTopic(topic, n, rf, config=cfg)], operation_timeout=20
    ).values():
        f.result()


def test_rf3_topic_acks_all_and_failover(cluster: LocalCluster) -> None:
    bs = cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bs, **QUIET})
    create(admin, "orders")
    parts = partitions(admin, "orders")
    assert all(
        sorted(p.replicas) == [1, 2, 3] and sorted(p.isrs) == [1, 2, 3] for p in parts.values()
    )
    p = Producer({"bootstrap.servers": bs, "acks": "all", "enable.idempotence": True, **QUIET})
    acked: dict[tuple[int, int], bytes] = {}

    def send(n: int, tag: str) -> None:
        for i in range(n):
            p.produce(
                "orders",
                f"{tag}-{i}".encode(),
                partition=i % 3,
                on_delivery=lambda e, m: (
                    e is None and acked.__setitem__((m.partition(), m.offset()), m.value())
                ),
            )
        assert p.flush(30) == 0

    send(30, "a")
    leader = parts[1].leader
    killed_at = time.monotonic()
    cluster.brokers[leader].kill()
    send(30, "b")  # librdkafka retries until the controller elects a new leader
    failover_s = time.monotonic() - killed_at
    assert len(acked) == 60
    new = partitions(admin, "orders")
    assert new[1].leader != leader and leader not in new[1].isrs
    # the killed broker comes back, catches up and rejoins every ISR
    cluster.brokers[leader].start()
    wait_for(
        lambda: all(sorted(q.isrs) == [1, 2, 3] for q in partitions(admin, "orders").values()),
        30,
        "the restarted broker to rejoin the ISR",
    )
    c = Consumer(
        {"bootstrap.servers": bs, "group.id": "readers", "auto.offset.reset": "earliest", **QUIET}
    )
    c.subscribe(["orders"])
    seen: dict[tuple[int, int], bytes] = {}
    deadline = time.monotonic() + 30
    while len(seen) < len(acked) and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            seen[(m.partition(), m.offset())] = m.value()
    c.close()
    print(f"failover took {failover_s:.1f} s; acknowledged {len(acked)}, read {len(seen)}")
    assert seen == acked  # every acknowledged record, exactly once, at its offset
    # a topic config change made through one broker reaches every replica (/config/changes)
    res = ConfigResource(
        "topic",
        "orders",
        incremental_configs=[
            ConfigEntry("retention.ms", "123456", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    for f in admin.incremental_alter_configs([res]).values():
        f.result()
    wait_for(
        lambda: all(
            "retention.ms=123456"
            in (
                (b.data_dir / "topic-configs" / "orders.properties").read_text()
                if (b.data_dir / "topic-configs" / "orders.properties").exists()
                else ""
            )
            for b in cluster.brokers.values()
        ),
        15,
        "the config change on every broker",
    )


def test_acks_all_below_min_insync_replicas_is_refused(cluster: LocalCluster) -> None:
    bs = cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bs, **QUIET})
    create(admin, "strict", n=1, **{"min.insync.replicas": "2"})
    leader = partitions(admin, "strict")[0].leader
    others = [b for b in cluster.brokers if b != leader]
    for b in others:
        cluster.brokers[b].kill()
    wait_for(
        lambda: partitions(admin, "strict")[0].isrs == [leader],
        30,
        "the ISR to shrink to the leader",
    )
    p = Producer(
        {
            "bootstrap.servers": cluster.brokers[leader].bootstrap,
            "acks": "all",
            "message.timeout.ms": 3000,
            "retries": 0,
            **QUIET,
        }
    )
    errors: list[Any] = []
    p.produce("strict", b"x", partition=0, on_delivery=lambda e, m: errors.append(e))
    p.flush(10)
    assert errors and errors[0] is not None
    assert errors[0].code() in (19, -192)  # NOT_ENOUGH_REPLICAS (or its retries timing out)


def test_a_topic_deleted_while_a_replica_was_down_is_removed_when_it_returns(
    cluster: LocalCluster,
) -> None:
    bs = cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bs, **QUIET})
    create(admin, "doomed", n=1)
    p = Producer({"bootstrap.servers": bs, "acks": "all", **QUIET})
    p.produce("doomed", b"x", partition=0)
    assert p.flush(20) == 0
    down = next(
        b for b in cluster.brokers.values() if b.broker_id != partitions(admin, "doomed")[0].leader
    )
    down.kill()
    wait_for(
        lambda: down.broker_id not in partitions(admin, "doomed")[0].isrs, 30, "the ISR to shrink"
    )
    for f in admin.delete_topics(["doomed"], operation_timeout=20).values():
        f.result()
    assert (down.data_dir / "doomed-0").exists()  # its copy is still on disk while it is down
    down.start()
    wait_for(lambda: not (down.data_dir / "doomed-0").exists(), 30, "the stray copy to go")
    # the deletion finished: the name can be used again (once the returned broker is live again
    # for placement, which the controller may learn a moment after its copy is gone)
    wait_for(lambda: len(admin.list_topics(timeout=10).brokers) == 3, 30, "three live brokers")
    wait_for(lambda: "doomed" not in admin.list_topics(timeout=10).topics, 30, "the deletion")
    create(admin, "doomed", n=1)
    assert len(partitions(admin, "doomed")) == 1
