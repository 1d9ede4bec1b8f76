"""LogCleaner: log compaction for cleanup.policy=compact — keep the latest record per key in closed
segments, preserve offsets, expire tombstones after delete.retention.ms, swap files crash-safely.

Runs in a worker thread; the active segment and anything past the last stable offset are never touched,
records of aborted transactions are removed, transaction markers are kept; readers keep a consistent view.
"""

from __future__ import annotations

import logging
import mmap
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from kafkalite.records.batch import RecordBatch, RecordBatchBuilder, decode_batch
from kafkalite.records.builder import build_empty_batch
from kafkalite.records.header import (
    HEADER_SIZE,
    BatchHeader,
    iter_batch_headers,
    parse_batch_header,
    set_max_timestamp_and_type,
)
from kafkalite.storage.config import LONG_MAX
from kafkalite.storage.log import Log
from kafkalite.storage.segment import LogSegment
from kafkalite.storage.txn_index import AbortedTxn
from kafkalite.storage.types import now_ms

log = logging.getLogger(__name__)

_INT32_MAX = 2**31 - 1
_WRITE_CHUNK = 1 << 20


@dataclass(slots=True)
class CleanerStats:
    segments_cleaned: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_retained: int = 0
    tombstones_removed: int = 0
    empty_batches_retained: int = 0
    keys: int = 0
    first_dirty_offset: int = 0
    end_offset: int = 0
    aborted: bool = False


def _iter_segment_batches(seg: LogSegment) -> Iterator[tuple[memoryview, BatchHeader]]:
    """(raw batch view, header) for each batch of a closed segment, via a read-only mmap."""
    size = seg.size
    if size == 0:
        return
    fh = seg.handle()  # held while mmap dups the descriptor
    with mmap.mmap(fh.fd, size, access=mmap.ACCESS_READ) as mm:
        buf = memoryview(mm)
        try:
            pos = 0
            while size - pos >= HEADER_SIZE:
                h = parse_batch_header(buf, pos)
                view = buf[pos : pos + h.size]
                try:
                    yield view, h
                finally:
                    view.release()
                pos += h.size
        finally:
            buf.release()


def _decode(view: memoryview) -> RecordBatch:
    return decode_batch(bytes(view), 0)


