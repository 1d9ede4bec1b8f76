"""confluent-kafka (librdkafka) against kafkalite: codecs, null/empty keys and values, headers, big messages,
many partitions, auto-creation, admin operations and offsets by timestamp."""

from __future__ import annotations

import time

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)

pytestmark = pytest.mark.compat


ALSO_ON_CLUSTER = True  # every test here runs on one broker and on an RF=3 cluster


def produce(bs: str, topic: str, records: list[tuple], **conf: object) -> list:
    delivered: list = []
    errors: list = []

    def cb(err, msg):  # type: ignore[no-untyped-def]
        (errors if err else delivered).append(err or msg)

    p = Producer({"bootstrap.servers": bs, "linger.ms": 5, "message.max.bytes": 4 << 20, **conf})
    for rec in records:
        part = rec[3] if len(rec) > 3 else None
        kw = {"partition": part} if part is not None else {}
        p.produce(topic, key=rec[0], value=rec[1], headers=rec[2] or None, on_delivery=cb, **kw)
    assert p.flush(30) == 0
    assert not errors, errors
    return delivered


def consume(
    bs: str, topic: str, count: int, partitions: list[int] | None = None, timeout: float = 30
) -> list:
    c = Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": "unused",
            "enable.auto.commit": False,
            "fetch.message.max.bytes": 1 << 20,
        }
    )
    c.assign([TopicPartition(topic, p, 0) for p in (partitions or [0])])
    out = []
    deadline = time.monotonic() + timeout
    try:
        while len(out) < count and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            assert m.error() is None, m.error()
            out.append(m)
    finally:
        c.close()
    return out


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_roundtrip_every_codec_with_null_and_empty_fields(broker, topic, codec):
    records = [
        (b"k1", b"v1", [("h1", b"x"), ("h2", None)]),
        (None, b"value-without-key", None),
        (b"", b"", None),
        (b"tombstone", None, None),
        (None, None, [("only", b"headers")]),
    ] + [(f"k{i}".encode(), f"v{i}".encode() * 20, None) for i in range(200)]
    produce(broker.bootstrap_servers, topic, records, **{"compression.type": codec})
    got = consume(broker.bootstrap_servers, topic, len(records))
    assert [m.offset() for m in got] == list(range(len(records)))
    assert [(m.key(), m.value()) for m in got] == [(r[0], r[1]) for r in records]
    assert got[0].headers() == [("h1", b"x"), ("h2", None)]
    assert got[4].headers() == [("only", b"headers")]


def test_one_mib_messages(broker, topic):
    big = [(b"k%d" % i, bytes([i]) * (1 << 20), None) for i in range(3)]
    produce(broker.bootstrap_servers, topic, big)
    got = consume(broker.bootstrap_servers, topic, 3)
    assert [len(m.value()) for m in got] == [1 << 20] * 3
    assert [m.value()[:1] for m in got] == [b"\x00", b"\x01", b"\x02"]


def test_message_too_large_is_refused(broker, topic):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 1, config={"max.message.bytes": "10000"})])[
        topic
    ].result(30)
    p = Producer({"bootstrap.servers": broker.bootstrap_servers, "message.max.bytes": 4 << 20})
    errs = []
    p.produce(topic, value=b"x" * 50_000, on_delivery=lambda e, m: errs.append(e))
    p.flush(30)
    assert (
        errs
        and errs[0] is not None
        and errs[0].code() == confluent_kafka.KafkaError.MSG_SIZE_TOO_LARGE
    )


def test_many_partitions_keep_order(broker, topic):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 24, 1)])[topic].result(30)
    records = [(f"key-{i % 50}".encode(), str(i).encode(), None) for i in range(3000)]
    delivered = produce(broker.bootstrap_servers, topic, records)
    parts = {m.partition() for m in delivered}
    assert len(parts) > 10
    got = consume(broker.bootstrap_servers, topic, len(records), partitions=list(range(24)))
    assert len(got) == len(records)
    by_key: dict[bytes, list[int]] = {}
    for m in got:
        by_key.setdefault(m.key(), []).append(int(m.value()))
    for seq in by_key.values():
        assert seq == sorted(seq)  # per-key (so per-partition) order preserved


def test_auto_creation_on_produce_and_metadata(broker, topic):
    produce(broker.bootstrap_servers, topic, [(None, b"hello", None)])
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    md = admin.list_topics(timeout=10)
    assert topic in md.topics
    assert len(md.topics[topic].partitions) == 1
    assert md.cluster_id and len(md.cluster_id) == 22


