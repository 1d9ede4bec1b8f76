"""Streaming reads and writes through the `kafkalite` format: maxOffsetsPerTrigger micro-batches,
Trigger.AvailableNow, restart from a checkpoint into a file sink, failOnDataLoss, new partitions,
minOffsetsPerTrigger, and a streaming write round trip."""

from __future__ import annotations

import shutil
import time

import pytest
from spark_support import consume_all, produce

from kafkalite.client import KafkaAdminClient

pytestmark = pytest.mark.spark


def _stream(spark, broker, topic, **opts):
    reader = (
        spark.readStream.format("kafkalite")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
    )
    for k, v in opts.items():
        reader = reader.option(k, v)
    return reader.load()


def _run_available_now(df, sink_format, checkpoint, path=None, name=None, timeout=120):
    writer = df.writeStream.format(sink_format).option("checkpointLocation", str(checkpoint))
    if path is not None:
        writer = writer.option("path", str(path))
    if name is not None:
        writer = writer.queryName(name)
    query = writer.trigger(availableNow=True).start()
    assert query.awaitTermination(timeout), "availableNow query did not stop by itself"
    if query.exception() is not None:
        raise query.exception()
    return query


def _input_rows(query):
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"] > 0]


def test_max_offsets_per_trigger_splits_into_expected_micro_batches(spark, broker, topic, tmp_path):
    broker.create_topic(topic, 2)
    produce(broker, topic, [{"value": b"%d" % i, "partition": i % 2} for i in range(100)])
    df = _stream(spark, broker, topic, maxOffsetsPerTrigger="20")
    query = _run_available_now(
        df, "memory", tmp_path / "ckpt", name="mopt_" + topic.replace("-", "_")
    )
    # 50 records per partition, 20 per trigger split in proportion to the backlog: 10 + 10
    assert _input_rows(query) == [20] * 5
    assert spark.sql(f"SELECT count(*) FROM mopt_{topic.replace('-', '_')}").first()[0] == 100


def test_proportional_split_follows_backlog(spark, broker, topic, tmp_path):
    broker.create_topic(topic, 2)
    produce(broker, topic, [{"value": b"x", "partition": 0 if i < 75 else 1} for i in range(100)])
    df = _stream(spark, broker, topic, maxOffsetsPerTrigger="40")
    query = _run_available_now(df, "noop", tmp_path / "ckpt")
    first = query.recentProgress[0]["sources"][0]
    import json

    end = (
        json.loads(first["endOffset"])
        if isinstance(first["endOffset"], str)
        else first["endOffset"]
    )
    assert end == {topic: {"0": 30, "1": 10}}
    assert sum(_input_rows(query)) == 100


def test_available_now_reads_everything_then_stops(spark, broker, topic, tmp_path):
    broker.create_topic(topic, 3)
    produce(broker, topic, [{"value": b"%d" % i, "partition": i % 3} for i in range(90)])
    df = _stream(spark, broker, topic)
    query = _run_available_now(df, "parquet", tmp_path / "ckpt", path=tmp_path / "out")
    assert not query.isActive
    assert sum(_input_rows(query)) == 90
    assert spark.read.parquet(str(tmp_path / "out")).count() == 90


def test_restart_from_checkpoint_continues_exactly(spark, broker, topic, tmp_path):
    broker.create_topic(topic, 2)
    produce(broker, topic, [{"value": b"a%d" % i, "partition": i % 2} for i in range(60)])
    df = _stream(spark, broker, topic, maxOffsetsPerTrigger="25").selectExpr(
        "partition", "offset", "CAST(value AS STRING) AS value"
    )
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    _run_available_now(df, "parquet", ckpt, path=out)
    produce(broker, topic, [{"value": b"b%d" % i, "partition": i % 2} for i in range(40)])
    # a continuous (processing-time) run stopped mid-way, then an availableNow run to finish
    query = (
        df.writeStream.format("parquet")
        .option("checkpointLocation", str(ckpt))
        .option("path", str(out))
        .trigger(processingTime="100 milliseconds")
        .start()
    )
    deadline = time.monotonic() + 60
    while not any(p["numInputRows"] > 0 for p in query.recentProgress):
        assert time.monotonic() < deadline, "the restarted query made no progress"
        time.sleep(0.2)
    query.stop()
    _run_available_now(df, "parquet", ckpt, path=out)
    rows = spark.read.parquet(str(out)).collect()
    keys = sorted((r.partition, r.offset) for r in rows)
    assert keys == [(0, o) for o in range(50)] + [
        (1, o) for o in range(50)
    ]  # no gaps, no duplicates
    assert len({r.value for r in rows}) == 100


