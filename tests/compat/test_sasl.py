"""Real clients over SASL: confluent-kafka, kafka-python and aiokafka on SASL_SSL (PLAIN, SCRAM-SHA-512),
kcat on SASL_PLAINTEXT; SCRAM users made by a PLAIN admin; refusals; KIP-368 re-authentication; ACLs.
"""

from __future__ import annotations

import asyncio
import struct
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialsDescription,
    UserScramCredentialUpsertion,
)

from kafkalite.cli.wire import CliError, WireClient
from kafkalite.protocol.messages.metadata import MetadataRequest
from kafkalite.protocol.messages.sasl import SaslAuthenticateRequest, SaslHandshakeRequest
from kafkalite.security.sasl import plain_client_token
from kafkalite.testing import Broker
from kafkalite.testing_tls import CertificateAuthority

pytestmark = pytest.mark.compat

PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret" user_carl="carl-secret";'
)
REAUTH_MS = 2000
# SCRAM users the PLAIN admin creates: name -> (mechanism, password)
SCRAM_USERS = {"alice": ("SCRAM-SHA-512", "alice-secret"), "bob": ("SCRAM-SHA-256", "bob-secret")}


class Env:
    def __init__(self, broker: Broker, ca: CertificateAuthority) -> None:
        self.broker = broker
        self.ca = ca
        ports = {a.name: a.port for a in broker.server.advertised}
        self.ssl = f"127.0.0.1:{ports['SASL_SSL']}"
        self.plaintext = f"127.0.0.1:{ports['SASL_PLAINTEXT']}"

    def confluent(self, mechanism: str, user: str, password: str) -> dict[str, Any]:
        return {
            "bootstrap.servers": self.ssl,
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(self.ca.cert),
            "sasl.mechanism": mechanism,
            "sasl.username": user,
            "sasl.password": password,
        }


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    base = tmp_path_factory.mktemp("sasl")
    ca = CertificateAuthority(base / "ca")
    server = ca.issue("broker", server=True)
    props = {
        "listeners": "SASL_SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(server.bundle),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_plaintext.connections.max.reauth.ms": str(REAUTH_MS),
        "group.initial.rebalance.delay.ms": "0",
    }
    with Broker(base / "data", config=props) as b:
        e = Env(b, ca)
        admin = AdminClient(e.confluent("PLAIN", "admin", "admin-secret"))
        futures = admin.alter_user_scram_credentials(
            [
                UserScramCredentialUpsertion(
                    user,
                    ScramCredentialInfo(getattr(ScramMechanism, m.replace("-", "_")), 4096),
                    pw.encode(),
                )
                for user, (m, pw) in SCRAM_USERS.items()
            ]
        )
        for f in futures.values():
            f.result(15)
        yield e


def _topic() -> str:
    return f"sasl-{uuid.uuid4().hex[:10]}"


def _confluent_roundtrip(conf: dict[str, Any], n: int = 200) -> None:
    topic = _topic()
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(15)
    p = Producer({**conf, "linger.ms": 5})
    for i in range(n):
        p.produce(topic, key=b"%d" % i, value=b"v%d" % i)
    assert p.flush(15) == 0
    c = Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    seen: set[bytes] = set()
    deadline = time.monotonic() + 30
    while len(seen) < n and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            seen.add(m.value())
    c.commit(asynchronous=False)
    c.close()
    assert len(seen) == n


@pytest.mark.parametrize(
    ("mechanism", "user", "password"),
    [("PLAIN", "carl", "carl-secret"), ("SCRAM-SHA-512", "alice", "alice-secret")],
)
def test_confluent_over_sasl_ssl(env: Env, mechanism: str, user: str, password: str) -> None:
    _confluent_roundtrip(env.confluent(mechanism, user, password))


def test_scram_users_made_by_a_plain_admin_are_described_and_stored_hashed(env: Env) -> None:
    admin = AdminClient(env.confluent("PLAIN", "admin", "admin-secret"))
    described = admin.describe_user_scram_credentials().result(15)
    assert set(SCRAM_USERS) <= set(described)
    alice: UserScramCredentialsDescription = described["alice"]
    info = alice.scram_credential_infos[0]
    assert (info.mechanism, info.iterations) == (ScramMechanism.SCRAM_SHA_512, 4096)
    stored = (env.broker.data_dir / "kafkalite-scram-credentials.json").read_text()
    assert "stored_key=" in stored and "alice-secret" not in stored
    # a SCRAM-SHA-256 user logs in with that mechanism only
    ok = AdminClient(env.confluent("SCRAM-SHA-256", "bob", "bob-secret"))
    assert ok.list_topics(timeout=10).topics is not None


