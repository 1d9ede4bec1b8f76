"""Fetcher pieces that need no broker: next-offset scanning of fetched blobs (with truncated tails), and
decoding on the poll thread (position filter, deserializers, control batches, aborted transactions)."""

from __future__ import annotations

from types import SimpleNamespace

from kafkalite.client.fetcher import CompletedFetch, Fetcher, next_offset_of
from kafkalite.client.structs import TopicPartition
from kafkalite.client.subscription import SubscriptionState
from kafkalite.records.batch import build_batch
from kafkalite.records.control import control_key


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