def test_fail_on_data_loss(spark, broker, topic, tmp_path):
    broker.create_topic(topic, 1)
    produce(broker, topic, [{"value": b"%d" % i} for i in range(100)])
    df_fail = _stream(spark, broker, topic)
    ckpt = tmp_path / "ckpt"
    _run_available_now(df_fail, "parquet", ckpt, path=tmp_path / "out")
    produce(broker, topic, [{"value": b"%d" % i} for i in range(100, 200)])
    with KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers) as admin:
        admin.delete_records({(topic, 0): 150})
    shutil.copytree(ckpt, tmp_path / "ckpt2")
    shutil.copytree(tmp_path / "out", tmp_path / "out2")
    with pytest.raises(Exception, match=r"Data loss: offsets 100 to 149 .* were deleted"):
        _run_available_now(df_fail, "parquet", ckpt, path=tmp_path / "out")
    df_skip = _stream(spark, broker, topic, failOnDataLoss="false").select("offset")
    query = _run_available_now(df_skip, "parquet", tmp_path / "ckpt2", path=tmp_path / "out2")
    assert sum(_input_rows(query)) == 50
    offsets = sorted(r.offset for r in spark.read.parquet(str(tmp_path / "out2")).collect())
    assert [o for o in offsets if o >= 100] == list(range(150, 200))  # 100..149 were skipped


def test_new_partitions_start_at_earliest(spark, broker, topic, tmp_path):
    broker.create_topic(topic, 1)
    produce(broker, topic, [{"value": b"x"} for _ in range(10)])
    df = _stream(spark, broker, topic).select("partition", "offset")
    ckpt, out = tmp_path / "ckpt", tmp_path / "out"
    _run_available_now(df, "parquet", ckpt, path=out)
    with KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers) as admin:
        admin.create_partitions({topic: 3})
    produce(broker, topic, [{"value": b"y", "partition": p} for p in (1, 2, 2)])
    _run_available_now(df, "parquet", ckpt, path=out)
    keys = sorted((r.partition, r.offset) for r in spark.read.parquet(str(out)).collect())
    assert keys == [(0, o) for o in range(10)] + [(1, 0), (2, 0), (2, 1)]


def test_min_offsets_per_trigger_waits_for_enough_records(spark, broker, topic, tmp_path):
    broker.create_topic(topic, 1)
    produce(broker, topic, [{"value": b"x"} for _ in range(5)])
    df = _stream(spark, broker, topic, minOffsetsPerTrigger="20", maxTriggerDelay="1h")
    query = (
        df.writeStream.format("noop")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:
        time.sleep(4)
        assert _input_rows(query) == []  # 5 < 20 and the delay has not passed
        produce(broker, topic, [{"value": b"y"} for _ in range(20)])
        deadline = time.monotonic() + 60
        while not _input_rows(query):
            assert time.monotonic() < deadline
            time.sleep(0.2)
        assert _input_rows(query) == [25]
    finally:
        query.stop()


def test_streaming_write_round_trips(spark, broker, topic, tmp_path):
    source, sink = topic + "-in", topic + "-out"
    broker.create_topic(source, 2)
    broker.create_topic(sink, 2)
    sent = [
        {"value": b"v%d" % i, "key": b"k%d" % i, "partition": i % 2, "headers": [("n", b"%d" % i)]}
        for i in range(80)
    ]
    produce(broker, source, sent)
    df = _stream(spark, broker, source, includeHeaders="true").selectExpr(
        "key", "value", "partition", "headers"
    )
    query = (
        df.writeStream.format("kafkalite")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("topic", sink)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120)
    assert query.exception() is None
    got = sorted((r.partition, r.key, r.value, tuple(r.headers)) for r in consume_all(broker, sink))
    expected = sorted((s["partition"], s["key"], s["value"], tuple(s["headers"])) for s in sent)
    assert got == expected


def test_streaming_write_failure_fails_the_query(spark, broker, topic, tmp_path):
    source, sink = topic + "-in", topic + "-out"
    broker.create_topic(source, 1)
    broker.create_topic(sink, 1, max_message_bytes=200)
    produce(broker, source, [{"value": b"z" * 3000}])
    query = (
        _stream(spark, broker, source)
        .select("value")
        .writeStream.format("kafkalite")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("topic", sink)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    with pytest.raises(Exception, match=r"(?i)MESSAGE_TOO_LARGE|too large"):
        query.awaitTermination(120)
