"""kafkalite's own client against kafkalite's secured listeners: SSL (CA + host name, client
certificate), SASL_PLAINTEXT PLAIN / SCRAM-SHA-256, SASL_SSL SCRAM-SHA-512; refusals are quick, clear errors.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer as ConfluentProducer
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from kafkalite.client import (
    KafkaAdminClient,
    KafkaConsumer,
    KafkaProducer,
    NewTopic,
    SaslAuthenticationError,
    SslAuthenticationError,
    TopicPartition,
)
from kafkalite.protocol.errors import ErrorCode
from kafkalite.testing import Broker
from kafkalite.testing_tls import CertificateAuthority, Issued

pytestmark = pytest.mark.compat

REAUTH_MS = 1500  # KIP-368 session lifetime on the SASL_PLAINTEXT listener
PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret" user_carl="carl-secret";'
)


class Env:
    def __init__(self, broker: Broker, ca: CertificateAuthority, client: Issued, rogue: Path):
        ports = {a.name: a.port for a in broker.server.advertised}
        self.broker = broker
        self.ca = ca
        self.client = client
        self.rogue_ca = rogue
        self.ssl = f"127.0.0.1:{ports['SSL']}"
        self.sasl_ssl = f"127.0.0.1:{ports['SASL_SSL']}"
        self.sasl_plaintext = f"127.0.0.1:{ports['SASL_PLAINTEXT']}"

    def ssl_conf(self) -> dict[str, Any]:
        return {
            "bootstrap.servers": self.ssl,
            "security.protocol": "SSL",
            "ssl.ca.location": str(self.ca.cert),
            "ssl.certificate.location": str(self.client.cert),
            "ssl.key.location": str(self.client.key),
            "ssl.endpoint.identification.algorithm": "https",
        }

    def scram_conf(self, password: str = "alice-secret") -> dict[str, Any]:
        return {
            "bootstrap.servers": self.sasl_ssl,
            "security.protocol": "SASL_SSL",
            "ssl.truststore.location": str(self.ca.cert),
            "ssl.truststore.type": "PEM",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
            f'required username="alice" password="{password}";',
        }


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    base = tmp_path_factory.mktemp("client-sec")
    ca = CertificateAuthority(base / "ca")
    server = ca.issue("broker", server=True)
    client = ca.issue("app", organization="kafkalite-tests")
    rogue = CertificateAuthority(base / "rogue", "rogue-ca")
    props = {
        "listeners": "SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(server.bundle),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(ca.cert),
        "ssl.client.auth": "required",  # the SSL listener only (KIP-684)
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_plaintext.connections.max.reauth.ms": str(REAUTH_MS),
        "group.initial.rebalance.delay.ms": "0",
    }
    with Broker(base / "data", config=props) as b:
        e = Env(b, ca, client, rogue.cert)
        admin = AdminClient(
            {
                "bootstrap.servers": e.sasl_ssl,
                "security.protocol": "SASL_SSL",
                "ssl.ca.location": str(ca.cert),
                "sasl.mechanism": "PLAIN",
                "sasl.username": "admin",
                "sasl.password": "admin-secret",
            }
        )
        upserts = [
            UserScramCredentialUpsertion(
                "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"alice-secret"
            ),
            UserScramCredentialUpsertion(
                "bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"bob-secret"
            ),
        ]
        for f in admin.alter_user_scram_credentials(upserts).values():
            f.result(15)
        del admin
        yield e


def _roundtrip(conf: dict[str, Any], n: int = 300) -> None:
    """Admin creates a topic, the producer writes n records, a group consumer reads them all."""
    topic = f"sec-{uuid.uuid4().hex[:10]}"
    with KafkaAdminClient(config=conf) as admin:
        admin.create_topics([NewTopic(topic, 2, 1)])
        assert topic in admin.list_topics()
    with KafkaProducer(config={**conf, "linger.ms": 5}) as p:
        futs = [p.send(topic, b"v%d" % i, key=b"%d" % i) for i in range(n)]
        p.flush(30)
        assert all(f.get(10).offset >= 0 for f in futs)
    group = f"g-{topic}"
    consumer_conf = {**conf, "group.id": group, "auto.offset.reset": "earliest"}
    with KafkaConsumer(topic, config=consumer_conf) as c:
        seen: set[bytes] = set()
        deadline = time.monotonic() + 30
        while len(seen) < n and time.monotonic() < deadline:
            for records in c.poll(500).values():
                seen.update(r.value for r in records if r.value is not None)
        c.commit()
    assert seen == {b"v%d" % i for i in range(n)}
    with KafkaAdminClient(config=conf) as admin:
        assert group in {g[0] for g in admin.list_groups()}


def test_ssl_with_ca_hostname_check_and_client_certificate(env: Env) -> None:
    _roundtrip(env.ssl_conf())
    with KafkaAdminClient(config=env.ssl_conf()) as admin:
        admin.list_topics()
        subjects = {
            c.peer_certificate_subject
            for c in list(env.broker.server.connections)
            if c.listener_name == "SSL"
        }
    assert "CN=app,O=kafkalite-tests" in subjects


@pytest.mark.parametrize(
    ("mechanism", "user", "password"),
    [("PLAIN", "carl", "carl-secret"), ("SCRAM-SHA-256", "bob", "bob-secret")],
)
def test_sasl_plaintext_with_librdkafka_names(
    env: Env, mechanism: str, user: str, password: str
) -> None:
    _roundtrip(
        {
            "bootstrap.servers": env.sasl_plaintext,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": mechanism,  # librdkafka's spelling
            "sasl.username": user,
            "sasl.password": password,
        },
        n=100,
    )


def test_reauthentication_keeps_connections_working(env: Env) -> None:
    """KIP-368: the broker closes a connection whose session expired; the client logs in again on
    the same connection before that, while a producer and a long-polling consumer keep going."""
    conf = {
        "bootstrap.servers": env.sasl_plaintext,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": "bob",
        "sasl.password": "bob-secret",
    }
    topic = f"sec-reauth-{uuid.uuid4().hex[:8]}"
    with KafkaAdminClient(config=conf) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)])
    stop = time.monotonic() + 2.5 * REAUTH_MS / 1000
    futs: list[Any] = []
    with (
        KafkaProducer(config={**conf, "linger.ms": 0}) as p,
        KafkaConsumer(config={**conf, "auto.offset.reset": "earliest"}) as c,
    ):
        p.send(topic, b"r0").get(10)
        c.assign([TopicPartition(topic, 0)])
        first = {n: conn for n, conn in p._client._conns.items() if n >= 0}

        def produce() -> None:
            while time.monotonic() < stop:
                futs.append(p.send(topic, b"r%d" % (len(futs) + 1)))
                time.sleep(0.02)

        producer = threading.Thread(target=produce)
        producer.start()
        seen: list[bytes] = []
        while producer.is_alive() or len(seen) < len(futs) + 1:
            for records in c.poll(200).values():
                seen.extend(r.value for r in records if r.value is not None)
            assert time.monotonic() < stop + 15, f"read {len(seen)} of {len(futs) + 1}"
        producer.join()
        assert all(f.get(10).offset > 0 for f in futs)
        assert seen == [b"r%d" % i for i in range(len(futs) + 1)]
        # no reconnect: the same connections, past more than one session lifetime
        assert first and all(p._client._conns.get(n) is conn for n, conn in first.items())
        assert not any(conn.closed for conn in first.values())


def test_sasl_ssl_scram_sha_512_with_java_names(env: Env) -> None:
    _roundtrip(env.scram_conf())


def test_wrong_password_is_a_quick_clear_error(env: Env) -> None:
    conf = {**env.scram_conf("wrong"), "request.timeout.ms": 20000}
    started = time.monotonic()
    with pytest.raises(SaslAuthenticationError) as info, KafkaAdminClient(config=conf) as admin:
        admin.list_topics()
    assert info.value.code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert "invalid credentials with SASL mechanism SCRAM-SHA-512" in str(info.value)
    with (
        pytest.raises(SaslAuthenticationError),
        KafkaProducer(config={**conf, "max.block.ms": 20000}) as p,
    ):
        p.send("anything", b"x").get(20)
    with KafkaConsumer(config=conf) as c:
        c.assign([TopicPartition("anything", 0)])
        with pytest.raises(SaslAuthenticationError):
            c.poll(20000)
    with (
        KafkaConsumer("anything", config={**conf, "group.id": "g-wrong"}) as c,
        pytest.raises(SaslAuthenticationError),
    ):
        c.poll(20000)
    assert time.monotonic() - started < 10


def test_wrong_ca_is_a_clear_tls_error(env: Env) -> None:
    conf = {**env.ssl_conf(), "ssl.ca.location": str(env.rogue_ca)}
    started = time.monotonic()
    with (
        pytest.raises(SslAuthenticationError, match="certificate did not verify"),
        KafkaAdminClient(config=conf) as admin,
    ):
        admin.list_topics()
    assert time.monotonic() - started < 10


def test_hostname_check_follows_endpoint_identification(env: Env) -> None:
    # the certificate names 127.0.0.1 and localhost; "127.1" reaches 127.0.0.1 but is neither
    port = env.ssl.rsplit(":", 1)[1]
    conf = {**env.ssl_conf(), "bootstrap.servers": f"127.1:{port}"}
    with (
        pytest.raises(SslAuthenticationError, match=r"IP address mismatch|Hostname mismatch"),
        KafkaAdminClient(config=conf) as admin,
    ):
        admin.list_topics()
    conf["ssl.endpoint.identification.algorithm"] = ""
    with KafkaAdminClient(config=conf) as admin:
        admin.list_topics()


def test_confluent_record_over_scram_read_byte_for_byte(env: Env) -> None:
    topic = f"sec-interop-{uuid.uuid4().hex[:8]}"
    with KafkaAdminClient(config=env.scram_conf()) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)])
    key, value = b"\x00k\xffey", bytes(range(256)) * 3
    headers = [("h1", b"\x01\x02"), ("h2", b"")]
    p = ConfluentProducer(
        {
            "bootstrap.servers": env.sasl_ssl,
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(env.ca.cert),
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "alice",
            "sasl.password": "alice-secret",
            "compression.type": "zstd",
        }
    )
    p.produce(topic, value=value, key=key, headers=headers, timestamp=1_700_000_000_123)
    assert p.flush(15) == 0
    with KafkaConsumer(config={**env.scram_conf(), "auto.offset.reset": "earliest"}) as c:
        c.assign([TopicPartition(topic, 0)])
        got = []
        deadline = time.monotonic() + 15
        while not got and time.monotonic() < deadline:
            for records in c.poll(500).values():
                got.extend(records)
    assert len(got) == 1
    r = got[0]
    assert (r.key, r.value, r.timestamp) == (key, value, 1_700_000_000_123)
    assert list(r.headers) == headers
