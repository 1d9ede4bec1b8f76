"""The `kafkalite` Spark source and sink on a secured cluster: a streaming query reads a topic and writes
another over SASL_SSL with SCRAM-SHA-512, configured with Kafka's client property names as `kafka.*`.
"""

from __future__ import annotations

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

from kafkalite.testing import Broker
from kafkalite.testing_tls import CertificateAuthority

pytestmark = [pytest.mark.spark, pytest.mark.slow]

PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret";'
)


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """(SASL_SSL bootstrap, CA certificate) of a broker whose only listener is SASL_SSL, with a
    SCRAM-SHA-512 user alice."""
    base = tmp_path_factory.mktemp("spark-sasl-ssl")
    ca = CertificateAuthority(base / "ca")
    server = ca.issue("broker", server=True)
    props = {
        "listeners": "SASL_SSL://127.0.0.1:0",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(server.bundle),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
    }
    with Broker(base / "data", config=props) as b:
        bs = f"127.0.0.1:{b.server.advertised[0].port}"
        admin = AdminClient(
            {"bootstrap.servers": bs, "security.protocol": "SASL_SSL",
             "ssl.ca.location": str(ca.cert), "sasl.mechanism": "PLAIN",
             "sasl.username": "admin", "sasl.password": "admin-secret"}
        )  # fmt: skip
        upsert = UserScramCredentialUpsertion(
            "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"alice-secret"
        )
        for f in admin.alter_user_scram_credentials([upsert]).values():
            f.result(15)
        for f in admin.create_topics(
            [NewTopic("secure-in", 2, 1), NewTopic("secure-out", 1, 1)]
        ).values():
            f.result(15)
        yield bs, ca.cert


def _scram(bs: str, ca: Path) -> dict[str, str]:
    """librdkafka's settings for alice (the confluent-kafka side of the check)."""
    return {
        "bootstrap.servers": bs,
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(ca),
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "sasl.password": "alice-secret",
    }


def _kafka_options(bs: str, ca: Path) -> dict[str, str]:
    """The same login as a Java application writes it: Spark's `kafka.*` options."""
    return {
        "kafka.bootstrap.servers": bs,
        "kafka.security.protocol": "SASL_SSL",
        "kafka.ssl.truststore.location": str(ca),
        "kafka.ssl.truststore.type": "PEM",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
        'required username="alice" password="alice-secret";',
    }


def test_streaming_query_reads_and_writes_over_sasl_ssl_scram_sha_512(
    spark: Any, secured: tuple[str, Path], tmp_path: Path
) -> None:
    bs, ca = secured
    p = Producer(_scram(bs, ca))
    for i in range(100):
        p.produce("secure-in", key=b"k%d" % i, value=b"v%d" % i, partition=i % 2)
    assert p.flush(30) == 0
    options = _kafka_options(bs, ca)
    query = (
        spark.readStream.format("kafkalite")
        .options(**options)
        .option("subscribe", "secure-in")
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "40")
        .load()
        .selectExpr("key", "upper(CAST(value AS STRING)) AS value")
        .writeStream.format("kafkalite")
        .options(**options)
        .option("topic", "secure-out")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(180), "the query did not finish"
    assert query.exception() is None
    assert sum(p["numInputRows"] for p in query.recentProgress) == 100
    c = Consumer({**_scram(bs, ca), "group.id": "check", "auto.offset.reset": "earliest"})
    c.subscribe(["secure-out"])
    got: dict[bytes, bytes] = {}
    for _ in range(60):
        for m in c.consume(200, timeout=1):
            assert m.error() is None, m.error()
            got[m.key()] = m.value()
        if len(got) == 100:
            break
    c.close()
    assert got == {b"k%d" % i: b"V%d" % i for i in range(100)}
    # a wrong password fails the query with the broker's authentication error, not a hang
    bad = {**options, "kafka.sasl.jaas.config": options["kafka.sasl.jaas.config"].replace(
        "alice-secret", "wrong")}  # fmt: skip
    with pytest.raises(Exception, match=r"(?i)authentication"):
        spark.read.format("kafkalite").options(**bad).option(
            "subscribe", "secure-in"
        ).load().count()
