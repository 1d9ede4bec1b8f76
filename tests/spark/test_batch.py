"""Batch reads and writes through the `kafkalite` format: contents equal what was produced, offset and
timestamp ranges, minPartitions, and the options Spark's Kafka source rejects."""

from __future__ import annotations

import pytest
from spark_support import consume_all, produce

pytestmark = pytest.mark.spark

T0 = 1_700_000_000_000  # ms


def _records(n: int, partitions: int) -> list[dict]:
    out = []
    for i in range(n):
        rec = {
            "value": f"value-{i}".encode(),
            "key": None if i % 7 == 0 else f"key-{i}".encode(),
            "partition": i % partitions,
            "timestamp_ms": T0 + i * 1000,
        }
        if i % 3 == 0:
            rec["headers"] = [("h1", f"x{i}".encode()), ("h2", None if i % 2 else b"y")]
        out.append(rec)
    return out


def _read(spark, broker, topic, **opts):
    reader = (
        spark.read.format("kafkalite")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("subscribe", topic)
    )
    for k, v in opts.items():
        reader = reader.option(k, v)
    return reader.load()


@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
def test_batch_read_equals_what_was_produced(spark, broker, topic, isolation):
    # read_uncommitted takes the columnar fast path, read_committed the KafkaConsumer path
    broker.create_topic(topic, 3)
    sent = _records(300, 3)
    meta = produce(broker, topic, sent)
    df = _read(spark, broker, topic, includeHeaders="true", **{"kafka.isolation.level": isolation})
    assert [f.name for f in df.schema.fields] == [
        "key",
        "value",
        "topic",
        "partition",
        "offset",
        "timestamp",
        "timestampType",
        "headers",
    ]
    rows = df.selectExpr(
        "key",
        "value",
        "topic",
        "partition",
        "offset",
        "CAST(unix_micros(timestamp) / 1000 AS BIGINT) AS ts_ms",
        "timestampType",
        "headers",
    ).collect()
    got = {
        (r.partition, r.offset): (
            r.key,
            r.value,
            r.topic,
            r.ts_ms,
            r.timestampType,
            None if r.headers is None else [(h.key, h.value) for h in r.headers],
        )
        for r in rows
    }
    expected = {
        (m.partition, m.offset): (
            s.get("key"),
            s["value"],
            topic,
            s["timestamp_ms"],
            0,
            s.get("headers") or None,
        )
        for s, m in zip(sent, meta)
    }
    assert len(rows) == len(sent)
    assert got == expected


def test_offset_ranges_json_and_timestamps(spark, broker, topic):
    broker.create_topic(topic, 2)
    produce(broker, topic, _records(40, 2))  # 20 per partition; ts = T0 + i s, partition i % 2
    df = _read(
        spark,
        broker,
        topic,
        startingOffsets=f'{{"{topic}":{{"0":5,"1":-2}}}}',
        endingOffsets=f'{{"{topic}":{{"0":15,"1":-1}}}}',
    )
    offs = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
    assert offs == [(0, o) for o in range(5, 15)] + [(1, o) for o in range(20)]
    # record i is at offset i // 2 of partition i % 2 with timestamp T0 + i s
    df = _read(
        spark, broker, topic, startingTimestamp=str(T0 + 10_000), endingTimestamp=str(T0 + 30_000)
    )
    offs = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
    assert offs == [(0, o) for o in range(5, 15)] + [(1, o) for o in range(5, 15)]
    by_ts = f'{{"{topic}":{{"0":{T0 + 36_000},"1":{T0}}}}}'
    df = _read(spark, broker, topic, startingOffsetsByTimestamp=by_ts)
    offs = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
    assert offs == [(0, o) for o in range(18, 20)] + [(1, o) for o in range(20)]


def test_min_partitions_splits_big_partitions(spark, broker, topic):
    broker.create_topic(topic, 2)
    produce(
        broker, topic, [{"value": b"v%d" % i, "partition": 0 if i < 90 else 1} for i in range(100)]
    )
    df = _read(spark, broker, topic, minPartitions="6")
    assert df.rdd.getNumPartitions() >= 6
    offs = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
    assert offs == [(0, o) for o in range(90)] + [(1, o) for o in range(10)]


def test_subscribe_pattern_and_assign(spark, broker, topic):
    broker.create_topic(topic + "-a", 1)
    broker.create_topic(topic + "-b", 2)
    produce(broker, topic + "-a", [{"value": b"a"}] * 3)
    produce(broker, topic + "-b", [{"value": b"b", "partition": i % 2} for i in range(4)])
    df = (
        spark.read.format("kafkalite")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("subscribePattern", topic + "-.*")
        .load()
    )
    assert df.count() == 7
    df = (
        spark.read.format("kafkalite")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("assign", f'{{"{topic}-b":[1]}}')
        .load()
    )
    assert sorted((r.topic, r.partition) for r in df.collect()) == [(topic + "-b", 1)] * 2


