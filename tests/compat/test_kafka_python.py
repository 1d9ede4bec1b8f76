"""kafka-python against kafkalite: idempotent producer with every codec, headers, null/empty fields,
1 MiB messages, consumer by assign(), admin client and offsets by timestamp."""

from __future__ import annotations

import time

import pytest

kafka = pytest.importorskip("kafka")
from kafka import KafkaConsumer, KafkaProducer, TopicPartition  # noqa: E402
from kafka.admin import (  # noqa: E402
    ConfigResource,
    ConfigResourceType,
    KafkaAdminClient,
    NewPartitions,
    NewTopic,
)
from kafka.errors import TopicAlreadyExistsError  # noqa: E402

pytestmark = pytest.mark.compat


ALSO_ON_CLUSTER = True  # every test here runs on one broker and on an RF=3 cluster


def consume(bs: str, topic: str, count: int, partitions=(0,), timeout: float = 30) -> list:
    c = KafkaConsumer(
        bootstrap_servers=bs,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        consumer_timeout_ms=1000,
        max_partition_fetch_bytes=2 << 20,
    )
    c.assign([TopicPartition(topic, p) for p in partitions])
    out: list = []
    deadline = time.monotonic() + timeout
    try:
        while len(out) < count and time.monotonic() < deadline:
            out.extend(m for m in c)
    finally:
        c.close()
    return out


@pytest.mark.parametrize("codec", [None, "gzip", "snappy", "lz4", "zstd"])
def test_roundtrip_every_codec(broker, topic, codec):
    p = KafkaProducer(
        bootstrap_servers=broker.bootstrap_servers, compression_type=codec, linger_ms=5
    )
    records = [
        (b"k", b"v", [("h", b"1")]),
        (None, b"no-key", []),
        (b"", b"", []),
        (b"gone", None, []),
    ]
    records += [(b"n%d" % i, b"x" * i, []) for i in range(100)]
    futures = [p.send(topic, key=k, value=v, headers=h) for k, v, h in records]
    p.flush(30)
    offsets = [f.get(timeout=30).offset for f in futures]
    p.close()
    assert offsets == list(range(len(records)))
    got = consume(broker.bootstrap_servers, topic, len(records))
    assert [(m.key, m.value) for m in got] == [(k, v) for k, v, _ in records]
    assert got[0].headers == [("h", b"1")]


def test_one_mib_message(broker, topic):
    p = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, max_request_size=4 << 20)
    p.send(topic, value=b"z" * (1 << 20)).get(timeout=30)
    p.close()
    got = consume(broker.bootstrap_servers, topic, 1)
    assert len(got[0].value) == 1 << 20


def eventually(cond, timeout: float = 10.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def test_admin_and_offsets_for_times(broker, topic):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        admin.create_topics([NewTopic(topic, 2, 1, topic_configs={"retention.bytes": "1000000"})])
        with pytest.raises(TopicAlreadyExistsError):
            admin.create_topics([NewTopic(topic, 2, 1)])
        # a cluster's brokers learn of a new topic from the controller a moment apart
        assert eventually(lambda: topic in admin.list_topics())
        res = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
        text = repr(res)
        assert "retention.bytes" in text and "1000000" in text
        admin.create_partitions({topic: NewPartitions(4)})
        assert eventually(lambda: len(admin.describe_topics([topic])[0]["partitions"]) == 4)
        base = int(time.time() * 1000) - 50_000
        p = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
        for i in range(6):
            p.send(topic, value=b"%d" % i, partition=1, timestamp_ms=base + i * 1000)
        p.flush(30)
        p.close()
        c = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers)
        tp = TopicPartition(topic, 1)
        found = c.offsets_for_times({tp: base + 2500})
        assert found[tp].offset == 3
        assert c.end_offsets([tp])[tp] == 6
        assert c.beginning_offsets([tp])[tp] == 0
        c.close()
        admin.delete_topics([topic])
        assert eventually(lambda: topic not in admin.list_topics())
    finally:
        admin.close()
