"""Real clients over TLS (ssl.client.auth=required): confluent-kafka, kafka-python and aiokafka produce,
consume in a group and administer; refused handshakes; Metadata answers with the connected listener.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalite.broker.config.broker_config import ConfigError
from kafkalite.broker.network.connection import SendfileStats
from kafkalite.testing import Broker
from kafkalite.testing_tls import CertificateAuthority, Issued

pytestmark = pytest.mark.compat

APIVERSIONS_V0 = b"\0\0\0\x0a\0\x12\0\0\0\0\0\x01\0\0"


class Pki:
    def __init__(self, base: Path) -> None:
        self.ca = CertificateAuthority(base / "ca")
        self.server = self.ca.issue("broker", server=True, password="broker-pw")
        self.client = self.ca.issue("app", organization="kafkalite-tests")
        rogue = CertificateAuthority(base / "rogue", "rogue-ca")
        self.untrusted: Issued = rogue.issue("mallory")


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return Pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def tls_broker(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    props = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pki.server.bundle),
        "ssl.key.password": "broker-pw",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(pki.ca.cert),
        "ssl.client.auth": "required",
        "group.initial.rebalance.delay.ms": "0",
        "message.max.bytes": str(8 << 20),
    }
    with Broker(tmp_path_factory.mktemp("tls"), config=props) as b:
        yield b


def _ports(b: Broker) -> dict[str, int]:
    return {a.name: a.port for a in b.server.advertised}


def _ssl_bootstrap(b: Broker) -> str:
    return f"127.0.0.1:{_ports(b)['SSL']}"


def _confluent_conf(b: Broker, pki: Pki) -> dict[str, Any]:
    return {
        "bootstrap.servers": _ssl_bootstrap(b),
        "security.protocol": "SSL",
        "ssl.ca.location": str(pki.ca.cert),
        "ssl.certificate.location": str(pki.client.cert),
        "ssl.key.location": str(pki.client.key),
    }


def _topic() -> str:
    return f"tls-{uuid.uuid4().hex[:10]}"


def test_confluent_produce_group_consume_admin(tls_broker: Broker, pki: Pki) -> None:
    conf = _confluent_conf(tls_broker, pki)
    topic = _topic()
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(15)
    assert topic in admin.list_topics(timeout=10).topics
    p = Producer({**conf, "linger.ms": 5})
    for i in range(500):
        p.produce(topic, key=b"%d" % i, value=b"v%d" % i)
    assert p.flush(15) == 0
    c = Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    seen: set[bytes] = set()
    deadline = time.monotonic() + 30
    while len(seen) < 500 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            seen.add(m.value())
    c.commit(asynchronous=False)
    c.close()
    assert len(seen) == 500
    groups = admin.list_consumer_groups().result(10)
    assert f"g-{topic}" in {g.group_id for g in groups.valid}


def test_principal_is_the_client_certificate_subject(tls_broker: Broker, pki: Pki) -> None:
    p = Producer(_confluent_conf(tls_broker, pki))
    p.list_topics(timeout=10)
    deadline = time.monotonic() + 10
    while True:  # the broker's side of the connection may register a moment after the answer
        subjects = [
            c.peer_certificate_subject
            for c in list(tls_broker.server.connections)
            if c.listener_name == "SSL"
        ]
        if "CN=app,O=kafkalite-tests" in subjects or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    plain = [c for c in list(tls_broker.server.connections) if c.listener_name == "PLAINTEXT"]
    assert "CN=app,O=kafkalite-tests" in subjects
    assert all(c.peer_certificate_subject is None for c in plain)
    del p


def test_large_fetch_over_tls(tls_broker: Broker, pki: Pki) -> None:
    conf = _confluent_conf(tls_broker, pki)
    topic = _topic()
    p = Producer({**conf, "linger.ms": 20, "batch.size": 1 << 20})
    value = bytes(range(256)) * 64  # 16 KiB
    n = 1500  # ~24 MiB
    for i in range(n):
        p.produce(topic, value=value, key=b"%d" % i)
    assert p.flush(60) == 0
    before = SendfileStats.fallback_bytes
    c = Consumer(
        {
            **conf,
            "group.id": f"g-{topic}",
            "auto.offset.reset": "earliest",
            "fetch.max.bytes": 16 << 20,
            "max.partition.fetch.bytes": 8 << 20,
        }
    )
    c.subscribe([topic])
    got = 0
    deadline = time.monotonic() + 60
    while got < n and time.monotonic() < deadline:
        for m in c.consume(500, 0.5):
            if m.error() is None:
                assert m.value() == value
                got += 1
    c.close()
    assert got == n
    assert SendfileStats.fallback_bytes - before >= n * len(value)


def test_kafka_python_over_tls(tls_broker: Broker, pki: Pki) -> None:
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
    from kafka.admin import NewTopic as KNewTopic

    tls = {
        "bootstrap_servers": _ssl_bootstrap(tls_broker),
        "security_protocol": "SSL",
        "ssl_cafile": str(pki.ca.cert),
        "ssl_certfile": str(pki.client.cert),
        "ssl_keyfile": str(pki.client.key),
    }
    topic = _topic()
    admin = KafkaAdminClient(**tls)
    admin.create_topics([KNewTopic(topic, 1, 1)])
    assert topic in admin.list_topics()
    admin.close()
    p = KafkaProducer(**tls)
    for i in range(100):
        p.send(topic, b"kp%d" % i)
    p.flush(15)
    p.close()
    c = KafkaConsumer(
        topic, group_id=f"g-{topic}", auto_offset_reset="earliest", consumer_timeout_ms=15000, **tls
    )
    got = []
    for m in c:
        got.append(m.value)
        if len(got) == 100:
            break
    c.commit()
    c.close()
    assert got == [b"kp%d" % i for i in range(100)]


def test_aiokafka_over_tls(tls_broker: Broker, pki: Pki) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin import NewTopic as ANewTopic
    from aiokafka.helpers import create_ssl_context

    topic = _topic()

    async def main() -> list[bytes]:
        ctx = create_ssl_context(
            cafile=str(pki.ca.cert), certfile=str(pki.client.cert), keyfile=str(pki.client.key)
        )
        tls = {
            "bootstrap_servers": _ssl_bootstrap(tls_broker),
            "security_protocol": "SSL",
            "ssl_context": ctx,
        }
        admin = AIOKafkaAdminClient(**tls)
        await admin.start()
        try:
            await admin.create_topics([ANewTopic(topic, 1, 1)])
            assert topic in await admin.list_topics()
        finally:
            await admin.close()
        p = AIOKafkaProducer(**tls)
        await p.start()
        try:
            for i in range(100):
                await p.send(topic, b"ak%d" % i)
            await p.flush()
        finally:
            await p.stop()
        c = AIOKafkaConsumer(topic, group_id=f"g-{topic}", auto_offset_reset="earliest", **tls)
        await c.start()
        got: list[bytes] = []
        try:
            deadline = asyncio.get_running_loop().time() + 30
            while len(got) < 100 and asyncio.get_running_loop().time() < deadline:
                batch = await c.getmany(timeout_ms=500)
                for msgs in batch.values():
                    got.extend(m.value for m in msgs)
            await c.commit()
        finally:
            await c.stop()
        return got

    assert asyncio.run(main()) == [b"ak%d" % i for i in range(100)]


def _refused(port: int, ctx: ssl.SSLContext | None) -> bool:
    """True when the broker closes the connection without answering ApiVersions."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        if ctx is not None:
            sock = ctx.wrap_socket(sock, server_hostname="127.0.0.1")
        sock.sendall(APIVERSIONS_V0)
        return sock.recv(100) == b""
    except (ssl.SSLError, ConnectionError):
        return True
    finally:
        sock.close()


