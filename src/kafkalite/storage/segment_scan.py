"""Scans of a segment file's batch headers: the recovery scan (framing, magic, CRC-32C, offset
order) that fills fresh indexes, the header walk that rebuilds them, the tail found past the offset
index's last entry, and spot checks of loaded indexes against the log.

Functions over a file descriptor and the index objects; LogSegment applies their results.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import struct
from collections.abc import Callable
from dataclasses import dataclass

from kafkalite.records.header import HEADER_SIZE, LOG_OVERHEAD, BatchHeader, compute_crc
from kafkalite.storage.index import CorruptIndex, OffsetIndex, TimeIndex

_HEADER = struct.Struct(">qiibIhiqqqhii")
_INT32_MAX = 2**31 - 1
_READ_SMALL_SEGMENT = 1 << 20  # recovery reads a segment up to this size instead of mapping it
_SCAN_SAMPLES = 32  # index entries spot-checked against the log when loading a flushed segment


def read_header(fd: int, position: int, limit: int) -> BatchHeader | None:
    """The v2 batch header at `position` if a plausible whole batch lies below `limit`."""
    if limit - position < HEADER_SIZE:
        return None
    raw = os.pread(fd, HEADER_SIZE, position)
    if len(raw) < HEADER_SIZE:
        return None
    h = BatchHeader(_HEADER.unpack_from(raw, 0))
    if h.magic != 2 or h.batch_length < HEADER_SIZE - LOG_OVERHEAD or position + h.size > limit:
        return None
    return h


@dataclass(frozen=True, slots=True)
class RecoveryResult:
    valid_bytes: int
    truncated_bytes: int
    batches: int


@dataclass(slots=True)
class ScanState:
    """What a scan found: the end of the valid batches and the segment's tail state."""

    pos: int = 0  # end of the last valid batch
    next_offset: int = 0
    batches: int = 0
    max_timestamp: int = -1
    offset_of_max_timestamp: int = 0
    first_timestamp: int = -1
    since_index: int = 0  # bytes since the last offset-index entry


def recovery_scan(
    fd: int,
    base_offset: int,
    expected: int,
    interval: int,
    offset_index: OffsetIndex,
    time_index: TimeIndex,
) -> tuple[int, ScanState]:
    """Check every batch of the file (framing, magic, CRC-32C, offsets from `expected` on and
    within the index's 32-bit range), indexing one per `interval` bytes into the (empty) indexes;
    stops at the first torn or corrupt batch. Returns the file size and what was found."""
    file_size = os.fstat(fd).st_size
    st = ScanState(next_offset=expected, offset_of_max_timestamp=base_offset)
    if not file_size:
        return 0, st
    source: contextlib.AbstractContextManager[bytes | mmap.mmap]
    if file_size <= _READ_SMALL_SEGMENT:  # one read (a mapping costs more calls)
        data = os.pread(fd, file_size, 0)
        file_size = len(data)
        source = contextlib.nullcontext(data)
    else:
        source = mmap.mmap(fd, file_size, access=mmap.ACCESS_READ)
    pos = since = batches = 0
    max_ts, off_max, first_ts = -1, base_offset, -1
    with source as mm:
        buf = memoryview(mm)
        try:
            while file_size - pos >= HEADER_SIZE:
                h = BatchHeader(_HEADER.unpack_from(buf, pos))
                if (
                    h.magic != 2
                    or h.batch_length < HEADER_SIZE - LOG_OVERHEAD
                    or pos + h.size > file_size
                    or h.base_offset < expected
                    or h.last_offset_delta < 0
                    or h.records_count < 0
                    or h.base_offset + h.last_offset_delta - base_offset > _INT32_MAX
                    or compute_crc(buf, pos, h.size) != h.crc
                ):
                    break
                if since > interval:
                    offset_index.append(h.base_offset, pos)
                    if max_ts >= 0:
                        time_index.maybe_append(max_ts, off_max)
                    since = 0
                since += h.size
                last = h.base_offset + h.last_offset_delta
                if h.max_timestamp > max_ts:
                    max_ts, off_max = h.max_timestamp, last
                if first_ts < 0:
                    first_ts = h.max_timestamp
                expected = last + 1
                pos += h.size
                batches += 1
        finally:
            buf.release()
    return file_size, ScanState(pos, expected, batches, max_ts, off_max, first_ts, since)