def test_admin_create_describe_alter_delete(broker, topic):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 3, 1, config={"retention.ms": "3600000"})])[topic].result(
        30
    )
    with pytest.raises(KafkaException):
        admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(30)
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    cfg = admin.describe_configs([res])[res].result(30)
    assert cfg["retention.ms"].value == "3600000"
    assert (
        cfg["retention.ms"].source == confluent_kafka.admin.ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    )
    assert cfg["segment.bytes"].is_default
    inc = ConfigResource(
        ConfigResource.Type.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    admin.incremental_alter_configs([inc])[inc].result(30)
    cfg = admin.describe_configs([res])[res].result(30)
    assert cfg["cleanup.policy"].value == "compact"
    assert cfg["retention.ms"].value == "3600000"
    admin.create_partitions([NewPartitions(topic, 5)])[topic].result(30)
    deadline = time.monotonic() + 10  # in a cluster, brokers hear of new partitions a moment apart
    while len(admin.list_topics(topic, timeout=10).topics[topic].partitions) < 5:
        assert time.monotonic() < deadline, "the new partitions never showed in the metadata"
        time.sleep(0.1)
    some_broker = next(iter(admin.list_topics(timeout=10).brokers))  # 0 alone; 1..3 in a cluster
    bres = ConfigResource(ConfigResource.Type.BROKER, str(some_broker))
    bcfg = admin.describe_configs([bres])[bres].result(30)
    assert bcfg["message.max.bytes"].value == str(8 * 1024 * 1024)
    admin.delete_topics([topic])[topic].result(30)
    deadline = time.monotonic() + 10
    while topic in admin.list_topics(timeout=10).topics and time.monotonic() < deadline:
        time.sleep(0.1)
    assert topic not in admin.list_topics(timeout=10).topics


def test_invalid_topic_name_is_refused(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    with pytest.raises(KafkaException) as exc:
        admin.create_topics([NewTopic("bad/name", 1, 1)])["bad/name"].result(30)
    assert exc.value.args[0].code() == confluent_kafka.KafkaError.TOPIC_EXCEPTION


def test_offsets_for_times_and_watermarks(broker, topic):
    base = int(time.time() * 1000) - 100_000
    p = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i in range(10):
        p.produce(topic, value=b"%d" % i, timestamp=base + i * 1000)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "x"})
    try:
        found = c.offsets_for_times([TopicPartition(topic, 0, base + 4500)], timeout=10)
        assert found[0].offset == 5
        past = c.offsets_for_times([TopicPartition(topic, 0, base + 999_999)], timeout=10)
        assert past[0].offset == -1  # nothing that late: end
        assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, 10)
    finally:
        c.close()


def test_delete_records_moves_log_start(broker, topic):
    produce(broker.bootstrap_servers, topic, [(None, b"%d" % i, None) for i in range(10)])
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    if not hasattr(admin, "delete_records"):
        pytest.skip("confluent-kafka too old for delete_records")
    fut = admin.delete_records([TopicPartition(topic, 0, 4)])
    res = next(iter(fut.values())).result(30)
    assert res.low_watermark == 4
    c = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "x"})
    try:
        assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (4, 10)
    finally:
        c.close()


def test_idempotent_producer_writes_each_record_once_in_order(broker, topic):
    """librdkafka's idempotent producer (InitProducerId, sequence numbers, up to 5 batches in flight)
    against the broker's per-partition sequence checks."""
    bs = broker.bootstrap_servers
    records = [(None, b"%06d" % i, None, 0) for i in range(20_000)]
    for _ in range(2):  # a second producer gets a new producer id and starts at sequence 0 again
        produce(
            bs,
            topic,
            records,
            **{"enable.idempotence": True, "linger.ms": 1, "batch.num.messages": 500},
        )
    got = consume(bs, topic, 2 * len(records))
    assert [m.value() for m in got] == [r[1] for r in records] * 2
    assert [m.offset() for m in got] == list(range(2 * len(records)))


def test_topic_compression_type_rewrites_batches_readable_by_librdkafka(broker, topic):
    bs = broker.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(topic, 1, 1, config={"compression.type": "zstd"})])[topic].result(
        30
    )
    records = [(b"k%d" % i, b"v%d" % i * 50, [("h", b"%d" % i)]) for i in range(500)]
    produce(bs, topic, records, **{"compression.type": "none"})
    got = consume(bs, topic, len(records))
    assert [(m.key(), m.value(), m.headers()) for m in got] == records


def test_create_partitions_with_a_bad_assignment_is_refused_and_changes_nothing(broker, topic):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    some_broker = next(iter(admin.list_topics(timeout=10).brokers))
    for assignment in ([[some_broker]], [[some_broker], [12345]]):  # too few; an unknown broker
        fut = admin.create_partitions([NewPartitions(topic, 3, replica_assignment=assignment)])
        with pytest.raises(KafkaException) as err:
            fut[topic].result(30)
        assert err.value.args[0].code() == confluent_kafka.KafkaError.INVALID_REPLICA_ASSIGNMENT
    assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 1