class LogCleaner:
    """Compacts logs whose cleanup.policy includes compact."""

    def __init__(self, clock: Callable[[], int] = now_ms) -> None:
        self.clock = clock

    # -- selection ------------------------------------------------------------------------------
    def cleanable_segments(self, log_: Log, now: int) -> list[LogSegment]:
        """Closed segments below the last stable offset (no open transaction may be compacted) and
        old enough for min.compaction.lag.ms, oldest first."""
        unstable = log_.first_unstable_offset
        segs = [s for s in log_.segments[:-1] if unstable is None or s.next_offset <= unstable]
        lag = log_.config.min_compaction_lag_ms
        if lag > 0:
            for i, s in enumerate(segs):
                if s.largest_timestamp() > now - lag:
                    return segs[:i]
        return segs

    def dirty_ratio(self, log_: Log, now: int | None = None) -> float:
        t = self.clock() if now is None else now
        segs = self.cleanable_segments(log_, t)
        total = sum(s.size for s in segs)
        if not total:
            return 0.0
        first_dirty = max(log_.first_dirty_offset, log_.log_start_offset)
        dirty = sum(s.size for s in segs if s.next_offset > first_dirty)
        return dirty / total

    @staticmethod
    def _compaction_overdue(first_dirty: LogSegment, max_lag_ms: int, now: int) -> bool:
        """KIP-354: the oldest uncleaned record has waited max.compaction.lag.ms, so the log is
        cleaned whatever its dirty ratio (timestamps of the segment's first batch, else its age)."""
        if max_lag_ms >= LONG_MAX:
            return False
        ts = first_dirty.first_batch_timestamp
        if ts < 0:
            ts = first_dirty.created_ms
        return now - ts > max_lag_ms

    # -- cleaning -------------------------------------------------------------------------------
    def clean(
        self, log_: Log, *, now: int | None = None, force: bool = False
    ) -> CleanerStats | None:
        """One cleaning pass over `log_`; None when there is nothing (or not enough) to clean."""
        cfg = log_.config
        if not cfg.compact or log_.closed:
            return None
        t = self.clock() if now is None else now
        candidates = self.cleanable_segments(log_, t)
        lso = log_.log_start_offset
        candidates = [s for s in candidates if s.next_offset > lso or s.size == 0]
        if not candidates:
            return None
        first_dirty = max(log_.first_dirty_offset, lso)
        dirty = [s for s in candidates if s.next_offset > first_dirty]
        if not dirty:
            return None
        total = sum(s.size for s in candidates)
        if (
            not force
            and total
            and sum(s.size for s in dirty) / total < cfg.min_cleanable_dirty_ratio
            and not self._compaction_overdue(dirty[0], cfg.max_compaction_lag_ms, t)
        ):
            return None
        stats = CleanerStats(first_dirty_offset=first_dirty)
        end_offset = dirty[-1].next_offset
        stats.end_offset = end_offset
        aborted = _AbortedRanges(
            log_.collect_aborted_transactions(candidates[0].base_offset, end_offset)
        )
        offset_map = self._build_offset_map(dirty, first_dirty, end_offset, aborted)
        stats.keys = len(offset_map)
        horizon = t - cfg.delete_retention_ms
        producer_last = log_.producer_last_offsets()
        for group in self._group_segments(candidates, cfg.segment_bytes, cfg.segment_index_bytes):
            ok = self._clean_group(log_, group, offset_map, producer_last, horizon, stats, aborted)
            if not ok:
                stats.aborted = True
                return stats
        log_.first_dirty_offset = max(log_.first_dirty_offset, end_offset)
        log.info(
            "%s: cleaned %d segment(s): %d -> %d bytes, %d/%d records kept, %d tombstones removed",
            log_.dir.name,
            stats.segments_cleaned,
            stats.bytes_read,
            stats.bytes_written,
            stats.records_retained,
            stats.records_read,
            stats.tombstones_removed,
        )
        return stats

    def _build_offset_map(
        self,
        dirty: Sequence[LogSegment],
        first_dirty: int,
        end_offset: int,
        aborted: _AbortedRanges,
    ) -> dict[bytes, int]:
        """key -> offset of its latest record in the dirty section (aborted records never count)."""
        offsets: dict[bytes, int] = {}
        for seg in dirty:
            for view, h in _iter_segment_batches(seg):
                if (
                    h.is_control
                    or h.base_offset + h.last_offset_delta < first_dirty
                    or aborted.contains(h)
                ):
                    continue
                for rec in _decode(view).records:
                    if rec.key is not None and first_dirty <= rec.offset < end_offset:
                        offsets[rec.key] = rec.offset
        return offsets

    @staticmethod
    def _group_segments(
        segs: Sequence[LogSegment], max_size: int, max_index_bytes: int
    ) -> list[list[LogSegment]]:
        """Consecutive segments merged while their total size fits segment.bytes and offsets fit."""
        groups: list[list[LogSegment]] = []
        cur: list[LogSegment] = []
        size = 0
        max_entries = max_index_bytes // 8
        entries = 0
        for s in segs:
            n_entries = len(s.offset_index)
            if cur and (
                size + s.size > max_size
                or s.next_offset - cur[0].base_offset - 1 > _INT32_MAX
                or entries + n_entries > max_entries
            ):
                groups.append(cur)
                cur, size, entries = [], 0, 0
            cur.append(s)
            size += s.size
            entries += n_entries
        if cur:
            groups.append(cur)
        return groups

    def _clean_group(
        self,
        log_: Log,
        group: list[LogSegment],
        offset_map: dict[bytes, int],
        producer_last: dict[int, int],
        horizon: int,
        stats: CleanerStats,
        aborted: _AbortedRanges,
    ) -> bool:
        cleaned = log_.new_cleaned_segment(group[0].base_offset)
        pending = bytearray()
        try:
            for seg in group:
                drop_tombstones = seg.last_modified_ms() <= horizon
                for view, h in _iter_segment_batches(seg):
                    stats.bytes_read += h.size
                    kept = self._filter_batch(
                        view, h, offset_map, producer_last, drop_tombstones, stats, aborted
                    )
                    if kept is not None:
                        pending += kept
                        if len(pending) >= _WRITE_CHUNK:
                            self._write(cleaned, pending)
                            stats.bytes_written += len(pending)
                            pending = bytearray()
            if pending:
                self._write(cleaned, pending)
                stats.bytes_written += len(pending)
            for seg in group:  # the markers stay, and so do the index entries of aborted ones
                for entry in seg.txn_index.entries():
                    cleaned.txn_index.append(entry)
            cleaned.seal()
            cleaned.flush(indexes=True)
            mtime = max(s.last_modified_ms() for s in group) / 1000.0
            os.utime(cleaned.log_path, (mtime, mtime))
        except BaseException:
            cleaned.delete_files()
            raise
        if not log_.replace_segments(group, cleaned):
            log.info(
                "%s: segments changed during cleaning; discarding the cleaned copy", log_.dir.name
            )
            cleaned.delete_files()
            return False
        stats.segments_cleaned += len(group)
        return True

    @staticmethod
    def _write(seg: LogSegment, data: bytearray) -> None:
        seg.append(data, list(iter_batch_headers(data)))

    @staticmethod
    def _filter_batch(
        view: memoryview,
        h: BatchHeader,
        offset_map: dict[bytes, int],
        producer_last: dict[int, int],
        drop_tombstones: bool,
        stats: CleanerStats,
        aborted: _AbortedRanges,
    ) -> bytes | None:
        """The batch bytes to keep: unchanged if every record survives, rebuilt with the survivors
        (same offsets, same last offset delta) otherwise, None if nothing survives — except the
        newest batch of an idempotent producer, kept as an empty batch (as Kafka's cleaner does)
        so that a restart replaying the log still knows the producer's epoch and sequence."""
        if h.is_control:
            return bytes(view)
        batch = _decode(view)
        keep = []
        drop_all = aborted.contains(h)
        for rec in batch.records:
            if drop_all:
                stats.records_read += 1
                continue
            stats.records_read += 1
            key = rec.key
            if key is not None:
                latest = offset_map.get(key)
                if latest is not None and rec.offset < latest:
                    continue
                if rec.value is None and drop_tombstones:
                    stats.tombstones_removed += 1
                    continue
            keep.append(rec)
        stats.records_retained += len(keep)
        if not keep:
            last_offset = h.base_offset + h.last_offset_delta
            if h.producer_id < 0 or producer_last.get(h.producer_id) != last_offset:
                return None
            if not batch.records:
                return bytes(view)  # already empty, still the producer's newest
            stats.empty_batches_retained += 1
            return build_empty_batch(h)
        if len(keep) == len(batch.records):
            return bytes(view)
        builder = RecordBatchBuilder.like(h)
        for rec in keep:
            builder.append_with_offset(rec.offset, rec.key, rec.value, rec.headers, rec.timestamp)
        out = builder.build(last_offset_delta=batch.last_offset_delta)
        if batch.timestamp_type == 1:
            # LogAppendTime: the batch's timestamps are the broker's, keep them exactly
            out_b = bytearray(out)
            set_max_timestamp_and_type(out_b, 0, len(out_b), batch.max_timestamp, True)
            out = bytes(out_b)
        return out


class _AbortedRanges:
    """The offset ranges of aborted transactions, by producer: a transactional batch inside one is
    aborted data that compaction removes."""

    __slots__ = ("_by_producer",)

    def __init__(self, entries: Sequence[AbortedTxn]) -> None:
        self._by_producer: dict[int, list[tuple[int, int]]] = {}
        for e in entries:
            self._by_producer.setdefault(e.producer_id, []).append((e.first_offset, e.last_offset))

    def contains(self, h: BatchHeader) -> bool:
        if not h.is_transactional or h.is_control:
            return False
        ranges = self._by_producer.get(h.producer_id)
        return ranges is not None and any(a <= h.base_offset <= b for a, b in ranges)
