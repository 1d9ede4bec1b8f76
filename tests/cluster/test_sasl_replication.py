"""Three brokers whose inter-broker listener is SASL_SSL with SCRAM-SHA-512 (the brokers' credential
written to ZooKeeper first, as Kafka's docs do it): replication and the controller run logged in;
a SCRAM user created through one broker can log in at another within a second.
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
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from kazoo.client import KazooClient

from kafkalite.cluster import zk_data as zd
from kafkalite.local_cluster import LocalCluster
from kafkalite.security.scram import make_credential
from kafkalite.testing_tls import CertificateAuthority
from kafkalite.zkserver import ZooKeeperServer

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

QUIET = {"log_level": 0}
SCRAM_JAAS = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    'username="broker" password="broker-secret";'
)
PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret";'
)


@pytest.fixture
def cluster(tmp_path: Path, zookeeper: ZooKeeperServer) -> Iterator[tuple[LocalCluster, Path]]:
    ca = CertificateAuthority(tmp_path / "pki")
    server = ca.issue("broker", server=True)
    chroot = f"/{tmp_path.name}"
    # the brokers' own SCRAM credential, in ZooKeeper before any broker starts (Kafka's layout)
    zk = KazooClient(hosts=zookeeper.connect_string)
    zk.start()
    try:
        cred = make_credential("SCRAM-SHA-512", "broker-secret")
        zk.create(
            chroot + zd.user_config_path("broker"),
            zd.encode_config({"SCRAM-SHA-512": cred.to_config_string()}),
            makepath=True,
        )
    finally:
        zk.stop()
    c = LocalCluster(
        tmp_path / "cluster",
        3,
        zookeeper=zookeeper,
        chroot=chroot,
        ssl_listener=True,  # the second listener, named SSL, speaks SASL_SSL here
        config={
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SASL_SSL",
            "inter.broker.listener.name": "SSL",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN",
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
            "listener.name.ssl.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
            "listener.name.ssl.plain.sasl.jaas.config": PLAIN_JAAS,
            "ssl.keystore.location": str(server.bundle),
            "ssl.truststore.location": str(ca.cert),
            "replica.lag.time.max.ms": 3000,
            "zookeeper.session.timeout.ms": 4000,
        },
    )
    with c:
        yield c, ca.cert


def _wait(cond: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = cond()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def test_replication_over_a_sasl_ssl_inter_broker_listener(
    cluster: tuple[LocalCluster, Path],
) -> None:
    c, ca = cluster

    def conf(bootstrap: str, mechanism: str, user: str, password: str) -> dict[str, Any]:
        return {
            "bootstrap.servers": bootstrap,
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(ca),
            "sasl.mechanism": mechanism,
            "sasl.username": user,
            "sasl.password": password,
            **QUIET,
        }

    b1, b3 = c.brokers[1].ssl_bootstrap, c.brokers[3].ssl_bootstrap
    admin = AdminClient(conf(b1, "PLAIN", "admin", "admin-secret"))
    for f in admin.create_topics([NewTopic("sasl", 3, 3)], operation_timeout=20).values():
        f.result()

    def in_sync() -> bool:
        parts = admin.list_topics("sasl", timeout=10).topics["sasl"].partitions.values()
        return all(sorted(p.isrs) == [1, 2, 3] for p in parts)

    _wait(in_sync, 30, "three in-sync replicas")
    # a user made through broker 1 logs in at broker 3 within a second
    upsert = UserScramCredentialUpsertion(
        "app", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"app-secret"
    )
    admin.alter_user_scram_credentials([upsert])["app"].result(15)
    time.sleep(1.0)
    app = conf(b3, "SCRAM-SHA-512", "app", "app-secret")
    assert AdminClient(app).list_topics(timeout=5).topics
    p = Producer({**app, "acks": "all", "enable.idempotence": True})
    for i in range(300):
        p.produce("sasl", key=b"%d" % i, value=b"v%d" % i)
    assert p.flush(30) == 0
    cons = Consumer({**app, "group.id": "sasl-readers", "auto.offset.reset": "earliest"})
    cons.subscribe(["sasl"])
    seen: set[bytes] = set()
    deadline = time.monotonic() + 60
    while len(seen) < 300 and time.monotonic() < deadline:
        m = cons.poll(0.5)
        if m is not None and m.error() is None:
            seen.add(m.value())
    cons.close()
    assert len(seen) == 300
    logs = "".join(b.log_path.read_text() for b in c.brokers.values())
    assert "authenticated as User:broker with SASL/SCRAM-SHA-512 on listener SSL" in logs