def test_refused_clients_leave_others_served(
    tls_broker: Broker, pki: Pki, caplog: pytest.LogCaptureFixture
) -> None:
    port = _ports(tls_broker)["SSL"]
    caplog.set_level(logging.INFO, logger="kafkalite")
    # 1. a plaintext client on the TLS port
    assert _refused(port, None)
    # 2. TLS without a client certificate while ssl.client.auth=required
    no_cert = ssl.create_default_context(cafile=str(pki.ca.cert))
    assert _refused(port, no_cert)
    # 3. a client certificate from a CA the broker does not trust
    rogue = ssl.create_default_context(cafile=str(pki.ca.cert))
    rogue.load_cert_chain(str(pki.untrusted.cert), str(pki.untrusted.key))
    assert _refused(port, rogue)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        lines = [r.getMessage() for r in caplog.records if "TLS handshake failed" in r.getMessage()]
        if len(lines) >= 3:
            break
        time.sleep(0.05)
    assert len(lines) >= 3, lines
    assert all("on listener SSL" in line for line in lines)
    assert any("sent no certificate" in line for line in lines)
    assert any("not trusted" in line for line in lines)
    assert not any(r.exc_info for r in caplog.records if r.name.startswith("kafkalite"))
    # the broker goes on serving a good client
    p = Producer(_confluent_conf(tls_broker, pki))
    p.produce(_topic(), b"still here")
    assert p.flush(15) == 0