@pytest.mark.parametrize(
    ("option", "value", "needle"),
    [
        ("kafka.auto.offset.reset", "earliest", "startingOffsets"),
        ("kafka.enable.auto.commit", "true", "never commits"),
        ("kafka.key.deserializer", "x", "keys are always read as bytes"),
        ("kafka.value.deserializer", "x", "values are always read as bytes"),
        ("kafka.interceptor.classes", "x", "interceptor"),
        ("subscribePattern", "x.*", "Only one of"),
        ("startingOffsets", "latest", "can't be latest for batch"),
        ("endingOffsets", "earliest", "can't be earliest for batch"),
        ("minPartitions", "0", "positive"),
    ],
)
def test_options_spark_rejects_are_rejected(spark, broker, topic, option, value, needle):
    with pytest.raises(Exception, match=needle):
        _read(spark, broker, topic, **{option: value}).collect()


def test_stream_rejects_ending_offsets_and_accepts_group_id(spark, broker, topic):
    broker.create_topic(topic, 1)
    with pytest.raises(Exception, match="not valid in streaming"):
        (
            spark.readStream.format("kafkalite")
            .option("kafka.bootstrap.servers", broker.bootstrap_servers)
            .option("subscribe", topic)
            .option("endingOffsets", "latest")
            .load()
            .writeStream.format("noop")
            .start()
            .awaitTermination(30)
        )
    produce(broker, topic, [{"value": b"g"}])
    assert _read(spark, broker, topic, **{"kafka.group.id": "spark-group"}).count() == 1


def test_batch_write_round_trips(spark, broker, topic):
    broker.create_topic(topic, 2)
    rows = [
        (f"k{i}", f"v{i}".encode(), i % 2, [("h", f"{i}".encode())] if i % 2 else None)
        for i in range(50)
    ]
    df = spark.createDataFrame(
        rows,
        "key STRING, value BINARY, partition INT, headers ARRAY<STRUCT<key:STRING,value:BINARY>>",
    )
    df.write.format("kafkalite").option("kafka.bootstrap.servers", broker.bootstrap_servers).option(
        "topic", topic
    ).mode("append").save()
    got = sorted(
        (r.key.decode(), r.value.decode(), r.partition, [(k, v) for k, v in r.headers] or None)
        for r in consume_all(broker, topic)
    )
    expected = sorted((k, v.decode(), p, h) for k, v, p, h in rows)
    assert got == expected


def test_write_without_value_or_topic_is_rejected(spark, broker, topic):
    df = spark.createDataFrame([("k",)], "key STRING")
    with pytest.raises(Exception, match="Required attribute 'value' not found"):
        df.write.format("kafkalite").option(
            "kafka.bootstrap.servers", broker.bootstrap_servers
        ).option("topic", topic).mode("append").save()
    df = spark.createDataFrame([("v",)], "value STRING")
    with pytest.raises(Exception, match="topic option required"):
        df.write.format("kafkalite").option(
            "kafka.bootstrap.servers", broker.bootstrap_servers
        ).mode("append").save()


def test_write_error_carries_the_brokers_message(spark, broker, topic):
    broker.create_topic(topic, 1, max_message_bytes=200)
    df = spark.createDataFrame([("x" * 5000,)], "value STRING")
    with pytest.raises(Exception, match=r"(?i)MESSAGE_TOO_LARGE|too large"):
        df.write.format("kafkalite").option(
            "kafka.bootstrap.servers", broker.bootstrap_servers
        ).option("topic", topic).mode("append").save()


def test_empty_topic_reads_nothing(spark, broker, topic):
    broker.create_topic(topic, 2)
    df = _read(spark, broker, topic)
    assert df.count() == 0
    assert df.collect() == []


def test_read_committed_batch_skips_aborted_and_stops_at_the_open_transaction(spark, broker, topic):
    """Real transactions (librdkafka): committed rows appear once, aborted ones never, and the offsets
    are planned up to the last stable offset — a transaction still open hides what follows it."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    broker.create_topic(topic, 1)
    bs = broker.bootstrap_servers
    p = confluent_kafka.Producer({"bootstrap.servers": bs, "transactional.id": f"spark-{topic}"})
    p.init_transactions(30)
    for label, commit in (("c1", True), ("a1", False), ("c2", True)):
        p.begin_transaction()
        for i in range(5):
            p.produce(topic, value=b"%s-%d" % (label.encode(), i), partition=0)
        p.flush(30)
        if commit:
            p.commit_transaction(30)
        else:
            p.abort_transaction(30)
    opener = confluent_kafka.Producer(
        {"bootstrap.servers": bs, "transactional.id": f"open-{topic}"}
    )
    opener.init_transactions(30)
    opener.begin_transaction()
    opener.produce(topic, value=b"open-0", partition=0)
    opener.flush(30)
    p.begin_transaction()
    p.produce(topic, value=b"after-open", partition=0)  # committed, but behind the open transaction
    p.commit_transaction(30)
    committed = [
        r.value
        for r in _read(spark, broker, topic, **{"kafka.isolation.level": "read_committed"})
        .select("value")
        .collect()
    ]
    assert sorted(committed) == sorted(b"%s-%d" % (x, i) for x in (b"c1", b"c2") for i in range(5))
    opener.commit_transaction(30)
    committed = [
        r.value
        for r in _read(spark, broker, topic, **{"kafka.isolation.level": "read_committed"})
        .select("value")
        .collect()
    ]
    assert sorted(committed) == sorted(
        [b"%s-%d" % (x, i) for x in (b"c1", b"c2") for i in range(5)] + [b"open-0", b"after-open"]
    )
