"""LocalLog: a partition's segment list with its log start, log end offset and recovery point — roll,
group-commit flush, truncation, prefix deletion with delayed unlinking, and the cleaner's swaps.

Only this class changes the segment list: under its lock; readers take `snapshot` without it.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from kafkalite.records.header import BatchHeader
from kafkalite.storage.config import LogConfig
from kafkalite.storage.errors import LogClosed, LogDirOffline
from kafkalite.storage.latency import LatencyHistogram
from kafkalite.storage.segment import LogSegment
from kafkalite.storage.segment_files import CLEANED_SUFFIX, DELETED_SUFFIX, SWAP_SUFFIX
from kafkalite.storage.types import MIN_FD_GRACE_MS, now_ms

log = logging.getLogger("kafkalite.storage.log")  # the Log's messages keep one logger name

_FLUSH_STATS_LOCK = threading.Lock()
_INT32_MAX = 2**31 - 1


class LocalLog:
    """The segments of one partition directory. `log_end_offset`, `log_start_offset` and
    `recovery_point` are read freely and changed only by these methods (under `lock`)."""

    def __init__(self, directory: Path, config: LogConfig, clock: Callable[[], int]) -> None:
        self.dir = directory
        self.config = config
        self.clock = clock
        self.lock = threading.RLock()
        self._flush_cond = threading.Condition(threading.Lock())
        self._flushing = False
        self.segments: tuple[LogSegment, ...] = ()
        self.active: LogSegment  # == segments[-1], for the append fast path
        # readers load the segments and their base offsets together from this one tuple
        self.snapshot: tuple[tuple[LogSegment, ...], tuple[int, ...]] = ((), ())
        self.log_end_offset = 0
        self.log_start_offset = 0
        self.recovery_point = 0
        self.dir_dirty = False
        # a new log: its directory's entry in the log dir is not durable until the first flush
        # syncs the log dir too (else a power cut loses the whole partition, synced files and all)
        self.parent_dirty = False
        self.last_flush_ms = now_ms()
        self.pending_deletes: list[tuple[int, LogSegment]] = []
        self.closed = False  # no more appends or flushes
        self.files_closed = False
        self.deleted = False  # its directory is renamed for deletion: nothing more is written
        self.offline = False  # its log dir failed: nothing more is served or written
        self.names: set[str] | None = None  # the directory's listing while it is being loaded
        self.roll_ms = config.max_segment_ms - config.segment_jitter_ms
        self.segment_bytes = config.segment_bytes
        # called under the lock after each roll (the Log saves its producers' state there)
        self.on_roll: Callable[[], None] | None = None

    def reconfigure(self, config: LogConfig) -> None:
        """Apply a new config to the segments (caller holds the lock)."""
        self.config = config
        self.roll_ms = config.max_segment_ms - config.segment_jitter_ms
        self.segment_bytes = config.segment_bytes
        for s in self.segments:
            s.reconfigure(config.index_interval_bytes)

    def new_segment(self, base_offset: int, suffix: str = "", create: bool = True) -> LogSegment:
        return LogSegment(
            self.dir,
            base_offset,
            index_interval_bytes=self.config.index_interval_bytes,
            max_index_bytes=self.config.segment_index_bytes,
            suffix=suffix,
            create=create,
            names=self.names,
        )

    def set_segments(self, segments: Sequence[LogSegment]) -> None:
        segs = tuple(segments)
        self.snapshot = (segs, tuple(s.base_offset for s in segs))
        self.segments = segs
        if segs:
            self.active = segs[-1]

    def load(
        self,
        segments: Sequence[LogSegment],
        log_end: int,
        log_start: int,
        recovery_point: int,
        dir_dirty: bool = True,
    ) -> None:
        """Take the segments and offsets a recovery (or a manifest) found; `dir_dirty`: the
        directory's entries may not be durable yet (not after a clean shutdown's manifest)."""
        self.set_segments(segments)
        self.log_end_offset = log_end
        self.log_start_offset = log_start
        self.recovery_point = min(max(recovery_point, 0), log_end)
        self.dir_dirty = dir_dirty

    def adopt(self, other: LocalLog) -> None:
        """Take `other`'s directory, segments and offsets (a finished move between log dirs); this
        log's lock stays, so appends waiting on it continue on the moved segments."""
        self.dir = other.dir
        self.set_segments(other.segments)
        self.log_end_offset = other.log_end_offset
        self.log_start_offset = other.log_start_offset
        self.recovery_point = other.recovery_point
        self.dir_dirty = True

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    # -- append ---------------------------------------------------------------------------------
    def append_stamped(
        self,
        records: bytes | bytearray | memoryview,
        first: int,
        last: int,
        length: int,
        max_ts: int,
        leader_epoch: int,
    ) -> None:
        """Under the lock: one batch of offsets `first`..`last` (the leader's fast path), rolling
        first when a condition says so; the segment stamps and writes it."""
        n = length + 12
        seg = self.active
        if (
            seg.size + n > self.segment_bytes
            or not 0 <= max_ts <= seg.roll_ts
            or last > seg.max_offset
        ):
            seg = self.maybe_roll(seg, n, first, max_ts, last)
        seg.append_stamped(records, first, last, length, max_ts, leader_epoch, self.roll_ms)
        self.log_end_offset = last + 1

    def append(
        self,
        buf: bytes | bytearray | memoryview,
        headers: list[tuple[int, BatchHeader]],
        next_offset: int,
    ) -> LogSegment:
        """Under the lock: batches (offsets final) of `len(buf)` bytes written to the active
        segment, or a new one when a roll condition holds; answers the segment written."""
        h = headers[0][1]
        seg = self.maybe_roll(
            self.active, len(buf), h.base_offset, h.max_timestamp, next_offset - 1
        )
        seg.append(buf, headers)
        self.log_end_offset = next_offset
        return seg

    def maybe_roll(
        self, seg: LogSegment, size: int, base_offset: int, batch_ts: int, last_offset: int
    ) -> LogSegment:
        """The segment the next `size` bytes starting at `base_offset` go to (caller holds the
        lock): `seg`, or a new one when a roll condition holds."""
        if seg.size == 0:
            # an empty active segment must be named after the first offset it will hold
            if seg.base_offset != base_offset:
                return self.roll(base_offset)
            return seg
        if self._should_roll(seg, size, batch_ts, last_offset):
            return self.roll(base_offset)
        seg.reset_roll_deadline(self.roll_ms)
        return seg

    def _should_roll(self, seg: LogSegment, size: int, batch_ts: int, last_offset: int) -> bool:
        """Kafka's roll conditions: segment.bytes, segment.ms, a full index, or offsets that no
        longer fit the index's 32-bit relative offsets."""
        if seg.size > self.config.segment_bytes - size:
            return True
        first_ts = seg.first_batch_timestamp
        if first_ts >= 0 and batch_ts >= 0:
            waited = batch_ts - first_ts
        else:
            waited = self.clock() - seg.created_ms
        if waited > self.roll_ms:
            return True
        if seg.index_full or seg.offset_index.is_full or seg.time_index.is_full:
            return True
        return last_offset - seg.base_offset > _INT32_MAX

    def roll(self, base_offset: int | None = None) -> LogSegment:
        """Start a new active segment at the log end offset (or `base_offset`)."""
        with self.lock:
            base = self.log_end_offset if base_offset is None else base_offset
            old = self.segments[-1]
            if old.size == 0 and old.base_offset == base:
                return old
            old.seal()
            new = self.new_segment(base)
            segs = list(self.segments)
            if old.size == 0:
                segs.pop()
                self.schedule_delete([old])
            segs.append(new)
            self.set_segments(segs)
            self.dir_dirty = True
            if self.on_roll is not None:
                self.on_roll()
            return new

    # -- flush ----------------------------------------------------------------------------------
    def flush(
        self, offset: int | None, before_dir_sync: Callable[[], None], times: LatencyHistogram
    ) -> None:
        """Make everything below `offset` (default: the log end) durable. Group commit: callers
        arriving while an fsync runs wait for it and then share the next one. `before_dir_sync`
        runs after the segments are synced (the Log writes its epoch checkpoint there); the
        flush's duration goes to `times`."""
        target = self.log_end_offset if offset is None else min(offset, self.log_end_offset)
        cond = self._flush_cond
        with cond:
            while True:
                if self.recovery_point >= target or self.closed:
                    return
                if not self._flushing:
                    self._flushing = True
                    break
                cond.wait()
        flushed_to = self.recovery_point
        started = time.monotonic_ns()
        try:
            with self.lock:
                leo = self.log_end_offset
                segs = self.segments
                dir_dirty, self.dir_dirty = self.dir_dirty, False
            last = segs[-1]
            for seg in segs:
                if seg.next_offset > self.recovery_point or seg.dirty:
                    seg.flush(indexes=seg is not last)
            before_dir_sync()
            if dir_dirty:
                self.fsync_dir()
            flushed_to = leo
            self.last_flush_ms = self.clock()
            with _FLUSH_STATS_LOCK:  # logs flush in several threads and share one histogram
                times.observe_ns(time.monotonic_ns() - started)
        finally:
            with cond:
                if flushed_to > self.recovery_point:
                    self.recovery_point = flushed_to
                self._flushing = False
                cond.notify_all()

    def fsync_dir(self) -> None:
        """fsync the partition directory (its entries: new, renamed, deleted segment files) and,
        once for a new log, the log dir holding it."""
        fsync_directory(self.dir)
        if self.parent_dirty:
            fsync_directory(self.dir.parent)
            self.parent_dirty = False

    def closed_error(self) -> LogClosed:
        """What an append to this closed log raises."""
        if self.offline:
            return LogDirOffline(
                f"log {self.dir.name} is offline: its log dir {self.dir.parent} failed"
            )
        return LogClosed(f"log {self.dir.name} is closed")

    def check_open(self) -> None:
        """Raise when appends are no longer taken (closed, deleted or offline)."""
        if self.closed:
            raise self.closed_error()

    def mark_deleted(self) -> None:
        """No more appends or flushes: the directory is being deleted (reads go on)."""
        with self.lock:
            self.closed = True
            self.deleted = True
        self.wake_flushers()

    def wake_flushers(self) -> None:
        with self._flush_cond:
            self._flush_cond.notify_all()

    def close_files(self, flush: bool, sync: bool, before_sync: Callable[[bool], None]) -> bool:
        """Under the lock: flush everything with indexes (unless `flush` is False or the log was
        closed for appends), then close every file. `before_sync(sync)` runs after the segments
        are written (the Log saves its producer state and epochs). False if already closed."""
        if self.files_closed:
            return False
        segs = self.segments
        if flush and not self.closed:
            for s in segs[:-1]:
                s.seal()
            for s in segs:
                s.flush(indexes=True, sync=sync)
            before_sync(sync)
            if sync:
                self.fsync_dir()
            self.recovery_point = self.log_end_offset
        self.closed = True
        self.files_closed = True
        for s in segs:
            s.close(discard=self.deleted)
        return True

    # -- deletion -------------------------------------------------------------------------------
    def schedule_delete(self, segments: Sequence[LogSegment]) -> None:
        """Rename to .deleted now; close and unlink after file.delete.delay.ms (at least a second:
        readers that took a FileSlice before the delete keep a valid file descriptor meanwhile)."""
        due = self.clock() + max(self.config.file_delete_delay_ms, MIN_FD_GRACE_MS)
        for seg in segments:
            try:
                seg.change_suffix("", DELETED_SUFFIX)
            except FileNotFoundError:
                pass
            self.pending_deletes.append((due, seg))

    def remove_deleted_segments(self, now: int | None = None, *, force: bool = False) -> int:
        """Close and unlink segments whose delete delay has passed; returns how many."""
        if not self.pending_deletes:  # (most logs, every second: no lock taken)
            return 0
        t = self.clock() if now is None else now
        with self.lock:
            ready = [s for due, s in self.pending_deletes if force or due <= t]
            self.pending_deletes = [
                (d, s) for d, s in self.pending_deletes if not (force or d <= t)
            ]
        for seg in ready:
            seg.delete_files()
        return len(ready)

    def segments_below(self, offset: int) -> int:
        """How many of the oldest segments (never the active one) hold only offsets below
        `offset`: the next one starts at or below it."""
        segs = self.segments
        n = 0
        while n < len(segs) - 1 and segs[n + 1].base_offset <= offset:
            n += 1
        return n

    def advance_log_start(self, offset: int) -> None:
        """Under the lock: the log starts at `offset` (DeleteRecords); never moves back."""
        if offset > self.log_start_offset:
            self.log_start_offset = offset

    def delete_prefix(self, count: int, reason: str) -> int:
        """Under the lock: delete the `count` oldest segments (never the active one); the log
        start moves to the first one kept. Returns how many were deleted."""
        segs = list(self.segments)
        count = min(count, len(segs) - 1)
        if count <= 0:
            return 0
        doomed, keep = segs[:count], segs[count:]
        self.set_segments(keep)
        self.log_start_offset = max(self.log_start_offset, keep[0].base_offset)
        self.schedule_delete(doomed)
        log.info(
            "%s: deleted %d segment(s) (%s); log start now %d",
            self.dir.name,
            count,
            reason,
            self.log_start_offset,
        )
        return count

    def truncate_to(self, offset: int) -> bool:
        """Under the lock: remove every batch holding offsets >= `offset`; False when the log
        ends at or before it (nothing to do)."""
        if offset >= self.log_end_offset:
            return False
        segs = list(self.segments)
        keep = [s for s in segs if s.base_offset < offset] or [segs[0]]
        doomed = [s for s in segs if s not in keep]
        tail = keep[-1]
        self.set_segments(keep)
        # whole segments go first, newest first, and durably, as Kafka orders it: a crash at
        # any point leaves a contiguous log (possibly longer than asked), never one with a hole
        # between a truncated tail and a later segment that survived
        for s in reversed(doomed):
            s.change_suffix("", DELETED_SUFFIX)
            self.pending_deletes.append((self.clock() + MIN_FD_GRACE_MS, s))
        if doomed:
            self.fsync_dir()
        tail.truncate_to(offset)
        # an emptied tail segment is named after the next offset to append
        self.log_end_offset = tail.next_offset if tail.size else tail.base_offset
        self.recovery_point = min(self.recovery_point, self.log_end_offset)
        return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Under the lock: drop every segment and continue empty at `offset`."""
        old = list(self.segments)
        new = self.new_segment(offset)
        self.set_segments([new])
        for s in old:
            s.change_suffix("", DELETED_SUFFIX)
            self.pending_deletes.append((self.clock() + MIN_FD_GRACE_MS, s))
        self.log_end_offset = self.log_start_offset = self.recovery_point = offset
        self.dir_dirty = True

    # -- compaction support ---------------------------------------------------------------------
    def new_cleaned_segment(self, base_offset: int) -> LogSegment:
        return self.new_segment(base_offset, suffix=CLEANED_SUFFIX, create=True)

    def replace_segments(self, old: Sequence[LogSegment], new: LogSegment) -> bool:
        """Swap cleaned `new` (suffix .cleaned, flushed) in for the contiguous `old` segments:
        .cleaned -> .swap, old -> .deleted, .swap -> live. False if `old` changed meanwhile."""
        with self.lock:
            segs = list(self.segments)
            try:
                i = next(k for k, s in enumerate(segs) if s is old[0])
            except StopIteration:
                return False
            if segs[i : i + len(old)] != list(old) or i + len(old) >= len(segs):
                return False
            new.change_suffix(CLEANED_SUFFIX, SWAP_SUFFIX)
            self.fsync_dir()
            self.set_segments([*segs[:i], new, *segs[i + len(old) :]])
            self.schedule_delete(old)
            new.change_suffix(SWAP_SUFFIX, "")
            self.fsync_dir()
            return True


def fsync_directory(d: Path) -> None:
    """Make the entries of directory `d` durable (creates, renames, unlinks in it)."""
    fd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
