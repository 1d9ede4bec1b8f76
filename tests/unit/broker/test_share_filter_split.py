"""The ShareFetch filter's decision (issue 35): acquired offsets split into delivered (selected records,
delivery counts kept) and archived (the rest, gaps included), the batches rewritten valid, and the
archive acknowledgement a GAP (archived, no dead letter)."""

from __future__ import annotations

import uuid

import crc32c

from kafkalite.broker.apis.share._share_filter import archive_batches, split_acquired
from kafkalite.coordinator.share_partition import SharePartition, SharePartitionConfig
from kafkalite.coordinator.share_partition_types import AcquiredRange, RecordState
from kafkalite.filters import compile_filter
from kafkalite.records import build_end_txn_marker_batch, iter_batches
from kafkalite.records.batch import RecordBatchBuilder


def _batch(base: int, keys: list[bytes | None], codec: int = 0, gap_at: int = -1) -> bytes:
    b = RecordBatchBuilder(compression=codec, base_offset=base)
    off = base
    for i, key in enumerate(keys):
        if i == gap_at:
            off += 1  # a compacted-away offset
        b.append_with_offset(off, key, b"v", [], 1000 + i)
        off += 1
    return b.build()


def _offsets(blob: bytes) -> list[int]:
    return [r.offset for b in iter_batches(blob) for r in b]


def test_only_matching_records_are_delivered_and_the_rest_archived() -> None:
    blob = _batch(0, [b"a", b"b", b"a", b"b"]) + _batch(4, [b"b", b"b"], codec=1)
    flt = compile_filter("key = 'a'")
    split = split_acquired(blob, flt, [AcquiredRange(0, 5, 2)])
    assert _offsets(split.records) == [0, 2]
    assert split.delivered == [AcquiredRange(0, 0, 2), AcquiredRange(2, 2, 2)]
    assert split.archived == [(1, 1), (3, 5)]
    for b in iter_batches(split.records, verify_crc=True):  # rewritten batches stay valid v2
        assert b.base_offset == 0 and b.last_offset == 3
    raw = split.records
    assert int.from_bytes(raw[17:21], "big") == crc32c.crc32c(raw[21:])


def test_records_outside_the_acquired_ranges_are_neither_delivered_nor_archived() -> None:
    blob = _batch(10, [b"a", b"a", b"a", b"b"], gap_at=2)  # offsets 10, 11, 13, 14
    split = split_acquired(blob, compile_filter("key = 'a'"), [AcquiredRange(11, 14, 1)])
    assert split.delivered == [AcquiredRange(11, 11, 1), AcquiredRange(13, 13, 1)]
    assert split.archived == [(12, 12), (14, 14)]  # the gap and the non-matching record


def test_nothing_matching_delivers_nothing() -> None:
    blob = _batch(0, [b"b", b"c"])
    split = split_acquired(blob, compile_filter("key = 'a'"), [AcquiredRange(0, 1, 1)])
    assert split.records == b"" and split.delivered == [] and split.archived == [(0, 1)]


def test_everything_matching_sends_the_batch_as_it_is() -> None:
    blob = _batch(0, [b"a", b"a"])
    split = split_acquired(blob, compile_filter("key = 'a'"), [AcquiredRange(0, 1, 3)])
    assert split.records == blob
    assert split.delivered == [AcquiredRange(0, 1, 3)] and split.archived == []


def test_archiving_acknowledgement_archives_without_dead_letters_or_redelivery() -> None:
    sp = SharePartition("g", uuid.uuid4(), 0, start_offset=0, config=SharePartitionConfig())
    ranges = sp.acquire("m", [(0, 3)], 10, 0)
    assert ranges == [AcquiredRange(0, 3, 1)]
    result = sp.acknowledge("m", archive_batches([(1, 1), (3, 3)]), 0)
    assert result.error == 0
    state = sp.record_state(1)
    assert state is not None and state[0] is RecordState.ARCHIVED
    assert sp.take_dead_letters() == []
    sp.release_member("m")  # 0 and 2 go back; 1 and 3 never come again
    again = sp.acquire("n", [(0, 3)], 10, 0)
    assert [(r.first_offset, r.last_offset) for r in again] == [(0, 0), (2, 2)]


def test_control_batches_and_records_outside_the_ranges_stay_out_of_the_delivered_ranges() -> None:
    txn = RecordBatchBuilder(base_offset=0, producer_id=7, producer_epoch=0, base_sequence=0,
                             is_transactional=True)  # fmt: skip
    for i, key in enumerate([b"a", b"b"]):
        txn.append_with_offset(i, key, b"v", [], 1000)
    blob = txn.build() + build_end_txn_marker_batch(True, 7, 0, 0, base_offset=2)
    blob += _batch(3, [b"b", b"a"])
    split = split_acquired(
        blob, compile_filter("key = 'a'"), [AcquiredRange(0, 1, 1), AcquiredRange(3, 4, 1)]
    )
    assert split.delivered == [AcquiredRange(0, 0, 1), AcquiredRange(4, 4, 1)]
    assert split.archived == [(1, 1), (3, 3)]
    batches = list(iter_batches(split.records, verify_crc=True))
    assert [b.is_control for b in batches] == [False, True, False]
    assert batches[0].producer_id == 7 and batches[0].is_transactional
