"""Spark filter pushdown, pure parts: Spark filters -> pruning, offset cuts and the fetch filter, what is
returned to Spark, and the executors' local fallback when a broker did not filter."""

from __future__ import annotations

import datetime as dt

import pytest
from pyspark.sql.datasource import (
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringContains,
    StringStartsWith,
)

from kafkalite.filters import compile_filter
from kafkalite.records.batch import build_batch
from kafkalite.spark.columnar import Columns, decode_blob
from kafkalite.spark.options import parse_source_options
from kafkalite.spark.pushdown import filter_answer, push_filters, pushdown_enabled


def test_partition_and_topic_filters_prune_and_are_not_returned():
    fs = [
        In(("partition",), (0, 2, 5)),
        Not(EqualTo(("partition",), 5)),
        EqualTo(("topic",), "a"),
        StringStartsWith(("topic",), "a"),
    ]
    pd, rest = push_filters(fs)
    assert rest == []
    assert [tp for tp in [("a", p) for p in range(6)] + [("b", 0)] if pd.keeps(tp)] == [
        ("a", 0),
        ("a", 2),
    ]
    assert pd.fetch_filter(None) is None


def test_offset_filters_cut_ranges():
    pd, rest = push_filters(
        [GreaterThan(("offset",), 9), LessThanOrEqual(("offset",), 20), LessThan(("offset",), 30)]
    )
    assert rest == []
    start, end = pd.cut({("t", 0): 0, ("t", 1): 15}, {("t", 0): 100, ("t", 1): 18}, dict)
    assert (start, end) == ({("t", 0): 10, ("t", 1): 15}, {("t", 0): 21, ("t", 1): 18})
    # a range cut to nothing is empty (start == end), never reversed
    pd, _ = push_filters([EqualTo(("offset",), 3)])
    start, end = pd.cut({("t", 0): 10}, {("t", 0): 100}, dict)
    assert start == end == {("t", 0): 4}


def test_key_filters_become_the_fetch_filter():
    pd, rest = push_filters(
        [
            EqualTo(("key",), b"it's"),
            In(("key",), (bytearray(b"a"), b"b")),
            Not(IsNull(("key",))),
            Not(EqualTo(("key",), b"zz")),
        ]
    )
    assert rest == []
    expr = pd.fetch_filter("offset >= 0")
    assert expr == (
        "(offset >= 0) AND (key = 'it''s') AND (key IN ('a', 'b')) AND (key IS NOT NULL) "
        "AND (NOT key = 'zz')"
    )
    match = compile_filter(expr).match
    assert match(1, 0, b"it's", []) is False  # not in ('a', 'b'): the AND of all
    pd, _ = push_filters([EqualTo(("key",), b"it's")])
    assert compile_filter(pd.fetch_filter(None) or "").match(1, 0, b"it's", []) is True


def test_unpushable_filters_are_returned():
    fs = [
        EqualTo(("key",), b"\xff\xfe"),  # not UTF-8: the language cannot say it
        StringContains(("key",), "x"),
        EqualTo(("value",), b"v"),
        In(("key",), (b"a", None)),
        EqualTo(("headers",), ()),
    ]
    pd, rest = push_filters(fs)
    assert rest == fs
    assert pd.fetch_filter(None) is None


def test_timestamp_filters_cut_by_time_go_to_the_broker_and_are_returned():
    low = dt.datetime(2024, 1, 1, 0, 0, 0, 1500, tzinfo=dt.UTC)  # 1.5 ms past the second
    ms = 1_704_067_200_000
    fs = [GreaterThanOrEqual(("timestamp",), low), LessThan(("timestamp",), low)]
    pd, rest = push_filters(fs)
    assert rest == fs  # Spark checks the rows again
    assert pd.ts_low == ms + 2  # t*1000 >= us  <=>  t >= ceil(us / 1000)
    assert pd.fetch_filter(None) == f"(timestamp >= {ms + 2}) AND (timestamp < {ms + 2})"
    asked = []

    def for_times(stamps):
        asked.append(dict(stamps))
        return {("t", 0): 40, ("t", 1): None}

    start, end = pd.cut({("t", 0): 0, ("t", 1): 0}, {("t", 0): 50, ("t", 1): 50}, for_times)
    assert asked == [{("t", 0): ms + 2, ("t", 1): ms + 2}]
    assert start == {("t", 0): 40, ("t", 1): 50} and end == {("t", 0): 50, ("t", 1): 50}


def test_local_fallback_filters_like_the_broker():
    blob = build_batch(
        [(b"k%d" % (i % 3), b"v%d" % i, [], 1000 + i) for i in range(10)], base_offset=100
    ) + build_batch([(b"k1", b"x", [], 5000)], base_offset=110, compression=1)
    flt = compile_filter("key = 'k1'")
    cols = Columns(False)
    nxt = decode_blob(filter_answer(blob, flt, None), 100, 200, cols)
    assert nxt == 111
    assert cols.offsets == [101, 104, 107, 110]
    # nothing matches: the consumer still moves past the answer
    cols = Columns(False)
    assert (
        decode_blob(filter_answer(blob, compile_filter("key = 'none'"), [(0, 7)]), 100, 200, cols)
        == 111
    )
    assert cols.offsets == []


def test_options():
    base = {"kafka.bootstrap.servers": "x:1", "subscribe": "t"}
    assert pushdown_enabled({**base, "KafkaLite.Pushdown": "TRUE"})
    assert not pushdown_enabled(base)
    with pytest.raises(ValueError, match="must be true or false"):
        pushdown_enabled({"kafkalite.pushdown": "yes"})
    opts = parse_source_options({**base, "kafkalite.filter": " key = 'a' "}, streaming=True)
    assert opts.fetch_filter == "key = 'a'"
    with pytest.raises(ValueError, match=r"kafkalite\.filter.*unknown|kafkalite\.filter"):
        parse_source_options({**base, "kafkalite.filter": "key >"}, streaming=False)


def test_a_naive_timestamp_is_not_pushed():
    f = GreaterThan(("timestamp",), dt.datetime(2024, 1, 1))
    pd, rest = push_filters([f])
    assert rest == [f] and pd.ts_low is None and pd.fetch_filter(None) is None
