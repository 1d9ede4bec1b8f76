"""read_committed on the columnar fast path: a confluent-kafka transactional producer commits and aborts
interleaved with another; the fast path, the client's row path and an independent read_committed consumer
must return the same records, stop at the last stable offset, and a Spark batch read must match."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from spark_support import consume_committed

from kafkalite.spark.kafkaio import OffsetReader, read_range, read_range_columns
from kafkalite.spark.planning import OffsetRange

pytestmark = pytest.mark.spark

confluent_kafka = pytest.importorskip("confluent_kafka")

COMMITTED = {"isolation.level": "read_committed"}


def _txn_producer(servers: str, tid: str) -> Any:
    p = confluent_kafka.Producer(
        {"bootstrap.servers": servers, "transactional.id": tid, "linger.ms": 1}
    )
    p.init_transactions(30)
    return p


@pytest.fixture
def txn_topic(broker, topic) -> Iterator[tuple[str, Any]]:
    """Two producers' transactions interleaved on 2 partitions (some aborted), plain records between
    them, and at the end a third producer's transaction left open (yielded, aborted afterwards)."""
    broker.create_topic(topic, 2)
    servers = broker.bootstrap_servers
    a = _txn_producer(servers, topic + "-a")
    b = _txn_producer(servers, topic + "-b")
    plain = confluent_kafka.Producer({"bootstrap.servers": servers, "linger.ms": 1})
    for rnd in range(6):
        a.begin_transaction()
        b.begin_transaction()
        for i in range(40):
            a.produce(topic, value=b"a%d-%d" % (rnd, i), partition=i % 2)
            b.produce(topic, value=b"b%d-%d" % (rnd, i), partition=i % 2)
        a.flush(30)
        b.flush(30)
        plain.produce(topic, value=b"p%d" % rnd, partition=rnd % 2)
        plain.flush(30)
        (a.commit_transaction if rnd % 3 else a.abort_transaction)(30)
        (b.abort_transaction if rnd % 2 else b.commit_transaction)(30)
    still_open = _txn_producer(servers, topic + "-open")
    still_open.begin_transaction()
    for i in range(10):
        still_open.produce(topic, value=b"open%d" % i, partition=i % 2)
    still_open.flush(30)
    plain.produce(topic, value=b"after-open", partition=0)
    plain.flush(30)
    try:
        yield topic, still_open
    finally:
        still_open.abort_transaction(30)


def _ranges(servers: str, topic: str, client: dict[str, str]) -> list[OffsetRange]:
    reader = OffsetReader(client)
    try:
        tps = [(topic, 0), (topic, 1)]
        start, end = reader.earliest(tps), reader.latest(tps)
    finally:
        reader.close()
    return [OffsetRange(t, p, start[(t, p)], end[(t, p)]) for t, p in tps]


def _fast(client, rng) -> list[tuple[int, int, bytes]]:
    return [
        (rng.partition, o, v)
        for cols in read_range_columns(client, rng, fail_on_data_loss=True, poll_timeout_ms=10_000)
        for o, v in zip(cols.offsets, cols.values, strict=True)
    ]


def _rows(client, rng) -> list[tuple[int, int, bytes]]:
    return [
        (rng.partition, r.offset, r.value)
        for chunk in read_range(client, rng, fail_on_data_loss=True, poll_timeout_ms=10_000)
        for r in chunk
    ]


def test_fast_path_read_committed_matches_the_row_path(broker, txn_topic):
    topic, _ = txn_topic
    client = {"bootstrap.servers": broker.bootstrap_servers, **COMMITTED}
    ranges = _ranges(broker.bootstrap_servers, topic, client)
    fast = [rec for rng in ranges for rec in _fast(client, rng)]
    rows = [rec for rng in ranges for rec in _rows(client, rng)]
    assert fast == rows
    values = [v for _, _, v in fast]
    assert not any(v.startswith(b"open") or v == b"after-open" for v in values)  # stops at LSO
    # rounds 1,2,4,5 of a were committed, b's rounds 0,2,4; and every plain record before the LSO
    expected = {b"a%d-%d" % (r, i) for r in (1, 2, 4, 5) for i in range(40)}
    expected |= {b"b%d-%d" % (r, i) for r in (0, 2, 4) for i in range(40)}
    expected |= {b"p%d" % r for r in range(6)}
    assert sorted(values) == sorted(expected)
    # read_uncommitted on the fast path returns the aborted records as well
    uncommitted = {"bootstrap.servers": broker.bootstrap_servers}
    raw = [
        v
        for rng in _ranges(broker.bootstrap_servers, topic, uncommitted)
        for _, _, v in _fast(uncommitted, rng)
    ]
    assert set(raw) > set(values) and b"a0-0" in raw and b"after-open" in raw


def test_spark_batch_read_committed_uses_the_fast_path(spark, broker, txn_topic):
    topic, still_open = txn_topic
    df = (
        spark.read.format("kafkalite")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("kafka.isolation.level", "read_committed")
        .option("subscribe", topic)
        .load()
    )
    got = sorted(r.value for r in df.select("value").collect())
    still_open.abort_transaction(30)
    still_open.begin_transaction()  # the fixture's abort needs an open transaction
    committed = sorted(r.value for r in consume_committed(broker, topic))
    assert got == [v for v in committed if v != b"after-open"]
