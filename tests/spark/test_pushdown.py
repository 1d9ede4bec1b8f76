"""Spark filter pushdown (issue 35): the same rows with and without pushdown for key, partition, offset and
timestamp filters; the broker filtered (its counters say so); partition filters read only those partitions;
the kafkalite.filter option in batch and streaming reads.
"""

from __future__ import annotations

import datetime as dt

import pytest
from spark_support import produce

from kafkalite.web.metrics import BrokerCollector, LoopLagProbe

pytestmark = pytest.mark.spark

T0 = 1_700_000_000_000  # ms
N = 900
PARTS = 3


def _records() -> list[dict]:
    return [
        {
            "value": f"value-{i}".encode(),
            "key": None if i % 11 == 0 else f"user-{i % 30}".encode(),
            "partition": i % PARTS,
            "timestamp_ms": T0 + i * 1000,
        }
        for i in range(N)
    ]


@pytest.fixture(scope="module")
def pushdown_topic(spark, broker):
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    name = "spark-pushdown"
    broker.create_topic(name, PARTS)
    produce(broker, name, _records())
    yield name
    spark.conf.unset("spark.sql.python.filterPushdown.enabled")


def _df(spark, broker, topic, pushdown: bool, **opts):
    reader = (
        spark.read.format("kafkalite")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("subscribe", topic)
        .option("kafkalite.pushdown", str(pushdown).lower())
    )
    for k, v in opts.items():
        reader = reader.option(k, v)
    return reader.load()


def _rows(df) -> list[tuple]:
    got = df.selectExpr(
        "key", "value", "partition", "offset", "CAST(unix_micros(timestamp) / 1000 AS BIGINT)"
    ).collect()
    return sorted((tuple(r) for r in got), key=lambda t: (t[2], t[3]))