def test_metadata_answers_with_the_connected_listener(tls_broker: Broker, pki: Pki) -> None:
    ports = _ports(tls_broker)
    over_tls = Producer(_confluent_conf(tls_broker, pki)).list_topics(timeout=10)
    assert [(b.host, b.port) for b in over_tls.brokers.values()] == [("127.0.0.1", ports["SSL"])]
    plain = Producer({"bootstrap.servers": f"127.0.0.1:{ports['PLAINTEXT']}"}).list_topics(
        timeout=10
    )
    assert [(b.host, b.port) for b in plain.brokers.values()] == [("127.0.0.1", ports["PLAINTEXT"])]


def test_custom_listener_names_and_advertised_addresses(pki: Pki, tmp_path: Path) -> None:
    props = {
        "listeners": "INTERNAL://127.0.0.1:0,EXTERNAL://127.0.0.1:0",
        "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:SSL",
        "advertised.listeners": "EXTERNAL://localhost:19093",
        "inter.broker.listener.name": "INTERNAL",
        "listener.name.external.ssl.keystore.location": str(pki.server.bundle),
        "listener.name.external.ssl.key.password": "broker-pw",
    }
    with Broker(tmp_path, config=props) as b:
        bound = {lr.name: lr.server.sockets[0].getsockname()[1] for lr in b.server.listeners}
        md = Producer(
            {
                "bootstrap.servers": f"127.0.0.1:{bound['EXTERNAL']}",
                "security.protocol": "SSL",
                "ssl.ca.location": str(pki.ca.cert),
            }
        ).list_topics(timeout=10)
        assert [(x.host, x.port) for x in md.brokers.values()] == [("localhost", 19093)]
        md = Producer({"bootstrap.servers": f"127.0.0.1:{bound['INTERNAL']}"}).list_topics(
            timeout=10
        )
        assert [(x.host, x.port) for x in md.brokers.values()] == [("127.0.0.1", bound["INTERNAL"])]


def test_sasl_ssl_listener_needs_a_key_store(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"listener SASL_SSL is SSL but has no key store"):
        Broker(tmp_path, config={"listeners": "SASL_SSL://127.0.0.1:0"}).start()


def _served_subject(port: int, ca: Path) -> str:
    ctx = ssl.create_default_context(cafile=str(ca))
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s,
    ):
        cert = s.getpeercert()
    return dict(x[0] for x in cert["subject"])["commonName"]


