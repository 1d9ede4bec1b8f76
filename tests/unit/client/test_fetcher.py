"""Fetcher pieces that need no broker: next-offset scanning of fetched blobs (with truncated tails), and
decoding on the poll thread (position filter, deserializers, control batches, aborted transactions)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kafkalite.client.fetcher import CompletedFetch, Fetcher, next_offset_of
from kafkalite.client.structs import TopicPartition
from kafkalite.client.subscription import SubscriptionState
from kafkalite.records.batch import build_batch
from kafkalite.records.control import build_end_txn_marker_batch, control_key


def _batch(base: int, values: list[bytes], **kw: object) -> bytes:
    return build_batch([(None, v) for v in values], base_offset=base, **kw)


def _fetcher(**cfg: object) -> Fetcher:
    config = {
        "fetch.min.bytes": 1,
        "fetch.max.bytes": 1 << 20,
        "fetch.max.wait.ms": 100,
        "max.partition.fetch.bytes": 1 << 20,
        "isolation.level": "read_uncommitted",
        "check.crcs": True,
        "client.rack": "",
        **cfg,
    }
    client = SimpleNamespace(io=SimpleNamespace(call_soon=lambda *a: None))
    return Fetcher(client, SubscriptionState("earliest"), config, None, None)  # type: ignore[arg-type]


def test_next_offset_of_skips_truncated_tail() -> None:
    blob = _batch(0, [b"a", b"b"]) + _batch(2, [b"c"])
    assert next_offset_of(blob) == (3, len(blob))
    assert next_offset_of(blob + blob[:20])[0] == 3
    assert next_offset_of(blob[:30]) == (-1, 0)


def test_decode_filters_before_position_and_skips_control() -> None:
    f = _fetcher()
    tp = TopicPartition("t", 0)
    f.subs.assign_from_user([tp])
    f.subs.seek(tp, 1)
    marker = build_batch(
        [(control_key(0), b"\x00\x00\x00\x00\x00\x00")],
        base_offset=3,
        is_control=True,
        is_transactional=True,
        producer_id=9,
    )
    blob = _batch(0, [b"a", b"b", b"c"]) + marker + _batch(4, [b"d"])
    st = f.subs.assignment[tp]
    f.completed.append(CompletedFetch(tp, 1, st.epoch, blob, 5, None))
    st.buffered = 1
    out = f.fetched_records(2)
    assert [r.value for r in out[tp]] == [b"b", b"c"] and st.position == 3
    out = f.fetched_records(10)
    assert [(r.offset, r.value) for r in out[tp]] == [(4, b"d")]
    assert st.position == 5 and st.buffered == 0


def test_stale_epoch_is_dropped() -> None:
    f = _fetcher()
    tp = TopicPartition("t", 0)
    f.subs.assign_from_user([tp])
    f.subs.seek(tp, 0)
    st = f.subs.assignment[tp]
    f.completed.append(CompletedFetch(tp, 0, st.epoch, _batch(0, [b"a"]), 1, None))
    f.subs.seek(tp, 0)  # a seek after the fetch: its data is stale
    assert f.fetched_records(10) == {}


def test_read_committed_drops_aborted_batches() -> None:
    f = _fetcher(**{"isolation.level": "read_committed"})
    f.value_des = lambda topic, v: v.decode()
    tp = TopicPartition("t", 0)
    f.subs.assign_from_user([tp])
    f.subs.seek(tp, 0)
    aborted = build_batch(
        [(None, b"x"), (None, b"y")], base_offset=0, is_transactional=True, producer_id=7
    )
    abort_marker = build_batch(
        [(control_key(0), b"\x00\x00\x00\x00\x00\x00")],
        base_offset=2,
        is_control=True,
        is_transactional=True,
        producer_id=7,
    )
    committed = build_batch([(None, b"z")], base_offset=3, is_transactional=True, producer_id=7)
    blob = aborted + abort_marker + committed + _batch(4, [b"plain"])
    st = f.subs.assignment[tp]
    info = [SimpleNamespace(producer_id=7, first_offset=0)]
    f.completed.append(CompletedFetch(tp, 0, st.epoch, blob, 5, info))
    out = f.fetched_records(10)
    assert [r.value for r in out[tp]] == ["z", "plain"]


def _marker(offset: int, pid: int, commit: bool) -> bytes:
    return build_end_txn_marker_batch(commit, pid, 0, 0, base_offset=offset, timestamp=0)


def _txn(offset: int, pid: int, values: list[bytes]) -> bytes:
    return build_batch(
        [(None, v) for v in values], base_offset=offset, is_transactional=True, producer_id=pid
    )


def _fetch_all(f: Fetcher, tp: TopicPartition, blob: bytes, nxt: int, aborted: object) -> list:
    st = f.subs.assignment[tp]
    f.completed.append(CompletedFetch(tp, st.position, st.epoch, blob, nxt, aborted))
    st.buffered += 1
    return [r.value for r in f.fetched_records(100).get(tp, [])]


def test_read_committed_interleaved_producers_and_repeated_aborts() -> None:
    f = _fetcher(**{"isolation.level": "read_committed"})
    tp = TopicPartition("t", 0)
    f.subs.assign_from_user([tp])
    f.subs.seek(tp, 0)
    blob = (
        _txn(0, 7, [b"a7"])  # pid 7: aborted
        + _txn(1, 8, [b"c8"])  # pid 8: committed
        + _marker(2, 8, commit=True)
        + _txn(3, 7, [b"a7b"])
        + _marker(4, 7, commit=False)
        + _txn(5, 7, [b"c7"])  # pid 7 again: this transaction commits
        + _marker(6, 7, commit=True)
        + _txn(7, 7, [b"a7c", b"a7d"])  # and this one aborts again
        + _marker(9, 7, commit=False)
        + _batch(10, [b"plain"])
    )
    aborted = [
        SimpleNamespace(producer_id=7, first_offset=7),
        SimpleNamespace(producer_id=7, first_offset=0),
    ]
    assert _fetch_all(f, tp, blob, 11, aborted) == [b"c8", b"c7", b"plain"]
    assert f.subs.assignment[tp].position == 11


def test_commit_marker_does_not_end_an_aborted_run() -> None:
    """Only an ABORT marker takes a producer out of the aborted set (as Kafka's consumer)."""
    f = _fetcher(**{"isolation.level": "read_committed"})
    tp = TopicPartition("t", 0)
    f.subs.assign_from_user([tp])
    f.subs.seek(tp, 0)
    blob = _txn(0, 7, [b"x"]) + _marker(1, 7, commit=True) + _txn(2, 7, [b"y"])
    aborted = [SimpleNamespace(producer_id=7, first_offset=0)]
    assert _fetch_all(f, tp, blob, 3, aborted) == []


def test_position_moves_past_data_that_yields_no_records() -> None:
    f = _fetcher(**{"isolation.level": "read_committed"})
    tp = TopicPartition("t", 0)
    f.subs.assign_from_user([tp])
    f.subs.seek(tp, 0)
    st = f.subs.assignment[tp]
    aborted = [SimpleNamespace(producer_id=3, first_offset=0)]
    assert _fetch_all(f, tp, _txn(0, 3, [b"a", b"b"]), 2, aborted) == []
    assert st.position == 2 and st.buffered == 0
    assert _fetch_all(f, tp, _marker(2, 3, commit=False), 3, []) == []  # a lone control batch
    assert st.position == 3
    assert _fetch_all(f, tp, _txn(3, 4, [b"c"]) + _marker(4, 4, commit=True), 5, []) == [b"c"]
    assert st.position == 5


def test_read_uncommitted_sees_aborted_data_but_never_markers() -> None:
    f = _fetcher()
    tp = TopicPartition("t", 0)
    f.subs.assign_from_user([tp])
    f.subs.seek(tp, 0)
    blob = _txn(0, 7, [b"a"]) + _marker(1, 7, commit=False) + _batch(2, [b"p"])
    aborted = [SimpleNamespace(producer_id=7, first_offset=0)]  # ignored: read_uncommitted
    assert _fetch_all(f, tp, blob, 3, aborted) == [b"a", b"p"]


def test_isolation_level_is_checked() -> None:
    with pytest.raises(ValueError, match="isolation"):
        _fetcher(**{"isolation.level": "read_dirty"})