@pytest.mark.parametrize(
    ("mechanism", "user", "password"),
    [("PLAIN", "carl", "carl-secret"), ("SCRAM-SHA-512", "alice", "alice-secret")],
)
def test_kafka_python_over_sasl_ssl(env: Env, mechanism: str, user: str, password: str) -> None:
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
    from kafka.admin import NewTopic as KNewTopic

    conf = {
        "bootstrap_servers": env.ssl,
        "security_protocol": "SASL_SSL",
        "ssl_cafile": str(env.ca.cert),
        "sasl_mechanism": mechanism,
        "sasl_plain_username": user,
        "sasl_plain_password": password,
    }
    topic = _topic()
    admin = KafkaAdminClient(**conf)
    admin.create_topics([KNewTopic(topic, 1, 1)])
    assert topic in admin.list_topics()
    admin.close()
    p = KafkaProducer(**conf)
    for i in range(50):
        p.send(topic, b"kp%d" % i)
    p.flush(15)
    p.close()
    c = KafkaConsumer(
        topic,
        group_id=f"g-{topic}",
        auto_offset_reset="earliest",
        consumer_timeout_ms=15000,
        **conf,
    )
    got = []
    for m in c:
        got.append(m.value)
        if len(got) == 50:
            break
    c.commit()
    c.close()
    assert got == [b"kp%d" % i for i in range(50)]


@pytest.mark.parametrize(
    ("mechanism", "user", "password"),
    [("PLAIN", "carl", "carl-secret"), ("SCRAM-SHA-512", "alice", "alice-secret")],
)
def test_aiokafka_over_sasl_ssl(env: Env, mechanism: str, user: str, password: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin import NewTopic as ANewTopic
    from aiokafka.helpers import create_ssl_context

    topic = _topic()

    async def main() -> list[bytes]:
        conf = {
            "bootstrap_servers": env.ssl,
            "security_protocol": "SASL_SSL",
            "ssl_context": create_ssl_context(cafile=str(env.ca.cert)),
            "sasl_mechanism": mechanism,
            "sasl_plain_username": user,
            "sasl_plain_password": password,
        }
        admin = AIOKafkaAdminClient(**conf)
        await admin.start()
        try:
            await admin.create_topics([ANewTopic(topic, 1, 1)])
            assert topic in await admin.list_topics()
        finally:
            await admin.close()
        p = AIOKafkaProducer(**conf)
        await p.start()
        try:
            for i in range(50):
                await p.send(topic, b"ak%d" % i)
            await p.flush()
        finally:
            await p.stop()
        c = AIOKafkaConsumer(topic, group_id=f"g-{topic}", auto_offset_reset="earliest", **conf)
        await c.start()
        got: list[bytes] = []
        try:
            deadline = asyncio.get_running_loop().time() + 30
            while len(got) < 50 and asyncio.get_running_loop().time() < deadline:
                for msgs in (await c.getmany(timeout_ms=500)).values():
                    got.extend(m.value for m in msgs)
            await c.commit()
        finally:
            await c.stop()
        return got

    assert asyncio.run(main()) == [b"ak%d" % i for i in range(50)]


@pytest.mark.parametrize(
    ("mechanism", "user", "password"),
    [("PLAIN", "admin", "admin-secret"), ("SCRAM-SHA-256", "bob", "bob-secret")],
)
def test_kcat_over_sasl_plaintext(
    env: Env, kcat: str, mechanism: str, user: str, password: str
) -> None:
    topic = _topic()
    env.broker.create_topic(topic)
    auth = [
        "-b", env.plaintext, "-X", "security.protocol=SASL_PLAINTEXT",
        "-X", f"sasl.mechanisms={mechanism}", "-X", f"sasl.username={user}",
        "-X", f"sasl.password={password}",
    ]  # fmt: skip
    r = subprocess.run(
        [kcat, *auth, "-P", "-t", topic], input=b"a\nb\nc\n", capture_output=True, timeout=60
    )
    assert r.returncode == 0, r.stderr
    r = subprocess.run(
        [kcat, *auth, "-C", "-t", topic, "-e", "-o", "beginning", "-f", "%s\n"],
        capture_output=True,
        timeout=60,
    )
    assert r.stdout.split() == [b"a", b"b", b"c"], r.stderr


def test_refusals_leave_the_broker_serving_others(env: Env) -> None:
    # a wrong password: SASL_AUTHENTICATION_FAILED with Kafka's message
    errors: list[str] = []
    bad = Producer(
        {
            **env.confluent("SCRAM-SHA-512", "alice", "wrong"),
            "error_cb": lambda e: errors.append(str(e)),
        }
    )
    bad.poll(3)
    assert any("Authentication failed" in e for e in errors), errors
    # an unknown mechanism: UNSUPPORTED_SASL_MECHANISM with the enabled list, then the close
    with WireClient(env.plaintext) as c:
        hs = c.send(SaslHandshakeRequest(mechanism="GSSAPI"), version=1)
        assert hs.error_code == 33
        assert hs.mechanisms == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        with pytest.raises((CliError, OSError)):
            c.send(MetadataRequest(topics=None), version=1)
    # a client that skips the handshake is closed
    with WireClient(env.plaintext) as c, pytest.raises((CliError, OSError)):
        c.send(MetadataRequest(topics=None), version=1)
    # others are served all along
    ok = AdminClient(env.confluent("PLAIN", "admin", "admin-secret"))
    assert ok.list_topics(timeout=10).topics is not None


def test_handshake_v0_then_raw_tokens(env: Env) -> None:
    with WireClient(env.plaintext) as c:
        hs = c.send(SaslHandshakeRequest(mechanism="PLAIN"), version=0)
        assert hs.error_code == 0
        token = plain_client_token("admin", "admin-secret")
        c.sock.sendall(struct.pack(">i", len(token)) + token)
        assert c.sock.recv(4) == b"\0\0\0\0"  # PLAIN's empty answer, unframed
        md = c.send(MetadataRequest(topics=None), version=1)
        assert md.brokers


def test_reauthentication_session(env: Env) -> None:
    """KIP-368: session_lifetime_ms is announced; librdkafka re-authenticates and keeps working
    past it; a raw client that does not is disconnected."""
    with WireClient(env.plaintext) as c:
        c.send(SaslHandshakeRequest(mechanism="PLAIN"), version=1)
        token = plain_client_token("admin", "admin-secret")
        resp = c.send(SaslAuthenticateRequest(auth_bytes=token), version=1)
        assert (resp.error_code, resp.session_lifetime_ms) == (0, REAUTH_MS)
        time.sleep(REAUTH_MS / 1000 + 0.3)
        with pytest.raises((CliError, OSError)):
            c.send(MetadataRequest(topics=None), version=1)
    topic = _topic()
    env.broker.create_topic(topic)
    conf = {
        "bootstrap.servers": env.plaintext,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": "bob",
        "sasl.password": "bob-secret",
    }
    p = Producer({**conf, "linger.ms": 0})
    end = time.monotonic() + 2.5 * REAUTH_MS / 1000
    sent = 0
    while time.monotonic() < end:
        p.produce(topic, b"r%d" % sent)
        sent += 1
        p.poll(0.05)
    assert p.flush(15) == 0
    c = Consumer({**conf, "group.id": f"g-{topic}"})
    assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, sent)
    c.close()


