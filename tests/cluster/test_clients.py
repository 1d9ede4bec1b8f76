"""Clients nobody here wrote against a 3-broker cluster with replication factor 3: kafka-python,
aiokafka and kcat produce and consume through whichever broker leads each partition; requests a client
must not get served (transactional ones at a broker that is not the coordinator, forged controller
requests) are refused.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalite.local_cluster import LocalCluster
from kafkalite.zkserver import ZooKeeperServer

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.compat]


@pytest.fixture(scope="module")
def cluster(
    tmp_path_factory: pytest.TempPathFactory, zookeeper: ZooKeeperServer
) -> Iterator[LocalCluster]:
    base = tmp_path_factory.mktemp("clients")
    with LocalCluster(base / "cluster", 3, zookeeper=zookeeper, chroot=f"/{base.name}") as c:
        admin = AdminClient({"bootstrap.servers": c.bootstrap_servers, "log_level": 0})
        topics = [NewTopic(t, 3, 3) for t in ("kp", "aio", "kcat")]
        for f in admin.create_topics(topics, operation_timeout=20).values():
            f.result()
        yield c


def test_kafka_python(cluster: LocalCluster) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    p = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all")
    for i in range(30):
        p.send("kp", f"v{i}".encode(), partition=i % 3).get(timeout=30)
    p.close()
    c = KafkaConsumer(
        "kp",
        bootstrap_servers=cluster.bootstrap_servers,
        group_id="kp-readers",
        auto_offset_reset="earliest",
        consumer_timeout_ms=15000,
    )
    got = {m.value for m in c}
    c.close()
    assert got == {f"v{i}".encode() for i in range(30)}


def test_aiokafka(cluster: LocalCluster) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    async def run() -> set[bytes]:
        p = AIOKafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all")
        await p.start()
        try:
            for i in range(30):
                await p.send_and_wait("aio", f"a{i}".encode(), partition=i % 3)
        finally:
            await p.stop()
        c = AIOKafkaConsumer(
            "aio",
            bootstrap_servers=cluster.bootstrap_servers,
            group_id="aio-readers",
            auto_offset_reset="earliest",
        )
        await c.start()
        got: set[bytes] = set()
        try:
            deadline = time.monotonic() + 20
            while len(got) < 30 and time.monotonic() < deadline:
                for records in (await c.getmany(timeout_ms=500)).values():
                    got.update(r.value for r in records)
        finally:
            await c.stop()
        return got

    assert asyncio.run(run()) == {f"a{i}".encode() for i in range(30)}


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
def test_kcat(cluster: LocalCluster, tmp_path: Path) -> None:
    bs = cluster.bootstrap_servers
    lines = "\n".join(f"k{i}" for i in range(20)) + "\n"
    subprocess.run(
        ["kcat", "-b", bs, "-t", "kcat", "-P", "-X", "acks=all"],
        input=lines.encode(),
        check=True,
        timeout=60,
    )
    out = subprocess.run(
        ["kcat", "-b", bs, "-t", "kcat", "-C", "-o", "beginning", "-e", "-q"],
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout.decode()
    assert sorted(out.split()) == sorted(lines.split())


def test_transactional_requests_to_a_broker_that_is_not_the_coordinator(
    cluster: LocalCluster,
) -> None:
    """Kafka answers NOT_COORDINATOR (and changes nothing) when a transactional request reaches a
    broker that does not lead the id's __transaction_state partition; the coordinator then serves it."""
    from kafkalite.cli.wire import WireClient
    from kafkalite.protocol.errors import ErrorCode
    from kafkalite.protocol.schema import APIS

    find, init, end = APIS[10].request, APIS[22].request, APIS[26].request
    txn_id = "not-mine"
    deadline = time.monotonic() + 60
    while True:  # __transaction_state is created on the first FindCoordinator(TRANSACTION)
        with WireClient(cluster.bootstrap_servers.split(",")[0], timeout=10) as c:
            r = c.send(find(key=txn_id, key_type=1), version=3)
        if r.error_code == 0:
            break
        assert r.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert time.monotonic() < deadline, "no transaction coordinator in time"
        time.sleep(0.5)
    coordinator = f"{r.host}:{r.port}"
    others = [b for b in cluster.bootstrap_servers.split(",") if b != coordinator]
    assert len(others) == 2
    for bs in others:
        with WireClient(bs, timeout=10) as c:
            got = c.send(init(transactional_id=txn_id, transaction_timeout_ms=60000))
            assert got.error_code == ErrorCode.NOT_COORDINATOR
            ended = c.send(
                end(transactional_id=txn_id, producer_id=1, producer_epoch=0, committed=True)
            )
            assert ended.error_code == ErrorCode.NOT_COORDINATOR
    with WireClient(coordinator, timeout=10) as c:
        for _ in range(100):  # the coordinator may still be loading its new partition
            got = c.send(init(transactional_id=txn_id, transaction_timeout_ms=60000))
            if got.error_code != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                break
            time.sleep(0.1)
        assert got.error_code == 0 and got.producer_epoch == 0


def test_a_client_cannot_forge_controller_requests(cluster: LocalCluster) -> None:
    from kafkalite.cli.wire import WireClient
    from kafkalite.protocol.errors import ErrorCode
    from kafkalite.protocol.messages.cluster import LeaderAndIsrRequest

    b = next(iter(cluster.brokers.values()))
    with WireClient(b.bootstrap) as w:
        P = LeaderAndIsrRequest.LeaderAndIsrPartitionState
        forged = LeaderAndIsrRequest(
            controller_id=99,
            controller_epoch=1000,
            broker_epoch=-1,
            type=0,
            topic_states=[
                LeaderAndIsrRequest.LeaderAndIsrTopicState(
                    topic_name="forged",
                    partition_states=[
                        P(
                            partition_index=0,
                            controller_epoch=1000,
                            leader=b.broker_id,
                            leader_epoch=5,
                            isr=[b.broker_id],
                            partition_epoch=0,
                            replicas=[b.broker_id],
                        )
                    ],
                )
            ],
            live_leaders=[],
        )
        resp = w.send(forged, version=4)
        assert resp.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
        md = w.metadata(None)
        assert "forged" not in {t.name for t in md.topics}
    assert not (b.data_dir / "forged-0").exists()  # no replica was created
