"""Three brokers whose inter-broker listener is SSL (ssl.client.auth=required): replication, the
controller's requests and leader failover all run over TLS; clients on the SSL and PLAINTEXT listeners
each get their own listener's addresses.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from kafkalite.local_cluster import LocalCluster
from kafkalite.testing_tls import CertificateAuthority, Issued
from kafkalite.zkserver import ZooKeeperServer

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

QUIET = {"log_level": 0}


@pytest.fixture
def pki(tmp_path: Path) -> tuple[CertificateAuthority, Issued, Issued]:
    ca = CertificateAuthority(tmp_path / "pki")
    return ca, ca.issue("broker", server=True), ca.issue("app")


@pytest.fixture
def cluster(
    tmp_path: Path, zookeeper: ZooKeeperServer, pki: tuple[CertificateAuthority, Issued, Issued]
) -> Iterator[LocalCluster]:
    ca, server, _ = pki
    c = LocalCluster(
        tmp_path / "cluster",
        3,
        zookeeper=zookeeper,
        chroot=f"/{tmp_path.name}",
        ssl_listener=True,
        config={
            "inter.broker.listener.name": "SSL",
            "ssl.keystore.location": str(server.bundle),
            "ssl.truststore.location": str(ca.cert),
            "ssl.client.auth": "required",
            "replica.lag.time.max.ms": 3000,
            "zookeeper.session.timeout.ms": 4000,
        },
    )
    with c:
        yield c


def _wait(cond: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = cond()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def test_replication_and_failover_over_an_ssl_inter_broker_listener(
    cluster: LocalCluster, pki: tuple[CertificateAuthority, Issued, Issued]
) -> None:
    ca, _, app = pki
    tls = {
        "bootstrap.servers": cluster.ssl_bootstrap_servers,
        "security.protocol": "SSL",
        "ssl.ca.location": str(ca.cert),
        "ssl.certificate.location": str(app.cert),
        "ssl.key.location": str(app.key),
        **QUIET,
    }
    admin = AdminClient(tls)
    for f in admin.create_topics([NewTopic("secure", 3, 3)], operation_timeout=20).values():
        f.result()

    def in_sync() -> bool:
        parts = admin.list_topics("secure", timeout=10).topics["secure"].partitions.values()
        return all(sorted(p.isrs) == [1, 2, 3] for p in parts)

    _wait(in_sync, 30, "three in-sync replicas")
    # each listener answers Metadata with its own addresses
    md = admin.list_topics(timeout=10)
    ssl_ports = {b.broker_id: b.ssl_port for b in cluster.brokers.values()}
    assert {k: (v.host, v.port) for k, v in md.brokers.items()} == {
        i: ("127.0.0.1", port) for i, port in ssl_ports.items()
    }
    plain = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, **QUIET})
    md = plain.list_topics(timeout=10)
    assert {k: v.port for k, v in md.brokers.items()} == {
        b.broker_id: b.port for b in cluster.brokers.values()
    }
    # registrations name both listeners; the legacy host/port is the inter-broker (SSL) one
    zk = KazooClient(hosts=cluster.zookeeper_connect)
    zk.start()
    try:
        reg = json.loads(zk.get("/brokers/ids/1")[0])
    finally:
        zk.stop()
    assert reg["port"] == ssl_ports[1]
    assert reg["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT", "SSL": "SSL"}

    p = Producer({**tls, "acks": "all", "enable.idempotence": True})
    for i in range(300):
        p.produce("secure", key=b"%d" % i, value=b"v%d" % i)
    assert p.flush(30) == 0
    # kill the leader of partition 0: the controller (over TLS) moves leadership, nothing is lost
    leader = admin.list_topics("secure", timeout=10).topics["secure"].partitions[0].leader
    cluster.brokers[leader].kill()
    _wait(
        lambda: (
            admin.list_topics("secure", timeout=10).topics["secure"].partitions[0].leader
            not in (leader, -1)
        ),
        30,
        "a new leader",
    )
    for i in range(300, 400):
        p.produce("secure", key=b"%d" % i, value=b"v%d" % i)
    assert p.flush(30) == 0
    # the killed broker comes back and catches up through TLS fetches (and __consumer_offsets,
    # replication factor 3, can then be created for the group below)
    cluster.brokers[leader].start()
    _wait(in_sync, 60, "the restarted broker back in the ISR")
    c = Consumer({**tls, "group.id": "secure-readers", "auto.offset.reset": "earliest"})
    c.subscribe(["secure"])
    seen: set[bytes] = set()
    deadline = time.monotonic() + 60
    while len(seen) < 400 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            seen.add(m.value())
    c.close()
    assert len(seen) == 400
    logs = "".join(b.log_path.read_text() for b in cluster.brokers.values())
    assert "fetcher: connected to broker at 127.0.0.1" in logs and "over TLS (TLSv1.3)" in logs
    assert "controller: connected to broker at 127.0.0.1" in logs