def test_acls_apply_to_the_sasl_principal(tmp_path: Path) -> None:
    props = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin",
    }
    with Broker(tmp_path, config=props) as b:
        base = {
            "bootstrap.servers": b.bootstrap_servers,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
        }
        admin_conf = {**base, "sasl.username": "admin", "sasl.password": "admin-secret"}
        carl_conf = {**base, "sasl.username": "carl", "sasl.password": "carl-secret"}
        topic = _topic()
        admin = AdminClient(admin_conf)
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
        carl = AdminClient(carl_conf)
        upsert = UserScramCredentialUpsertion(
            "mallory", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"pw"
        )
        with pytest.raises(KafkaException, match=r"CLUSTER_AUTHORIZATION_FAILED|uthoriz"):
            carl.alter_user_scram_credentials([upsert])["mallory"].result(15)
        from confluent_kafka.admin import (
            AclBinding,
            AclOperation,
            AclPermissionType,
            ResourcePatternType,
            ResourceType,
        )

        denied: list[Any] = []
        p = Producer({**carl_conf, "message.timeout.ms": 3000})
        p.produce(topic, b"denied", on_delivery=lambda err, m: denied.append(err))
        p.flush(10)
        assert denied and denied[0] is not None  # no WRITE for User:carl yet
        binding = AclBinding(
            ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:carl", "*",
            AclOperation.WRITE, AclPermissionType.ALLOW,
        )  # fmt: skip
        admin.create_acls([binding])[binding].result(15)
        delivered: list[Any] = []
        p2 = Producer(carl_conf)
        p2.produce(topic, b"allowed", on_delivery=lambda err, m: delivered.append(err))
        p2.flush(15)
        assert delivered == [None]


def test_users_cli(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    from kafkalite.cli.main import main

    login = ["--bootstrap-server", env.plaintext, "--sasl-username", "admin"]
    login += ["--sasl-password", "admin-secret"]
    assert (
        main(
            [
                "users",
                "add",
                "dora",
                "--password",
                "dora-pw",
                "--mechanism",
                "SCRAM-SHA-512",
                *login,
            ]
        )
        == 0
    )
    assert main(["users", "list", "dora", *login]) == 0
    assert "dora: SCRAM-SHA-512 (iterations=4096)" in capsys.readouterr().out
    dora = ["--bootstrap-server", env.plaintext, "--sasl-mechanism", "SCRAM-SHA-512"]
    assert (
        main(["users", "list", *dora, "--sasl-username", "dora", "--sasl-password", "dora-pw"]) == 0
    )
    assert main(["users", "delete", "dora", *login]) == 0
    assert (
        main(["users", "list", *dora, "--sasl-username", "dora", "--sasl-password", "dora-pw"]) == 2
    )
    assert "Authentication failed" in capsys.readouterr().err
