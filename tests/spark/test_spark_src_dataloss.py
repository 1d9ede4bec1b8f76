"""Spark's data-loss table, one case per test: retention deleting records under a running query, a
partition added mid-stream whose log start was deleted, offsets going backwards, a deleted partition;
failOnDataLoss=true fails the query, false skips exactly what is gone and reads everything else."""

from __future__ import annotations

import shutil
import time

import pytest
from spark_support import produce

from kafkalite.client import KafkaAdminClient

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _stream(spark, broker, topic, **opts):
    reader = (
        spark.readStream.format("kafkalite")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
    )
    for k, v in opts.items():
        reader = reader.option(k, v)
    return reader.load().selectExpr("partition", "offset")


def _available_now(df, ckpt, out):
    query = (
        df.writeStream.format("parquet")
        .option("checkpointLocation", str(ckpt))
        .option("path", str(out))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120), "availableNow query did not stop by itself"
    if query.exception() is not None:
        raise query.exception()
    return query


def _keys(spark, out):
    # the data files themselves (a copied checkpoint's sink log would not match a fresh directory)
    rows = spark.read.parquet(f"{out}/part-*.parquet").collect()
    return sorted((r.partition, r.offset) for r in rows)


def _total_rows(query) -> int:
    return sum(p["numInputRows"] for p in query.recentProgress)


@pytest.mark.parametrize("fail", [True, False], ids=["fail", "skip"])
def test_retention_deleting_records_under_a_running_query(spark, broker, topic, tmp_path, fail):
    broker.create_topic(topic, 1)
    produce(broker, topic, [{"value": b"%d" % i} for i in range(100)])
    # minOffsetsPerTrigger holds the next batch back until 100 new offsets exist, so the deletion
    # below happens while the query runs and before it plans the batch that needs those offsets
    df = _stream(
        spark,
        broker,
        topic,
        failOnDataLoss=str(fail).lower(),
        minOffsetsPerTrigger="100",
        maxTriggerDelay="1h",
    )
    out = tmp_path / "out"
    query = (
        df.writeStream.format("parquet")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .option("path", str(out))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:
        deadline = time.monotonic() + 90
        while _total_rows(query) < 100:
            assert time.monotonic() < deadline, "the first batch did not run"
            assert query.exception() is None
            time.sleep(0.2)
        produce(broker, topic, [{"value": b"%d" % i} for i in range(100, 199)])
        with KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers) as admin:
            admin.delete_records({(topic, 0): 150})
        produce(broker, topic, [{"value": b"199"}])  # now 100 new offsets: the batch is planned
        if fail:
            with pytest.raises(
                Exception, match=r"Data loss: offsets 100 to 149 of .* were deleted"
            ):
                query.awaitTermination(90)
            return
        while _total_rows(query) < 150:
            assert time.monotonic() < deadline, "the batch after the deletion did not run"
            assert query.exception() is None
            time.sleep(0.2)
    finally:
        query.stop()
    assert _keys(spark, out) == [(0, o) for o in range(100)] + [(0, o) for o in range(150, 200)]


def test_new_partition_whose_start_was_deleted(spark, broker, topic, tmp_path):
    broker.create_topic(topic, 1)
    produce(broker, topic, [{"value": b"x"} for _ in range(10)])
    ckpt, out = tmp_path / "ckpt", tmp_path / "out"
    _available_now(_stream(spark, broker, topic), ckpt, out)
    with KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers) as admin:
        admin.create_partitions({topic: 2})
        produce(broker, topic, [{"value": b"y", "partition": 1} for _ in range(10)])
        admin.delete_records({(topic, 1): 4})
    shutil.copytree(ckpt, tmp_path / "ckpt2")
    with pytest.raises(Exception, match=r"Data loss: new partition .*-1 starts at offset 4, not 0"):
        _available_now(_stream(spark, broker, topic), ckpt, out)
    df_skip = _stream(spark, broker, topic, failOnDataLoss="false")
    _available_now(df_skip, tmp_path / "ckpt2", tmp_path / "out2")
    assert _keys(spark, tmp_path / "out2") == [(1, o) for o in range(4, 10)]


def test_offsets_going_backwards_and_a_deleted_partition(spark, broker, topic, tmp_path):
    broker.create_topic(topic, 1)
    produce(broker, topic, [{"value": b"x"} for _ in range(20)])
    ckpt, out = tmp_path / "ckpt", tmp_path / "out"
    _available_now(_stream(spark, broker, topic), ckpt, out)
    saved = tmp_path / "saved"
    shutil.copytree(ckpt, saved)
    with KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers) as admin:
        admin.delete_topics([topic])
        deadline = time.monotonic() + 30
        while topic in broker.topics():
            assert time.monotonic() < deadline
            time.sleep(0.1)
    # the partition is gone
    with pytest.raises(Exception, match=r"Data loss: partitions \[.*-0'\] are gone"):
        _available_now(_stream(spark, broker, topic), ckpt, out)
    shutil.rmtree(ckpt)
    shutil.copytree(saved, ckpt)
    gone_ckpt = tmp_path / "gone"
    shutil.copytree(saved, gone_ckpt)
    query = _available_now(
        _stream(spark, broker, topic, failOnDataLoss="false"), gone_ckpt, tmp_path / "o2"
    )
    assert _total_rows(query) == 0
    # re-created with fewer records: its offsets went back from 20 to 5
    broker.create_topic(topic, 1)
    produce(broker, topic, [{"value": b"n"} for _ in range(5)])
    with pytest.raises(Exception, match=r"Data loss: the offset of .*-0 went back from 20 to 5"):
        _available_now(_stream(spark, broker, topic), ckpt, out)
    # skipped: the query continues from the new log's offset 5 and reads what comes after it
    back_ckpt = tmp_path / "back"
    shutil.copytree(saved, back_ckpt)
    df_skip = _stream(spark, broker, topic, failOnDataLoss="false")
    _available_now(df_skip, back_ckpt, tmp_path / "o3")
    produce(broker, topic, [{"value": b"m"} for _ in range(3)])
    _available_now(df_skip, back_ckpt, tmp_path / "o3")
    assert _keys(spark, tmp_path / "o3") == [(0, 5), (0, 6), (0, 7)]