def test_listener_certificate_reload_through_incremental_alter_configs(
    pki: Pki, tmp_path: Path
) -> None:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    renewed = pki.ca.issue("broker-renewed", server=True)
    props = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        "ssl.keystore.location": str(pki.server.bundle),
        "ssl.key.password": "broker-pw",
    }
    with Broker(tmp_path / "data", config=props) as b:
        port = _ports(b)["SSL"]
        assert _served_subject(port, pki.ca.cert) == "broker"
        tls = {
            "bootstrap.servers": f"127.0.0.1:{port}",
            "security.protocol": "SSL",
            "ssl.ca.location": str(pki.ca.cert),
        }
        admin = AdminClient(tls)  # this connection was made with the old certificate

        def alter(resource: str, **entries: str) -> None:
            res = ConfigResource(
                "BROKER",
                resource,
                incremental_configs=[
                    ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
                    for k, v in entries.items()
                ],
            )
            admin.incremental_alter_configs([res])[res].result(15)

        bad = {"listener.name.ssl.ssl.keystore.location": "/no/such/bundle.pem"}
        with pytest.raises(Exception, match="cannot read it"):
            alter("0", **bad)
        new = {
            "listener.name.ssl.ssl.keystore.location": str(renewed.bundle),
            "listener.name.ssl.ssl.key.password": "",
        }
        assert _served_subject(port, pki.ca.cert) == "broker"
        alter("0", **new)
        assert _served_subject(port, pki.ca.cert) == "broker-renewed"
        # the old connection still works, and the password is not shown
        described = admin.describe_configs([ConfigResource("BROKER", "0")])
        entries = next(iter(described.values())).result(15)
        assert entries["listener.name.ssl.ssl.key.password"].value is None
        assert entries["ssl.key.password"].value is None
    # a restart keeps the reloaded certificate (it is stored with the dynamic configs)
    with Broker(tmp_path / "data", config=props) as b:
        assert _served_subject(_ports(b)["SSL"], pki.ca.cert) == "broker-renewed"


def test_acls_apply_to_the_mapped_certificate_principal(pki: Pki, tmp_path: Path) -> None:
    """ssl.principal.mapping.rules turns CN=app,O=... into User:app; an ACL for User:app lets it write,
    while another certificate's principal gets TOPIC_AUTHORIZATION_FAILED and writes nothing."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    other = pki.ca.issue("intruder", organization="kafkalite-tests")
    props = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        "ssl.keystore.location": str(pki.server.bundle),
        "ssl.key.password": "broker-pw",
        "ssl.truststore.location": str(pki.ca.cert),
        "ssl.client.auth": "required",
        "ssl.principal.mapping.rules": "RULE:^CN=([^,]+),.*$/$1/L,DEFAULT",
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        # the plaintext listener is the operator's way in for this test
        "super.users": "User:ANONYMOUS",
    }
    with Broker(tmp_path / "acl-tls", config=props) as b:
        plain = f"127.0.0.1:{_ports(b)['PLAINTEXT']}"
        admin = AdminClient({"bootstrap.servers": plain})
        topic = _topic()
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
        acl = AclBinding(
            ResourceType.TOPIC,
            topic,
            ResourcePatternType.LITERAL,
            "User:app",
            "*",
            AclOperation.WRITE,
            AclPermissionType.ALLOW,
        )
        for f in admin.create_acls([acl]).values():
            f.result(15)
        good = Producer({**_confluent_conf(b, pki), "linger.ms": 0})
        good.produce(topic, value=b"from app")
        assert good.flush(15) == 0
        conf = {**_confluent_conf(b, pki), "ssl.certificate.location": str(other.cert)}
        conf["ssl.key.location"] = str(other.key)
        errors: list[Any] = []
        bad = Producer({**conf, "linger.ms": 0, "message.timeout.ms": 5000})
        bad.produce(topic, value=b"from intruder", on_delivery=lambda err, _m: errors.append(err))
        bad.flush(15)
        assert errors and errors[0] is not None
        assert errors[0].name() == "TOPIC_AUTHORIZATION_FAILED"
        c = Consumer(
            {"bootstrap.servers": plain, "group.id": "check", "auto.offset.reset": "earliest"}
        )
        lo, hi = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        c.close()
        assert (lo, hi) == (0, 1)