def rebuild_indexes(
    fd: int,
    size: int,
    base_offset: int,
    interval: int,
    offset_index: OffsetIndex,
    time_index: TimeIndex,
) -> None:
    """Fill the (emptied) indexes again from the batch headers below `size` (no CRC: a segment
    below the recovery point, whose size and offsets stay as they are)."""
    pos = since = 0
    max_ts, off_max = -1, base_offset
    while pos < size:
        h = read_header(fd, pos, size)
        if h is None:
            break
        if since > interval:
            offset_index.append(h.base_offset, pos)
            if max_ts >= 0:
                time_index.maybe_append(max_ts, off_max)
            since = 0
        since += h.size
        if h.max_timestamp > max_ts:
            max_ts, off_max = h.max_timestamp, h.base_offset + h.last_offset_delta
        pos += h.size
    if max_ts >= 0:
        time_index.maybe_append(max_ts, off_max)


def scan_tail(
    fd: int,
    size: int,
    base_offset: int,
    last: tuple[int, int] | None,
    t_last: tuple[int, int] | None,
) -> ScanState | None:
    """The end of a flushed segment from its offset index's `last` entry and the headers past
    it, its max timestamp also from the time index's `t_last` entry; None when they disagree
    with the log (the caller recovers the segment instead)."""
    pos = 0
    next_offset = base_offset
    if last is not None:
        off, pos = last
        h0 = read_header(fd, pos, size) if 0 < pos < size else None
        if h0 is None or h0.base_offset != off:
            return None
        next_offset = off
    max_ts, off_max = -1, base_offset
    since = 0
    while pos < size:
        h = read_header(fd, pos, size)
        if h is None or h.base_offset < next_offset:
            return None
        next_offset = h.base_offset + h.last_offset_delta + 1
        if h.max_timestamp > max_ts:
            max_ts, off_max = h.max_timestamp, h.base_offset + h.last_offset_delta
        since += h.size
        pos += h.size
    if next_offset - base_offset > _INT32_MAX + 1:
        return None
    if t_last is not None:
        t_ts, t_off = t_last
        if not base_offset <= t_off < next_offset:
            return None
        if t_ts > max_ts:
            max_ts, off_max = t_ts, t_off
    return ScanState(pos, next_offset, 0, max_ts, off_max, -1, since)


def spot_check_offset_index(fd: int, size: int, index: OffsetIndex) -> None:
    """CorruptIndex unless sampled entries (and the last) point at batches starting there."""
    entries = index.entries()
    if not entries:
        return
    step = max(1, len(entries) // _SCAN_SAMPLES)
    for off, pos in [*entries[::step], entries[-1]]:
        h = read_header(fd, pos, size)
        if h is None or h.base_offset != off:
            raise CorruptIndex(f"{index.path}: entry ({off}, {pos}) misses a batch")


def spot_check_time_index(
    index: TimeIndex, find_batch: Callable[[int], tuple[int, BatchHeader] | None]
) -> None:
    """CorruptIndex unless sampled entries (and the last) name a batch with that timestamp."""
    entries = index.entries()
    if not entries:
        return
    step = max(1, len(entries) // _SCAN_SAMPLES)
    for ts, off in [*entries[::step], entries[-1]]:
        found = find_batch(off)
        if found is None or found[1].max_timestamp != ts or found[1].base_offset > off:
            raise CorruptIndex(f"{index.path}: entry ({ts}, {off}) misses a batch")


def batch_reaching(fd: int, pos: int, end: int, offset: int) -> tuple[int, BatchHeader] | None:
    """From `pos` (a batch start), the first batch below `end` whose last offset is >= `offset`."""
    while pos < end:
        h = read_header(fd, pos, end)
        if h is None:
            return None
        if h.base_offset + h.last_offset_delta >= offset:
            return pos, h
        pos += h.size
    return None


def batch_at_time(
    fd: int, pos: int, end: int, timestamp: int, start_offset: int
) -> tuple[int, BatchHeader] | None:
    """From `pos`, the first batch with max timestamp >= `timestamp` and last offset >=
    `start_offset`."""
    while pos < end:
        h = read_header(fd, pos, end)
        if h is None:
            return None
        if h.max_timestamp >= timestamp and h.base_offset + h.last_offset_delta >= start_offset:
            return pos, h
        pos += h.size
    return None


def whole_batches_end(fd: int, pos: int, limit: int, target: int) -> int:
    """From `pos` (a batch start), the end of the last whole batch ending at or below `target`."""
    end = pos
    while end < limit:
        h = read_header(fd, end, limit)
        if h is None or end + h.size > target:
            break
        end += h.size
    return end


def read_fully(fd: int, position: int, length: int) -> bytes:
    """`length` bytes at `position` (fewer at the end of the file)."""
    out = bytearray()
    while len(out) < length:
        chunk = os.pread(fd, length - len(out), position + len(out))
        if not chunk:
            break
        out += chunk
    return bytes(out)
