"""Log: one topic-partition's log, built of parts as Kafka's UnifiedLog is — a LocalLog (segments, log
start, log end, recovery point), LogProducers (producer state, markers, last stable offset), the
leader-epoch cache — plus the high watermark, append validation and offset assignment.

Appends/roll/deletes run under the LocalLog's one lock; reads take its immutable segment snapshot.
"""

from __future__ import annotations

import logging
import shutil
import struct
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import cast

from kafkalite.records.control import build_end_txn_marker_batch
from kafkalite.storage import log_read
from kafkalite.storage.config import LogConfig
from kafkalite.storage.errors import KafkaStorageError
from kafkalite.storage.latency import LatencyHistogram
from kafkalite.storage.log_append import analyze_batches, check_replica_offsets
from kafkalite.storage.log_append import assign_offsets as assign_offsets_in
from kafkalite.storage.log_manifest import LogState
from kafkalite.storage.log_open import (
    LogParts,
    manifest_entry,
    new_parts,
    open_parts,
    restored_parts,
)
from kafkalite.storage.log_retention import delete_records_before, delete_retained_segments
from kafkalite.storage.producer_state import ProducerStateManager, VerificationGuard
from kafkalite.storage.segment import LogSegment
from kafkalite.storage.txn_index import AbortedTxn
from kafkalite.storage.types import AppendInfo, AppendResult, FetchDataInfo, parse_topic_partition

log = logging.getLogger("kafkalite.storage.log")

# the append fast path's header fields, read with one C call:
# batch length, magic, last offset delta, max timestamp, producer id
_unpack_fast_header = struct.Struct(">8xi4xb6xi8xqq").unpack_from
_MIN_BATCH = 61
_Bytes = bytes | bytearray | memoryview


