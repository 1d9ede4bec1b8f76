"""Reads of a partition log: whole batches as FileSlices for sendfile (KIP-74: at least one batch),
and offset lookups by timestamp through the time index.

Functions over a LocalLog (storage/local_log.py): lock-free, over its immutable segment snapshot.
"""

from __future__ import annotations

from bisect import bisect_right

from kafkalite.records.header import BatchHeader
from kafkalite.storage.errors import OffsetOutOfRange
from kafkalite.storage.local_log import LocalLog
from kafkalite.storage.segment import LogSegment
from kafkalite.storage.types import FetchDataInfo, FileSlice, LogOffsetMetadata


class _SegmentGone(Exception):
    """A segment was closed under a lock-free reader (deletion after file.delete.delay.ms)."""


# -- read -----------------------------------------------------------------------------------
def read(
    local: LocalLog,
    offset: int,
    max_bytes: int,
    *,
    max_offset: int | None = None,
    min_one_message: bool = True,
) -> FetchDataInfo:
    """Whole batches from the one containing `offset`, up to `max_bytes` (at least one batch
    when `min_one_message`). OffsetOutOfRange outside [log start, log end]."""
    for _ in range(8):
        try:
            return _read_snapshot(local, offset, max_bytes, max_offset, min_one_message)
        except _SegmentGone:
            continue  # a segment of our snapshot was deleted meanwhile: take a new one
    raise OffsetOutOfRange(f"offset {offset} was deleted while being read")


def _read_snapshot(
    local: LocalLog, offset: int, max_bytes: int, max_offset: int | None, min_one_message: bool
) -> FetchDataInfo:
    leo = local.log_end_offset
    lso = local.log_start_offset
    segs, bases = local.snapshot
    if offset < lso or offset > leo:
        raise OffsetOutOfRange(f"offset {offset} is outside [{lso}, {leo}] of {local.dir.name}")
    if max_offset is not None and offset >= max_offset:
        return FetchDataInfo(LogOffsetMetadata(offset), None)
    i = max(0, bisect_right(bases, offset) - 1)
    while i < len(segs):
        seg = segs[i]
        try:
            limit = seg.size
            if max_offset is not None:
                limit = seg.position_bound(max_offset, limit)
            found = seg.read(offset, max_bytes, limit, min_one_message)
        except OSError:
            if seg.closed:
                raise _SegmentGone() from None
            raise
        if seg.closed:  # its descriptor may have been reused while we read
            raise _SegmentGone()
        if found is not None:
            pos, length, _ = found
            meta = LogOffsetMetadata(offset, seg.base_offset, pos)
            if length == 0:
                return FetchDataInfo(meta, None)
            # the slice takes (and then holds) the descriptor only when it is sent
            return FetchDataInfo(meta, FileSlice(seg, pos, length))
        if max_offset is not None and seg.next_offset >= max_offset:
            break
        i += 1
    last = segs[-1]
    return FetchDataInfo(LogOffsetMetadata(offset, last.base_offset, last.size), None)


# -- timestamps -----------------------------------------------------------------------------
def offset_for_timestamp(local: LocalLog, timestamp: int) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record whose timestamp is >= `timestamp`, or None."""
    segs = local.segments
    lso = local.log_start_offset
    for seg in segs:
        if seg.max_timestamp < timestamp or seg.next_offset <= lso:
            continue
        found = seg.timestamp_lookup(timestamp, lso)
        if found is None:
            continue
        pos, h = found
        if LogSegment.is_log_append_time(h):
            return max(h.base_offset, lso), h.max_timestamp
        exact = _first_record_at_or_after(seg, pos, h, timestamp, lso)
        if exact is not None:
            return exact
        return max(h.base_offset, lso), h.max_timestamp
    return None


def max_timestamp_and_offset(local: LocalLog) -> tuple[int, int]:
    """(max timestamp, offset of the first record carrying it) over the log, or (-1, -1).

    Segments track the batch holding their max timestamp; the record inside it is found by
    decoding that one batch, since CreateTime records of a batch differ (KAFKA-16310)."""
    best: LogSegment | None = None
    for seg in local.segments:
        if seg.max_timestamp > (best.max_timestamp if best is not None else -1):
            best = seg
    if best is None:
        return -1, -1
    ts, batch_last = best.max_timestamp, best.offset_of_max_timestamp
    try:
        found = best.find_batch(batch_last)
    except OSError:
        found = None
    if found is not None:
        pos, h = found
        exact = _first_record_at_or_after(best, pos, h, ts, h.base_offset)
        if exact is not None and exact[1] == ts:
            return ts, exact[0]
    return ts, batch_last


def _first_record_at_or_after(
    seg: LogSegment, pos: int, h: BatchHeader, timestamp: int, min_offset: int
) -> tuple[int, int] | None:
    """Record-level answer for a CreateTime batch: decode it (records.batch) and pick the first
    record with timestamp >= `timestamp`; None if the decoder is unavailable."""
    try:
        from kafkalite.records.batch import decode_batch
    except ImportError:  # pragma: no cover - records.batch lands separately
        return None
    try:
        batch = decode_batch(seg.read_bytes(pos, h.size), 0)
    except Exception:
        return None
    for rec in batch.records:
        if rec.timestamp >= timestamp and rec.offset >= min_offset:
            return rec.offset, rec.timestamp
    return None
