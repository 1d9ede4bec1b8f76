"""Interop with confluent-kafka (librdkafka) through kafkalite and Tansu brokers: kafkalite producer ->
confluent consumer and the reverse, in every codec, with keys landing in the same partitions."""

from __future__ import annotations

import time

import pytest
from test_client_support import any_broker, create_topic, new_topic_name  # noqa: F401

from kafkalite.client import KafkaConsumer, KafkaProducer, TopicPartition

confluent_kafka = pytest.importorskip("confluent_kafka")

pytestmark = [pytest.mark.compat, pytest.mark.timeout(60)]
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


@pytest.mark.parametrize("codec", CODECS)
def test_kafkalite_producer_to_confluent_consumer(any_broker, codec: str) -> None:  # noqa: F811
    bs = any_broker.bootstrap_servers
    topic = create_topic(bs, new_topic_name("k2c"), 3)
    sent = {}
    with KafkaProducer(bootstrap_servers=bs, compression_type=codec, linger_ms=2) as p:
        for i in range(300):
            key = b"key-%d" % i
            md = p.send(topic, b"val-%d" % i, key=key, headers=[("n", b"%d" % i)])
            sent[key] = md
        p.flush(30)
    placed = {k: f.get(10) for k, f in sent.items()}
    c = confluent_kafka.Consumer(
        {"bootstrap.servers": bs, "group.id": new_topic_name("g"), "auto.offset.reset": "earliest"}
    )
    c.assign(
        [
            confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
            for p in range(3)
        ]
    )
    got = {}
    deadline = time.monotonic() + 30
    while len(got) < 300 and time.monotonic() < deadline:
        for m in c.consume(500, 0.5):
            if m.error() is None:
                got[m.key()] = m
    c.close()
    assert len(got) == 300
    for key, md in placed.items():
        m = got[key]
        assert (m.partition(), m.offset()) == (md.partition, md.offset)
        assert m.value() == b"val-" + key[4:] and m.headers() == [("n", key[4:])]


@pytest.mark.parametrize("codec", CODECS)
def test_confluent_producer_to_kafkalite_consumer(any_broker, codec: str) -> None:  # noqa: F811
    bs = any_broker.bootstrap_servers
    topic = create_topic(bs, new_topic_name("c2k"), 3)
    p = confluent_kafka.Producer(
        {
            "bootstrap.servers": bs,
            "compression.type": codec,
            "partitioner": "murmur2_random",  # the Java client's partitioner
            "linger.ms": 2,
        }
    )
    for i in range(300):
        p.produce(topic, value=b"val-%d" % i, key=b"key-%d" % i, headers=[("n", b"%d" % i)])
    assert p.flush(30) == 0
    with KafkaConsumer(bootstrap_servers=bs, auto_offset_reset="earliest") as c:
        c.assign([TopicPartition(topic, p) for p in range(3)])
        got = {}
        deadline = time.monotonic() + 30
        while len(got) < 300 and time.monotonic() < deadline:
            for recs in c.poll(500).values():
                for r in recs:
                    got[r.key] = r
    assert len(got) == 300
    from kafkalite.client.partitioner import partition_for_key

    for i in range(300):
        r = got[b"key-%d" % i]
        assert r.value == b"val-%d" % i and r.headers == [("n", b"%d" % i)]
        assert r.partition == partition_for_key(b"key-%d" % i, 3)  # librdkafka murmur2 == ours