WHERE = {
    "key =": ("key = CAST('user-7' AS BINARY)", lambda i: i % 11 and i % 30 == 7),
    "key IN": (
        "key IN (CAST('user-7' AS BINARY), CAST('user-8' AS BINARY))",
        lambda i: i % 11 and i % 30 in (7, 8),
    ),
    "key IS NULL": ("key IS NULL", lambda i: i % 11 == 0),
    "partition =": ("partition = 1", lambda i: i % PARTS == 1),
    "partition IN and NOT": ("partition IN (0, 2) AND partition <> 2", lambda i: i % PARTS == 0),
    "offset range": ("offset >= 100 AND offset < 120", lambda i: 100 <= i // PARTS < 120),
    "offset IN": ("offset IN (5, 7, 290)", lambda i: i // PARTS in (5, 7, 290)),
    "timestamp range": (
        f"timestamp >= timestamp_millis({T0 + 300_000}) AND timestamp < timestamp_millis({T0 + 360_500})",
        lambda i: 300 <= i <= 360,
    ),
    "timestamp micro bound": (
        f"timestamp > timestamp_micros({(T0 + 299_000) * 1000 + 1})",
        lambda i: i >= 300,
    ),
    "mixed": (
        f"key = CAST('user-3' AS BINARY) AND partition = 0 AND timestamp >= timestamp_millis({T0 + 100_000})"
        " AND value LIKE 'value-%'",
        lambda i: i % 11 and i % 30 == 3 and i % PARTS == 0 and i >= 100,
    ),
}


@pytest.mark.parametrize("name", list(WHERE))
def test_same_rows_with_and_without_pushdown(spark, broker, pushdown_topic, name):
    where, expect = WHERE[name]
    pushed = _rows(_df(spark, broker, pushdown_topic, True).where(where))
    plain = _rows(_df(spark, broker, pushdown_topic, False).where(where))
    assert pushed == plain
    assert len(pushed) == sum(1 for i in range(N) if expect(i)) > 0


def _filter_counters(broker) -> dict[str, int]:
    c = broker.server.stats.fetch_filter
    return {k: getattr(c, k) for k in ("bytes_scanned", "bytes_sent", "batches_dropped")}


def test_key_filter_is_applied_by_the_broker(spark, broker, pushdown_topic):
    before = _filter_counters(broker)
    rows = _rows(_df(spark, broker, pushdown_topic, True).where("key = CAST('user-9' AS BINARY)"))
    after = _filter_counters(broker)
    assert {r[0] for r in rows} == {b"user-9"}
    scanned = after["bytes_scanned"] - before["bytes_scanned"]
    sent = after["bytes_sent"] - before["bytes_sent"]
    assert scanned > 0 and sent < scanned
    # the /metrics text, rendered from the same broker's counters (this broker has no HTTP listener)
    text = BrokerCollector(broker.server, LoopLagProbe()).text().decode()
    metrics = {
        line.split()[0]: float(line.split()[1])
        for line in text.splitlines()
        if line.startswith("kafkalite_fetch_filter_")
    }
    assert metrics["kafkalite_fetch_filter_bytes_scanned_total"] >= after["bytes_scanned"]
    assert (
        metrics["kafkalite_fetch_filter_bytes_sent_total"]
        < metrics["kafkalite_fetch_filter_bytes_scanned_total"]
    )


def test_partition_filter_reads_only_that_partition(spark, broker, pushdown_topic):
    fetches = broker.server.stats.consumer_fetches
    before = {p: fetches.get((pushdown_topic, p), 0) for p in range(PARTS)}
    rows = _rows(_df(spark, broker, pushdown_topic, True).where("partition = 2"))
    after = {p: fetches.get((pushdown_topic, p), 0) for p in range(PARTS)}
    assert {r[2] for r in rows} == {2} and len(rows) == N // PARTS
    assert after[0] == before[0] and after[1] == before[1]
    assert after[2] > before[2]


def test_timestamp_filter_plans_only_the_matching_offsets(spark, broker, pushdown_topic):
    from pyspark.sql.datasource import GreaterThanOrEqual, LessThan

    from kafkalite.spark.source import KafkaliteDataSource

    ds = KafkaliteDataSource(
        {
            "kafka.bootstrap.servers": broker.bootstrap_servers,
            "subscribe": pushdown_topic,
            "kafkalite.pushdown": "true",
        }
    )
    reader = ds.reader(ds.schema())
    low = dt.datetime.fromtimestamp((T0 + 600_000) / 1000, tz=dt.UTC)
    high = dt.datetime.fromtimestamp((T0 + 630_000) / 1000, tz=dt.UTC)
    filters = [GreaterThanOrEqual(("timestamp",), low), LessThan(("timestamp",), high)]
    rest = list(reader.pushFilters(filters))
    assert rest == filters  # partially pushed: Spark checks the rows again
    ranges = {(r.partition, r.from_offset, r.until_offset) for r in reader.plan()}
    # record i sits at offset i // 3 of partition i % 3: i >= 600 starts at offset 200 everywhere
    assert ranges == {(p, 200, N // PARTS) for p in range(PARTS)}
    assert reader.opts.fetch_filter == (
        f"(timestamp >= {T0 + 600_000}) AND (timestamp < {T0 + 630_000})"
    )


def test_filter_option_in_batch_and_streaming(spark, broker, pushdown_topic, tmp_path):
    expr = "key IN ('user-4', 'user-5') AND offset < 200"
    want = sorted(
        (f"user-{i % 30}".encode(), i // PARTS)
        for i in range(N)
        if i % 11 and i % 30 in (4, 5) and i // PARTS < 200
    )
    batch = _df(spark, broker, pushdown_topic, False, **{"kafkalite.filter": expr})
    assert sorted((r.key, r.offset) for r in batch.select("key", "offset").collect()) == want
    stream = (
        spark.readStream.format("kafkalite")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("subscribe", pushdown_topic)
        .option("startingOffsets", "earliest")
        .option("kafkalite.filter", expr)
        .load()
        .select("key", "offset")
    )
    query = (
        stream.writeStream.format("memory")
        .queryName("pushdown_stream")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination(120)
    finally:
        query.stop()
    got = sorted((r.key, r.offset) for r in spark.sql("SELECT * FROM pushdown_stream").collect())
    assert got == want


def test_bad_filter_option_is_one_clear_error(spark, broker, pushdown_topic):
    with pytest.raises(Exception, match=r"kafkalite\.filter.*not a valid filter expression"):
        _df(spark, broker, pushdown_topic, False, **{"kafkalite.filter": "region = 'eu'"}).count()


def test_read_committed_with_pushdown(spark, broker, pushdown_topic):
    where = "key IN (CAST('user-1' AS BINARY), CAST('user-2' AS BINARY)) AND offset < 250"
    opts = {"kafka.isolation.level": "read_committed"}
    pushed = _rows(_df(spark, broker, pushdown_topic, True, **opts).where(where))
    plain = _rows(_df(spark, broker, pushdown_topic, False, **opts).where(where))
    assert pushed == plain and len(pushed) > 0
