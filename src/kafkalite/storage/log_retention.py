"""LogRetention: the deleting side of a partition Log — retention.ms / retention.bytes, DeleteRecords,
follower truncation, delayed unlinking of deleted segments and the cleaner's segment swaps.

A base class of Log (storage/log.py): it edits the Log's segment list under the Log's lock.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from kafkalite.storage.config import LogConfig
from kafkalite.storage.epoch_cache import LeaderEpochFileCache
from kafkalite.storage.errors import OffsetOutOfRange
from kafkalite.storage.producer_snapshot import delete_snapshots_above
from kafkalite.storage.producer_state import ProducerStateManager
from kafkalite.storage.segment import CLEANED_SUFFIX, DELETED_SUFFIX, SWAP_SUFFIX, LogSegment
from kafkalite.storage.types import MIN_FD_GRACE_MS

log = logging.getLogger("kafkalite.storage.log")  # the Log's messages keep one logger name


class LogRetention:
    """Segment deletion for Log; the state it works on is the Log's (declared here for mypy)."""

    dir: Path
    config: LogConfig
    clock: Callable[[], int]
    first_dirty_offset: int
    _lock: threading.RLock
    _segments: tuple[LogSegment, ...]
    _leo: int
    _hw: int
    _latest_epoch: int
    leader_epoch_cache: LeaderEpochFileCache
    _log_start: int
    _recovery_point: int
    _dir_dirty: bool
    _closed: bool
    _pending_deletes: list[tuple[int, LogSegment]]
    _producer_state: ProducerStateManager | None

    if TYPE_CHECKING:

        @property
        def high_watermark(self) -> int: ...

        def _set_segments(self, segments: Sequence[LogSegment]) -> None: ...

        def _new_segment(
            self, base_offset: int, suffix: str = "", create: bool = True
        ) -> LogSegment: ...

        def _fsync_dir(self) -> None: ...

        def _load_producer_state(self) -> ProducerStateManager: ...

    # -- deletion and retention -----------------------------------------------------------------
    def _schedule_delete(self, segments: Sequence[LogSegment]) -> None:
        """Rename to .deleted now; close and unlink after file.delete.delay.ms (at least a second:
        readers that took a FileSlice before the delete keep a valid file descriptor meanwhile)."""
        due = self.clock() + max(self.config.file_delete_delay_ms, MIN_FD_GRACE_MS)
        for seg in segments:
            try:
                seg.change_suffix("", DELETED_SUFFIX)
            except FileNotFoundError:
                pass
            self._pending_deletes.append((due, seg))

    @property
    def has_pending_deletes(self) -> bool:
        """Segments renamed for deletion wait for their delay to pass."""
        return bool(self._pending_deletes)

    def remove_deleted_segments(self, now: int | None = None, *, force: bool = False) -> int:
        """Close and unlink segments whose delete delay has passed; returns how many."""
        if not self._pending_deletes:  # (most logs, every second: no lock taken)
            return 0
        t = self.clock() if now is None else now
        with self._lock:
            ready = [s for due, s in self._pending_deletes if force or due <= t]
            self._pending_deletes = [
                (d, s) for d, s in self._pending_deletes if not (force or d <= t)
            ]
        for seg in ready:
            seg.delete_files()
        return len(ready)

    def _delete_prefix(self, count: int, reason: str) -> int:
        """Delete the `count` oldest segments (never the active one); caller holds the lock."""
        segs = list(self._segments)
        count = min(count, len(segs) - 1)
        if count <= 0:
            return 0
        doomed, keep = segs[:count], segs[count:]
        self._set_segments(keep)
        self._log_start = max(self._log_start, keep[0].base_offset)
        if self.first_dirty_offset < self._log_start:
            self.first_dirty_offset = self._log_start
        self.leader_epoch_cache.truncate_from_start(self._log_start)
        self._schedule_delete(doomed)
        log.info(
            "%s: deleted %d segment(s) (%s); log start now %d",
            self.dir.name,
            count,
            reason,
            self._log_start,
        )
        return count

    def delete_old_segments(self, now: int | None = None) -> int:
        """Apply retention: segments below the log start, then retention.ms and retention.bytes
        (cleanup.policy containing delete). Returns the number of segments deleted."""
        t = self.clock() if now is None else now
        deleted = 0
        with self._lock:
            if self._closed:
                return 0
            segs = self._segments
            n = 0
            while n < len(segs) - 1 and segs[n + 1].base_offset <= self._log_start:
                n += 1
            deleted += self._delete_prefix(n, "log start offset")
            cfg = self.config
            if not cfg.delete:
                return deleted
            # retention deletes only segments wholly below the high watermark: never a record a
            # follower may still need or a consumer has not been allowed to see
            hw = self.high_watermark
            if cfg.retention_ms >= 0:
                segs = self._segments
                n = 0
                while (
                    n < len(segs) - 1
                    and segs[n + 1].base_offset <= hw
                    and t - segs[n].largest_timestamp() > cfg.retention_ms
                ):
                    n += 1
                deleted += self._delete_prefix(n, "retention.ms")
            if cfg.retention_bytes >= 0:
                segs = self._segments
                excess = sum(s.size for s in segs) - cfg.retention_bytes
                n = 0
                while (
                    n < len(segs) - 1
                    and segs[n + 1].base_offset <= hw
                    and excess - segs[n].size >= 0
                ):
                    excess -= segs[n].size
                    n += 1
                deleted += self._delete_prefix(n, "retention.bytes")
        return deleted

    def delete_records(self, offset: int) -> int:
        """DeleteRecords: move the log start to `offset` (-1: the high watermark); whole segments
        below it are deleted. Returns the new log start offset."""
        with self._lock:
            if offset == -1:
                offset = self.high_watermark
            if offset < 0 or offset > self.high_watermark:
                raise OffsetOutOfRange(
                    f"cannot delete records before {offset}: outside [0, {self.high_watermark}]"
                )
            if offset > self._log_start:
                self._log_start = offset
                if self.first_dirty_offset < offset:
                    self.first_dirty_offset = offset
                self.leader_epoch_cache.truncate_from_start(offset)
                segs = self._segments
                n = 0
                while n < len(segs) - 1 and segs[n + 1].base_offset <= offset:
                    n += 1
                self._delete_prefix(n, "DeleteRecords")
            return self._log_start

    def truncate_to(self, offset: int) -> None:
        """Remove every batch holding offsets >= `offset` (follower truncation: the high watermark
        and the leader-epoch cache are cut to the new log end)."""
        with self._lock:
            if offset >= self._leo:
                return
            segs = list(self._segments)
            keep = [s for s in segs if s.base_offset < offset] or [segs[0]]
            doomed = [s for s in segs if s not in keep]
            tail = keep[-1]
            self._set_segments(keep)
            # whole segments go first, newest first, and durably, as Kafka orders it: a crash at
            # any point leaves a contiguous log (possibly longer than asked), never one with a hole
            # between a truncated tail and a later segment that survived
            for s in reversed(doomed):
                s.change_suffix("", DELETED_SUFFIX)
                self._pending_deletes.append((self.clock() + MIN_FD_GRACE_MS, s))
            if doomed:
                self._fsync_dir()
            tail.truncate_to(offset)
            # an emptied tail segment is named after the next offset to append
            self._leo = tail.next_offset if tail.size else tail.base_offset
            self._hw = min(self._hw, self._leo)
            self._recovery_point = min(self._recovery_point, self._leo)
            self.leader_epoch_cache.truncate_from_end(self._leo)
            self._latest_epoch = self.leader_epoch_cache.latest_epoch
            delete_snapshots_above(self.dir, self._leo)
            # transactions whose markers were cut are open again: rebuild from a snapshot below
            self._producer_state = None
            self._producer_state = self._load_producer_state()
            self.first_dirty_offset = min(self.first_dirty_offset, self._leo)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop everything and continue empty at `offset`."""
        with self._lock:
            old = list(self._segments)
            new = self._new_segment(offset)
            self._set_segments([new])
            for s in old:
                s.change_suffix("", DELETED_SUFFIX)
                self._pending_deletes.append((self.clock() + MIN_FD_GRACE_MS, s))
            self._leo = self._log_start = self._recovery_point = self._hw = offset
            self.first_dirty_offset = offset
            self.leader_epoch_cache.clear()
            self._latest_epoch = -1
            self._producer_state = ProducerStateManager()
            delete_snapshots_above(self.dir, -1)
            self._dir_dirty = True

    # -- compaction support ---------------------------------------------------------------------
    def new_cleaned_segment(self, base_offset: int) -> LogSegment:
        return self._new_segment(base_offset, suffix=CLEANED_SUFFIX, create=True)

    def replace_segments(self, old: Sequence[LogSegment], new: LogSegment) -> bool:
        """Swap cleaned `new` (suffix .cleaned, flushed) in for the contiguous `old` segments:
        .cleaned -> .swap, old -> .deleted, .swap -> live. False if `old` changed meanwhile."""
        with self._lock:
            segs = list(self._segments)
            try:
                i = next(k for k, s in enumerate(segs) if s is old[0])
            except StopIteration:
                return False
            if segs[i : i + len(old)] != list(old) or i + len(old) >= len(segs):
                return False
            new.change_suffix(CLEANED_SUFFIX, SWAP_SUFFIX)
            self._fsync_dir()
            self._set_segments([*segs[:i], new, *segs[i + len(old) :]])
            self._schedule_delete(old)
            new.change_suffix(SWAP_SUFFIX, "")
            self._fsync_dir()
            return True