class Log:
    """A partition's log. Thread-safe: append/read from the broker loop, flush/clean elsewhere."""

    def __init__(self, parts: LogParts, config: LogConfig) -> None:
        self._local = local = parts.local
        self._lock = local.lock  # the one lock: appends, rolls, deletes, truncation
        self._apply_config(config)
        tp = parse_topic_partition(local.dir.name)
        self.topic, self.partition = tp if tp is not None else (local.dir.name, 0)
        self.topic_id = parts.topic_id
        self.recovery = parts.recovery  # what opening this log had to recover
        # an I/O error's handler (the LogManager's: it takes the whole log dir offline)
        self.io_error: Callable[[Log, OSError], None] | None = None
        self._hw = parts.high_watermark
        # flush durations; the LogManager shares one histogram across its logs
        self.flush_times = LatencyHistogram()
        # compaction: offsets below this have been cleaned (maintained by the cleaner)
        self.first_dirty_offset = parts.first_dirty_offset
        # idempotent producers' last batches; built from the log on first need
        self._producers = parts.producers
        local.on_roll = self._producers.take_snapshot
        self.leader_epoch_cache = parts.epochs
        self._latest_epoch = parts.epochs.latest_epoch  # for the append fast path
        self.highest_offset_in_remote_storage = -1  # KIP-405, kept by the remote log manager

    # -- opening --------------------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        directory: Path,
        config: LogConfig | None = None,
        topic_id: uuid.UUID | None = None,
        *,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        high_watermark: int = 0,
        clean_shutdown: bool = False,
    ) -> Log:
        """Open (creating if needed) and recover the log in `directory`.

        Segments at or after `recovery_point` are scanned batch by batch and truncated at the
        first torn/corrupt batch (later segments are dropped); after a crash the active segment is
        scanned too, after a `clean_shutdown` only if it holds offsets past the recovery point.
        The high watermark (from the replication-offset checkpoint) is clamped into the log."""
        cfg = config if config is not None else LogConfig()
        parts = open_parts(
            Path(directory), cfg, topic_id, recovery_point, log_start_offset, high_watermark,
            clean_shutdown,
        )  # fmt: skip
        return cls(parts, cfg)

    @classmethod
    def create(
        cls, directory: Path, config: LogConfig | None = None, topic_id: uuid.UUID | None = None
    ) -> Log:
        """A new, empty log in a directory made for it: nothing to list, read or recover (creating
        thousands of partitions costs a mkdir and one small file each). When the directory is
        already there (a partition made before), the log is opened and recovered as by `open`."""
        cfg = config if config is not None else LogConfig()
        parts = new_parts(Path(directory), cfg, topic_id)
        return cls(parts, cfg) if parts is not None else cls.open(directory, config, topic_id)

    @classmethod
    def restore(cls, directory: Path, config: LogConfig, state: LogState) -> Log:
        """The log as a clean shutdown closed it, from its manifest entry: no file is opened or
        read (segments, indexes and the producer state load on first need). ValueError when the
        entry does not hold together (the caller opens the log from its files instead)."""
        return cls(restored_parts(directory, config, state), config)

    def manifest_state(self) -> LogState:
        """This closed log's manifest entry (see `restore`)."""
        with self._lock:
            return manifest_entry(
                self._local, self._producers, self.leader_epoch_cache, self._hw, self.topic_id
            )

    # -- properties -----------------------------------------------------------------------------
    @property
    def dir(self) -> Path:
        return self._local.dir

    @property
    def clock(self) -> Callable[[], int]:
        return self._local.clock

    @clock.setter
    def clock(self, value: Callable[[], int]) -> None:
        self._local.clock = value

    @property
    def log_start_offset(self) -> int:
        return self._local.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._local.log_end_offset

    @property
    def high_watermark(self) -> int:
        """Offsets below it are on every in-sync replica: consumers read only below it."""
        return self._hw

    def update_high_watermark(self, offset: int) -> int:
        """Set the high watermark (the Partition decides it), clamped to [log start, log end]."""
        with self._lock:
            local = self._local
            self._hw = min(max(offset, local.log_start_offset), local.log_end_offset)
            self._producers.on_high_watermark(self._hw)
            return self._hw

    def maybe_increment_high_watermark(self, offset: int) -> bool:
        """Move the high watermark forward only; returns whether it moved."""
        with self._lock:
            new = min(offset, self._local.log_end_offset)
            if new > self._hw:
                self._hw = new
                self._producers.on_high_watermark(new)
                return True
            return False

    @property
    def latest_epoch(self) -> int:
        return self._latest_epoch

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (largest epoch <= `epoch`, where the next one starts, or the log
        end for the latest); (-1, -1) when unknown."""
        return self.leader_epoch_cache.end_offset_for(epoch, self._local.log_end_offset)

    @property
    def recovery_point(self) -> int:
        return self._local.recovery_point

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        return self._local.segments

    @property
    def active_segment(self) -> LogSegment:
        return self._local.segments[-1]

    @property
    def size_in_bytes(self) -> int:
        return self._local.size_in_bytes

    @property
    def unflushed_messages(self) -> int:
        return self._local.log_end_offset - self._local.recovery_point

    @property
    def needs_flush(self) -> bool:
        """True when flush.messages appended messages are not yet fsynced."""
        local = self._local
        return local.log_end_offset - local.recovery_point >= self.config.flush_messages

    def flush_due(self, now: int | None = None) -> bool:
        """True when unflushed data is older than flush.ms."""
        local = self._local
        if local.log_end_offset <= local.recovery_point:
            return False
        t = self.clock() if now is None else now
        return t - local.last_flush_ms >= self.config.flush_ms

    @property
    def closed(self) -> bool:
        return self._local.closed

    @property
    def offline(self) -> bool:
        """Its log dir failed: nothing more is served or written."""
        return self._local.offline

    def update_config(self, config: LogConfig) -> None:
        with self._lock:
            self._apply_config(config)
            self._local.reconfigure(config)

    def _apply_config(self, config: LogConfig) -> None:
        self.config = config
        # the largest batch the append fast path takes (0: LogAppendTime batches all take the
        # full path)
        self._fast_max_bytes = (
            0 if config.log_append_time else min(config.max_message_bytes, config.segment_bytes)
        )

    # -- reads (lock-free, over the LocalLog's snapshot) -----------------------------------------
    def read(
        self,
        offset: int,
        max_bytes: int,
        *,
        max_offset: int | None = None,
        min_one_message: bool = True,
    ) -> FetchDataInfo:
        """Whole batches from the one containing `offset`, up to `max_bytes` (at least one batch
        when `min_one_message`). OffsetOutOfRange outside [log start, log end]."""
        return log_read.read(
            self._local, offset, max_bytes, max_offset=max_offset, min_one_message=min_one_message
        )

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record whose timestamp is >= `timestamp`, or None."""
        return log_read.offset_for_timestamp(self._local, timestamp)

    def max_timestamp_and_offset(self) -> tuple[int, int]:
        """(max timestamp, offset of the first record carrying it) over the log, or (-1, -1)."""
        return log_read.max_timestamp_and_offset(self._local)

    # -- producers and transactions ---------------------------------------------------------------
    @property
    def producer_state(self) -> ProducerStateManager:
        """Idempotent producers' state, rebuilt from the batch headers of the log on first use."""
        with self._lock:
            return self._producers.loaded(self._hw)

    @property
    def last_stable_offset(self) -> int:
        """Offsets below it belong to no open transaction: read_committed consumers read below it."""
        return self._producers.last_stable_offset(self._hw)

    @property
    def first_unstable_offset(self) -> int | None:
        """The first offset of an open (or not yet replicated) transaction; None when there is none.
        Taken under the lock: the cleaner asks from its own thread while appends change the state."""
        with self._lock:
            return self._producers.first_unstable_offset()

    def collect_aborted_transactions(self, start: int, upper_bound: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [start, upper_bound), for a read_committed fetch."""
        return self._producers.collect_aborted_transactions(start, upper_bound)

    def ongoing_transactions(self) -> dict[int, int]:
        """Producer id -> first offset of its open transaction (DescribeProducers)."""
        with self._lock:
            return self._producers.loaded(self._hw).ongoing_transactions()

    def producer_last_offsets(self) -> dict[int, int]:
        """Producer id -> last offset of its newest batch: the batches compaction must not remove
        entirely, or a restart that replays the log would forget the producer's sequence."""
        with self._lock:
            return self._producers.last_offsets(self._hw)

    def remove_expired_producers(self, now: int, expiration_ms: int) -> int:
        """Forget idempotent producers whose last batch is older than `expiration_ms`."""
        with self._lock:
            return self._producers.remove_expired(now, expiration_ms)

    # -- append ---------------------------------------------------------------------------------
    def append(
        self, records: _Bytes, *, leader_epoch: int = 0, assign_offsets: bool = True
    ) -> AppendInfo:
        """Append one or more v2 batches (validated by the caller). With `assign_offsets`, base
        offsets and the leader epoch are stamped in place (in the caller's buffer when it is a
        bytearray); otherwise (replica appends) the batches keep theirs and must start at the log
        end offset."""
        if assign_offsets:
            return AppendInfo(*self.append_as_leader(records, leader_epoch))
        return self.append_as_follower(records)

    def append_as_follower(self, records: bytes | bytearray | memoryview) -> AppendInfo:
        """A replica's append: the leader's batches byte for byte, keeping their offsets and
        partition leader epochs; the first must start at our log end (UnexpectedAppendOffset).
        Nothing is stamped, so the bytes are written as given (a view is not copied)."""
        try:
            return AppendInfo(*self._append_batches(records, -1, False))
        except OSError as exc:
            raise self._io_failure(exc, "append") from exc

    def begin_leader_epoch(self, epoch: int) -> None:
        """This replica becomes leader at `epoch`: the epoch starts at the current log end."""
        with self._lock:
            if epoch > self._latest_epoch:
                self._assign_epoch(epoch, self._local.log_end_offset)

    def _assign_epoch(self, epoch: int, start_offset: int) -> None:
        """Caller holds the lock: a new leader epoch begins at `start_offset`."""
        self.leader_epoch_cache.assign(epoch, start_offset)
        self._latest_epoch = self.leader_epoch_cache.latest_epoch

    def append_as_leader(
        self, records: _Bytes, leader_epoch: int = 0, guard: VerificationGuard | None = None
    ) -> AppendResult:
        """`append` with offsets assigned, answering AppendInfo's fields as a plain tuple (the
        produce path's call, once per batch: a result object would cost a quarter of the work);
        an I/O error (a full disk) takes the log's dir offline and answers KafkaStorageError."""
        try:
            n = len(records)
            if _MIN_BATCH <= n <= self._fast_max_bytes:
                # fast path: exactly one batch (the common produce request): only the header
                # fields it needs, integer roll checks, one segment call to write and account.
                length, magic, lod, max_ts, producer_id = _unpack_fast_header(records, 0)
                # idempotent producers' batches take the full path: their sequence is checked there
                if length + 12 == n and magic == 2 and lod >= 0 and producer_id < 0:
                    local = self._local
                    lock = self._lock
                    lock.acquire()
                    try:
                        if local.closed:
                            raise local.closed_error()
                        first = local.log_end_offset
                        if leader_epoch > self._latest_epoch:
                            self._assign_epoch(leader_epoch, first)
                        local.append_stamped(
                            records, first, first + lod, length, max_ts, leader_epoch
                        )
                    finally:
                        lock.release()
                    return first, first + lod, -1, max_ts, local.log_start_offset, 1, n
            return self._append_batches(records, leader_epoch, True, guard)
        except OSError as exc:
            raise self._io_failure(exc, "append") from exc

    def maybe_start_transaction_verification(self, pid: int, epoch: int) -> VerificationGuard:
        """KIP-890: the guard a transactional batch of `pid` must carry (SENTINEL_GUARD: none)."""
        with self._lock:
            return self._producers.maybe_start_verification(pid, epoch, self.clock, self._hw)

    def _append_batches(
        self, records: _Bytes, leader_epoch: int, assign_offsets: bool,
        guard: VerificationGuard | None = None,
    ) -> AppendResult:  # fmt: skip
        """The general append: any number of batches, LogAppendTime, replica appends."""
        cfg = self.config
        # a follower writes the leader's bytes as given (nothing is stamped: no copy); a leader
        # stamps offsets in the caller's writable buffer, else in a copy
        buf: bytes | bytearray | memoryview = (
            records
            if not assign_offsets
            or type(records) is bytearray
            or (type(records) is memoryview and not records.readonly)
            else bytearray(records)
        )
        headers, producers = analyze_batches(buf, cfg, assign_offsets)
        local = self._local
        with self._lock:
            local.check_open()
            pstate = self._producers
            if pstate.state is None and any(h.producer_id >= 0 for _, h in headers):
                # (a log restored lazily: the state is built from what is there before this
                # append, which then updates it, so the last stable offset stays right)
                pstate.loaded(self._hw)
            first = local.log_end_offset
            if assign_offsets:
                dup = pstate.check_leader_append(
                    headers, producers, self._hw, cfg.log_append_time, guard
                )
                if dup is not None:
                    return dup
                # the leader stamps LogAppendTime; a follower keeps the leader's bytes
                log_append_time = self.clock() if cfg.log_append_time else -1
                wbuf = cast("bytearray | memoryview", buf)
                nxt, max_ts = assign_offsets_in(wbuf, headers, first, leader_epoch, log_append_time)
                if leader_epoch > self._latest_epoch:
                    self._assign_epoch(leader_epoch, first)
            else:
                log_append_time = -1
                nxt, max_ts = check_replica_offsets(headers, first, local.dir.name)
                first = headers[0][1].base_offset
                for _, h in headers:
                    if h.partition_leader_epoch > self._latest_epoch:
                        self._assign_epoch(h.partition_leader_epoch, h.base_offset)
            seg = local.append(buf, headers, nxt)
            pstate.applied(seg, buf, headers)
        total = len(buf)
        return first, nxt - 1, log_append_time, max_ts, local.log_start_offset, len(headers), total

    def append_control_marker(
        self,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        commit: bool,
        leader_epoch: int,
    ) -> AppendResult:
        """WriteTxnMarkers on the leader: a COMMIT or ABORT control batch closing the producer's
        transaction. A marker from an older producer epoch (INVALID_PRODUCER_EPOCH) or an older
        coordinator (TRANSACTION_COORDINATOR_FENCED) is refused and nothing is written."""
        batch = build_end_txn_marker_batch(
            commit, producer_id, producer_epoch, coordinator_epoch, timestamp=self.clock()
        )
        with self._lock:
            self._local.check_open()
            self._producers.loaded(self._hw).check_marker(
                producer_id, producer_epoch, coordinator_epoch
            )
            return self._append_batches(batch, leader_epoch, True)

    def roll(self, base_offset: int | None = None) -> LogSegment:
        """Start a new active segment at the log end offset (or `base_offset`)."""
        return self._local.roll(base_offset)

    # -- flush ----------------------------------------------------------------------------------
    def flush(self, offset: int | None = None) -> None:
        """Make everything below `offset` (default: the log end) durable. Group commit: callers
        arriving while an fsync runs wait for it and then share the next one."""
        try:
            self._local.flush(offset, self.leader_epoch_cache.write_pending, self.flush_times)
        except OSError as exc:
            raise self._io_failure(exc, "flush") from exc

    def flush_if_needed(self) -> bool:
        """Flush when flush.messages is reached; returns whether it flushed."""
        if self.needs_flush:
            self.flush()
            return True
        return False

    # -- a failed disk -----------------------------------------------------------------------------
    def _io_failure(self, exc: OSError, what: str) -> KafkaStorageError:
        """An I/O error on this log's files: the whole log dir goes offline (its manager closes
        every log in it, as Kafka's LogDirFailureChannel does); nothing more is written here."""
        handler = self.io_error
        if handler is not None:
            handler(self, exc)
        else:
            self.go_offline()
        return KafkaStorageError(
            f"{what} to {self.dir.name} failed: {exc.strerror or exc}; log dir {self.dir.parent} is "
            "offline"
        )

    def go_offline(self) -> None:
        """Serve and write nothing more: close the files without flushing (the disk failed)."""
        self._local.offline = True
        try:
            self.close(flush=False)
        except OSError:
            log.warning("closing %s after its log dir failed", self.dir, exc_info=True)

    # -- deletion, retention and truncation --------------------------------------------------------
    @property
    def has_pending_deletes(self) -> bool:
        """Segments renamed for deletion wait for their delay to pass."""
        return bool(self._local.pending_deletes)

    def remove_deleted_segments(self, now: int | None = None, *, force: bool = False) -> int:
        """Close and unlink segments whose delete delay has passed; returns how many."""
        return self._local.remove_deleted_segments(now, force=force)

    def _log_start_moved(self) -> None:
        """Under the lock: the log start moved forward; the cleaner and the epochs follow it."""
        start = self._local.log_start_offset
        if self.first_dirty_offset < start:
            self.first_dirty_offset = start
        self.leader_epoch_cache.truncate_from_start(start)

    def delete_old_segments(self, now: int | None = None) -> int:
        """Apply retention: segments below the log start, then retention.ms and retention.bytes
        (cleanup.policy containing delete). Returns the number of segments deleted."""
        t = self.clock() if now is None else now
        with self._lock:
            if self._local.closed:
                return 0
            remote = self.highest_offset_in_remote_storage
            deleted = delete_retained_segments(self._local, self.config, self._hw, t, remote)
            if deleted:
                self._log_start_moved()
        return deleted

    def delete_records(self, offset: int) -> int:
        """DeleteRecords: move the log start to `offset` (-1: the high watermark); whole segments
        below it are deleted. Returns the new log start offset."""
        with self._lock:
            if delete_records_before(self._local, offset, self._hw):
                self._log_start_moved()
            return self._local.log_start_offset

    def truncate_to(self, offset: int) -> None:
        """Remove every batch holding offsets >= `offset` (follower truncation: the high watermark
        and the leader-epoch cache are cut to the new log end)."""
        with self._lock:
            if not self._local.truncate_to(offset):
                return
            leo = self._local.log_end_offset
            self._hw = min(self._hw, leo)
            self.leader_epoch_cache.truncate_from_end(leo)
            self._latest_epoch = self.leader_epoch_cache.latest_epoch
            self._producers.truncated(self._hw)
            self.first_dirty_offset = min(self.first_dirty_offset, leo)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop everything and continue empty at `offset`."""
        with self._lock:
            self._local.truncate_fully_and_start_at(offset)
            self._hw = self.first_dirty_offset = offset
            self.leader_epoch_cache.clear()
            self._latest_epoch = -1
            self._producers.cleared()

    # -- compaction support ---------------------------------------------------------------------
    def new_cleaned_segment(self, base_offset: int) -> LogSegment:
        return self._local.new_cleaned_segment(base_offset)

    def replace_segments(
        self, old: list[LogSegment] | tuple[LogSegment, ...], new: LogSegment
    ) -> bool:
        """Swap cleaned `new` (suffix .cleaned, flushed) in for the contiguous `old` segments:
        .cleaned -> .swap, old -> .deleted, .swap -> live. False if `old` changed meanwhile."""
        return self._local.replace_segments(old, new)

    # -- lifecycle ------------------------------------------------------------------------------
    def close(self, *, flush: bool = True, sync: bool = True) -> None:
        """Flush everything (with indexes, unless `flush=False` or the log was deleted), then
        close all files. With `sync=False` everything is written but nothing fsynced: the caller
        syncs the file system once for every log it closes (LogManager.shutdown)."""

        def before_sync(sync: bool) -> None:
            self._producers.take_snapshot(fsync=sync)
            if sync:
                # (a shutdown's manifest keeps the epochs instead; without it a deferred
                # checkpoint, all entries at offset 0, is rebuilt from the batches)
                self.leader_epoch_cache.write_pending()

        with self._lock:
            if not self._local.close_files(flush, sync, before_sync):
                return
        self._local.remove_deleted_segments(force=True)
        self._local.wake_flushers()

    def take_place_of_files(self, finish: Callable[[], Log]) -> tuple[LogSegment, ...]:
        """A move to another log dir ends: under this log's lock (appends wait), `finish()` returns
        the caught-up copy reopened in its final place, whose parts this log takes (the high
        watermark stays). Returns the old segments, to close once in-flight reads are done."""
        with self._lock:
            local = self._local
            local.check_open()
            local.remove_deleted_segments(force=True)
            new = finish()
            old = local.segments
            local.adopt(new._local)
            self._hw = min(max(self._hw, local.log_start_offset), local.log_end_offset)
            self.leader_epoch_cache = new.leader_epoch_cache
            self._latest_epoch = new._latest_epoch
            self._producers.state = new._producers.state
            self.recovery = new.recovery
            return old

    def mark_deleted(self) -> None:
        """Refuse further appends and flushes; reads keep working until `close()` (the topic is
        being deleted, and FileSlices already handed out must stay valid for a while)."""
        self._local.mark_deleted()

    def delete(self) -> None:
        """Close and remove the whole partition directory."""
        self.close(flush=False)
        shutil.rmtree(self.dir, ignore_errors=True)

    def __repr__(self) -> str:
        local = self._local
        return (
            f"Log({local.dir.name}, start={local.log_start_offset}, end={local.log_end_offset}, "
            f"segments={len(local.segments)}, recovery_point={local.recovery_point})"
        )
