"""Rate limits and task planning of the `kafkalite` Spark source, plus the columnar record decoder."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kafkalite.records.batch import build_batch
from kafkalite.spark.columnar import Columns, decode_blob
from kafkalite.spark.planning import OffsetRange, plan_ranges, rate_limit


def test_rate_limit_splits_in_proportion_to_backlog():
    start = {("t", 0): 0, ("t", 1): 0}
    latest = {("t", 0): 75, ("t", 1): 25}
    assert rate_limit(40, start, latest) == {("t", 0): 30, ("t", 1): 10}
    assert rate_limit(1000, start, latest) == latest


def test_rate_limit_advances_a_tiny_backlog_by_one():
    start = {("t", 0): 0, ("t", 1): 0}
    latest = {("t", 0): 1000, ("t", 1): 1}
    assert rate_limit(10, start, latest) == {("t", 0): 9, ("t", 1): 1}


@given(
    st.integers(1, 500),
    st.lists(st.tuples(st.integers(0, 100), st.integers(0, 400)), min_size=1, max_size=6),
)
def test_rate_limit_bounds(limit, parts):
    start = {("t", i): s for i, (s, _) in enumerate(parts)}
    latest = {("t", i): s + n for i, (s, n) in enumerate(parts)}
    end = rate_limit(limit, start, latest)
    for tp in latest:
        assert start[tp] <= end[tp] <= latest[tp]
    taken = sum(end[tp] - start[tp] for tp in latest)
    total = sum(latest[tp] - start[tp] for tp in latest)
    assert taken == total or taken <= limit + len(parts)
    assert taken > 0 or total == 0


def test_plan_ranges_skips_empty_and_splits_for_min_partitions():
    start = {("t", 0): 0, ("t", 1): 5, ("t", 2): 3}
    end = {("t", 0): 90, ("t", 1): 15, ("t", 2): 3}
    assert plan_ranges(start, end) == [OffsetRange("t", 0, 0, 90), OffsetRange("t", 1, 5, 15)]
    ranges = plan_ranges(start, end, min_partitions=6)
    assert len(ranges) >= 6
    covered = sorted((r.partition, o) for r in ranges for o in range(r.from_offset, r.until_offset))
    assert covered == [(0, o) for o in range(90)] + [(1, o) for o in range(5, 15)]


def test_decode_blob_reads_columns_within_the_range():
    blob = build_batch(
        [(b"k%d" % i, b"v%d" % i, [("h", b"x")] if i % 2 else [], 1000 + i) for i in range(10)],
        base_offset=100,
    ) + build_batch([(None, b"w" * 300, [], 5000 + i) for i in range(5)], base_offset=110)
    cols = Columns()
    nxt = decode_blob(blob, 103, 112, cols)
    assert nxt == 115
    assert cols.offsets == list(range(103, 112))
    assert cols.keys == [b"k%d" % i for i in range(3, 10)] + [None, None]
    assert cols.values[:2] == [b"v3", b"v4"] and cols.values[-1] == b"w" * 300
    assert cols.timestamps == [1000 + i for i in range(3, 10)] + [5000, 5001]
    assert cols.headers[:2] == [[("h", b"x")], None]
    assert cols.types == [0] * 9


def test_decode_blob_ignores_a_truncated_tail():
    blob = build_batch([(None, b"a", [], 1)], base_offset=0)
    cols = Columns()
    assert decode_blob(blob + blob[:20], 0, 10, cols) == 1
    assert cols.offsets == [0]
