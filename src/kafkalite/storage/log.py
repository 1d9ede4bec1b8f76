"""Log: one topic-partition's ordered segments — append with in-place offset assignment, roll,
group-commit flush, recovery (its bases: reads in log_read.py, deletion in log_retention.py).

Appends/roll/deletes run under one lock; reads take an immutable snapshot of the segment list.
"""

from __future__ import annotations

import logging
import os
import shutil
import struct
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

from kafkalite.protocol.exceptions import DecodeError
from kafkalite.records.control import build_end_txn_marker_batch
from kafkalite.records.header import (
    BatchHeader,
    iter_batch_headers,
    set_base_offset,
    set_max_timestamp_and_type,
    set_partition_leader_epoch,
)
from kafkalite.storage.config import LogConfig
from kafkalite.storage.epoch_cache import LEADER_EPOCH_CHECKPOINT, LeaderEpochFileCache
from kafkalite.storage.errors import (
    CorruptRecord,
    InvalidProducerBatch,
    KafkaStorageError,
    LogClosed,
    LogDirOffline,
    RecordBatchTooLarge,
    UnexpectedAppendOffset,
)
from kafkalite.storage.file_cache import read_file
from kafkalite.storage.latency import LatencyHistogram
from kafkalite.storage.loader import RecoveryStats, load_segments
from kafkalite.storage.log_manifest import LogState
from kafkalite.storage.log_producers import LogProducers
from kafkalite.storage.log_read import LogReads
from kafkalite.storage.log_retention import LogRetention
from kafkalite.storage.producer_snapshot import (
    delete_snapshots_above,
)
from kafkalite.storage.producer_state import (
    ProducerStateManager,
)
from kafkalite.storage.segment import LogSegment, read_header
from kafkalite.storage.types import (
    MIN_FD_GRACE_MS,
    AppendInfo,
    AppendResult,
    FetchDataInfo,
    FileSlice,
    LogOffsetMetadata,
    now_ms,
    parse_topic_partition,
)

__all__ = [
    "MIN_FD_GRACE_MS",
    "PARTITION_METADATA_FILE",
    "AppendInfo",
    "AppendResult",
    "FetchDataInfo",
    "FileSlice",
    "Log",
    "LogOffsetMetadata",
    "now_ms",
    "parse_topic_partition",
]

log = logging.getLogger("kafkalite.storage.log")

PARTITION_METADATA_FILE = "partition.metadata"
_INT32_MAX = 2**31 - 1
# the append fast path's C calls, bound once: batch length, magic, last offset delta, max timestamp
# batch length, magic, last offset delta, max timestamp, producer id
_unpack_fast_header = struct.Struct(">8xi4xb6xi8xqq").unpack_from
_STAMP = struct.Struct(">qii")  # base offset, batch length, partition leader epoch
_stamp = _STAMP.pack_into
_stamped = _STAMP.pack
_pwrite = os.pwrite
_pwritev = os.pwritev
# immutable batches up to this size are copied to be stamped; larger ones are written with pwritev
# from a stamped copy of their first 16 bytes and a view of the rest (the CRC starts at byte 21)
_COPY_MAX = 4096
_FLUSH_STATS_LOCK = threading.Lock()
_MIN_BATCH = 61


def _write_rest(
    fd: int, records: bytes | bytearray | memoryview, base: int, epoch: int, pos: int, written: int
) -> None:
    """Finish a short positional write of a batch stamped with `base` and `epoch`."""
    buf = records if type(records) is bytearray else bytearray(records)
    _stamp(buf, 0, base, len(buf) - 12, epoch)  # (a writable view was stamped already: harmless)
    mv = memoryview(buf)
    n = len(buf)
    while written < n:
        written += os.pwrite(fd, mv[written:], pos + written)


class Log(LogReads, LogProducers, LogRetention):
    """A partition's log. Thread-safe: append/read from the broker loop, flush/clean elsewhere."""

    def __init__(self, directory: Path, config: LogConfig, topic_id: uuid.UUID | None) -> None:
        self.dir = directory
        self._apply_config(config)
        tp = parse_topic_partition(directory.name)
        self.topic, self.partition = tp if tp is not None else (directory.name, 0)
        self.topic_id = topic_id
        self.recovery = RecoveryStats()  # what opening this log had to recover
        # an I/O error's handler (the LogManager's: it takes the whole log dir offline)
        self.io_error: Callable[[Log, OSError], None] | None = None
        self.offline = False
        self._lock = threading.RLock()
        self._flush_cond = threading.Condition(threading.Lock())
        self._flushing = False
        self._segments: tuple[LogSegment, ...] = ()
        self._active: LogSegment  # == _segments[-1], for the append fast path
        self._bases: tuple[int, ...] = ()
        self._snapshot: tuple[tuple[LogSegment, ...], tuple[int, ...]] = ((), ())
        self._leo = 0
        self._hw = 0
        self._log_start = 0
        self._recovery_point = 0
        self._dir_dirty = False
        self._last_flush_ms = now_ms()
        self._pending_deletes: list[tuple[int, LogSegment]] = []
        self._closed = False  # no more appends or flushes
        self._files_closed = False
        self._deleted = False  # its directory is renamed for deletion: nothing more is written
        # compaction: offsets below this have been cleaned (maintained by the cleaner)
        self.first_dirty_offset = 0
        self.clock: Callable[[], int] = now_ms
        # flush durations; the LogManager shares one histogram across its logs
        self.flush_times = LatencyHistogram()
        # idempotent producers' last batches; built from the log on first need (None: not yet)
        self._producer_state: ProducerStateManager | None = None
        self._names: set[str] | None = None  # the directory's listing while it is being loaded
        self.leader_epoch_cache = LeaderEpochFileCache(directory)
        self._latest_epoch = -1  # == leader_epoch_cache.latest_epoch, for the append fast path

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
        directory = Path(directory)
        # the directory is listed once; loading asks the listing, not the file system, what exists
        try:
            names = set(os.listdir(directory))
        except FileNotFoundError:
            directory.mkdir(parents=True, exist_ok=True)
            names = set()
        self = cls(directory, config if config is not None else LogConfig(), topic_id)
        self._names = names
        try:
            self._load(recovery_point, log_start_offset, clean_shutdown)
            self._hw = min(max(high_watermark, self._log_start), self._leo)
            self._load_epochs()
            self._write_partition_metadata()
            # producers' state (and with it open transactions and the last stable offset) from
            # the newest snapshot plus the headers past it: every append and fetch needs it
            self._producer_state_locked()
        finally:
            self._names = None
        return self

    @classmethod
    def create(
        cls, directory: Path, config: LogConfig | None = None, topic_id: uuid.UUID | None = None
    ) -> Log:
        """A new, empty log in a directory made for it: nothing to list, read or recover (creating
        thousands of partitions costs a mkdir and one small file each). When the directory is
        already there (a partition made before), the log is opened and recovered as by `open`."""
        directory = Path(directory)
        try:
            os.mkdir(directory)
        except FileExistsError:
            return cls.open(directory, config, topic_id)
        self = cls(directory, config if config is not None else LogConfig(), topic_id)
        seg = LogSegment(
            directory,
            0,
            index_interval_bytes=self.config.index_interval_bytes,
            max_index_bytes=self.config.segment_index_bytes,
            create=True,
            fresh_dir=True,
        )
        self._set_segments([seg])
        self._dir_dirty = True
        self.leader_epoch_cache = LeaderEpochFileCache(directory, new_log=True)
        self._write_partition_metadata()
        self._producer_state = ProducerStateManager()
        return self

    @classmethod
    def restore(cls, directory: Path, config: LogConfig, state: LogState) -> Log:
        """The log as a clean shutdown closed it, from its manifest entry: no file is opened or
        read (segments, indexes and the producer state load on first need). ValueError when the
        entry does not hold together (the caller opens the log from its files instead)."""
        tid = uuid.UUID(state.topic_id) if state.topic_id else None
        self = cls(directory, config, tid)
        segs: list[LogSegment] = []
        for st in state.segments:
            seg = LogSegment(
                directory,
                st[0],
                index_interval_bytes=self.config.index_interval_bytes,
                max_index_bytes=self.config.segment_index_bytes,
                known_size=st[1],
            )
            seg.restore(st)
            segs.append(seg)
        last = segs[-1]
        end = last.next_offset if last.size else max(last.next_offset, last.base_offset)
        if end != state.log_end or not 0 <= state.log_start <= state.log_end:
            raise ValueError(f"log end {state.log_end} but its last segment ends at {end}")
        self._set_segments(segs)
        self._leo = self._recovery_point = state.log_end
        self._log_start = self.first_dirty_offset = state.log_start
        self._hw = min(max(state.high_watermark, self._log_start), self._leo)
        self.leader_epoch_cache.load_entries(state.epochs)
        self._latest_epoch = self.leader_epoch_cache.latest_epoch
        if not state.stable:  # an open transaction: the last stable offset needs the state now
            self._producer_state_locked()
        return self

    def manifest_state(self) -> LogState:
        """This closed log's manifest entry (see `restore`)."""
        with self._lock:
            state = self._producer_state
            return LogState(
                self.dir.name,
                str(self.topic_id) if self.topic_id is not None else None,
                self._log_start,
                self._leo,
                self._hw,
                self.leader_epoch_cache.entries(),
                state is None or not state.has_unstable(),
                [seg.state() for seg in self._segments],
            )

    def _new_segment(self, base_offset: int, suffix: str = "", create: bool = True) -> LogSegment:
        return LogSegment(
            self.dir,
            base_offset,
            index_interval_bytes=self.config.index_interval_bytes,
            max_index_bytes=self.config.segment_index_bytes,
            suffix=suffix,
            create=create,
            names=self._names,
        )

    def _load(self, recovery_point: int, log_start_offset: int, clean_shutdown: bool) -> None:
        self.recovery = RecoveryStats()
        segments, leo = load_segments(
            self.dir,
            self._new_segment,
            recovery_point,
            log_start_offset,
            self.recovery,
            clean_shutdown=clean_shutdown,
            names=self._names,
        )
        self._set_segments(segments)
        self._leo = leo
        # snapshots past the recovered end describe batches that did not survive: never use them
        delete_snapshots_above(self.dir, leo, self._names)
        self._log_start = max(log_start_offset, segments[0].base_offset)
        # recovered (rescanned) data is not known to be on disk: it stays above the recovery point
        # until the flush policy syncs it
        self._recovery_point = min(max(recovery_point, 0), leo)
        self._dir_dirty = True
        self.first_dirty_offset = self._log_start

    def _load_epochs(self) -> None:
        """The leader-epoch cache from its checkpoint, or rebuilt from the batches' partition
        leader epochs when the file is missing or damaged; cut to the recovered log either way."""
        names = self._names
        if names is not None and LEADER_EPOCH_CHECKPOINT not in names:
            entries = None
        else:
            entries = LeaderEpochFileCache.read_file(self.dir)
        rebuilt = entries is None
        if entries is None:
            entries = self._epochs_from_batches()
        # a rebuilt cache is written as a new log's is: at once unless its entries all start at 0
        # (then by the next flush: until then the batches say the same)
        cache = LeaderEpochFileCache(self.dir, entries, new_log=rebuilt)
        cache.truncate_from_end(self._leo)
        cache.truncate_from_start(self._log_start)
        if rebuilt:
            if entries:
                cache.save()
        elif entries and cache.entries() != entries:
            cache.flush()
        self.leader_epoch_cache = cache
        self._latest_epoch = cache.latest_epoch

    def _epochs_from_batches(self) -> list[tuple[int, int]]:
        out: list[tuple[int, int]] = []
        for seg in self._segments:
            pos = 0
            fh = seg.handle()
            while True:
                h = read_header(fh.fd, pos, seg.size)
                if h is None:
                    break
                if h.partition_leader_epoch >= 0 and (
                    not out or h.partition_leader_epoch > out[-1][0]
                ):
                    out.append((h.partition_leader_epoch, h.base_offset))
                pos += h.size
        return out

    def _write_partition_metadata(self) -> None:
        p = self.dir / PARTITION_METADATA_FILE
        there = PARTITION_METADATA_FILE in self._names if self._names is not None else p.exists()
        if self.topic_id is None:
            if there:
                for line in read_file(p).decode(errors="replace").splitlines():
                    k, _, v = line.partition(":")
                    if k.strip() == "topic_id":
                        try:
                            self.topic_id = uuid.UUID(v.strip())
                        except ValueError:
                            pass
            return
        text = f"version: 0\ntopic_id: {self.topic_id}\n"
        if not there or read_file(p) != text.encode():
            tmp = p.with_suffix(".tmp")
            tmp.write_text(text)
            os.replace(tmp, p)

    def _set_segments(self, segments: Sequence[LogSegment]) -> None:
        segs = tuple(segments)
        bases = tuple(s.base_offset for s in segs)
        # readers load these two attributes separately; keep them consistent via one tuple swap
        self._snapshot = (segs, bases)
        self._segments = segs
        self._bases = bases
        if segs:
            self._active = segs[-1]

    # -- properties -----------------------------------------------------------------------------
    @property
    def log_start_offset(self) -> int:
        return self._log_start

    @property
    def log_end_offset(self) -> int:
        return self._leo

    @property
    def high_watermark(self) -> int:
        """Offsets below it are on every in-sync replica: consumers read only below it."""
        return self._hw

    def update_high_watermark(self, offset: int) -> int:
        """Set the high watermark (the Partition decides it), clamped to [log start, log end]."""
        with self._lock:
            self._hw = min(max(offset, self._log_start), self._leo)
            state = self._producer_state
            if state is not None:
                state.on_high_watermark(self._hw)
            return self._hw

    def maybe_increment_high_watermark(self, offset: int) -> bool:
        """Move the high watermark forward only; returns whether it moved."""
        with self._lock:
            new = min(offset, self._leo)
            if new > self._hw:
                self._hw = new
                state = self._producer_state
                if state is not None:
                    state.on_high_watermark(new)
                return True
            return False

    @property
    def latest_epoch(self) -> int:
        return self._latest_epoch

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (largest epoch <= `epoch`, where the next one starts, or the log
        end for the latest); (-1, -1) when unknown."""
        return self.leader_epoch_cache.end_offset_for(epoch, self._leo)

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        return self._segments

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def unflushed_messages(self) -> int:
        return self._leo - self._recovery_point

    @property
    def needs_flush(self) -> bool:
        """True when flush.messages appended messages are not yet fsynced."""
        return self._leo - self._recovery_point >= self.config.flush_messages

    def flush_due(self, now: int | None = None) -> bool:
        """True when unflushed data is older than flush.ms."""
        if self._leo <= self._recovery_point:
            return False
        t = self.clock() if now is None else now
        return t - self._last_flush_ms >= self.config.flush_ms

    @property
    def closed(self) -> bool:
        return self._closed

    def update_config(self, config: LogConfig) -> None:
        with self._lock:
            self._apply_config(config)
            for s in self._segments:
                s.reconfigure(config.index_interval_bytes)

    def _apply_config(self, config: LogConfig) -> None:
        self.config = config
        # values the append fast path reads, precomputed
        # the largest batch the fast path takes (0: LogAppendTime batches all take the full path)
        self._fast_max_bytes = (
            0 if config.log_append_time else min(config.max_message_bytes, config.segment_bytes)
        )
        self._segment_bytes = config.segment_bytes
        self._roll_ms = config.max_segment_ms - config.segment_jitter_ms

    # -- append ---------------------------------------------------------------------------------
    def append(
        self,
        records: bytes | bytearray | memoryview,
        *,
        leader_epoch: int = 0,
        assign_offsets: bool = True,
    ) -> AppendInfo:
        """Append one or more v2 batches (validated by the caller). With `assign_offsets`, base
        offsets and the leader epoch are stamped in place (in the caller's buffer when it is a
        bytearray); otherwise (replica appends) the batches keep theirs and must start at the log
        end offset."""
        if assign_offsets:
            return AppendInfo(*self.append_as_leader(records, leader_epoch))
        return self.append_as_follower(records)

    def append_as_follower(self, records: bytes | bytearray | memoryview) -> AppendInfo:
        try:
            return self._append_as_follower(records)
        except OSError as exc:
            raise self._io_failure(exc, "append") from exc

    def _append_as_follower(self, records: bytes | bytearray | memoryview) -> AppendInfo:
        """A replica's append: the leader's batches byte for byte, keeping their offsets and
        partition leader epochs; the first must start at our log end (UnexpectedAppendOffset)."""
        return AppendInfo(*self._append_batches(records, -1, False))

    def begin_leader_epoch(self, epoch: int) -> None:
        """This replica becomes leader at `epoch`: the epoch starts at the current log end."""
        with self._lock:
            if epoch > self._latest_epoch:
                self._assign_epoch(epoch, self._leo)

    def _assign_epoch(self, epoch: int, start_offset: int) -> None:
        """Caller holds the lock: a new leader epoch begins at `start_offset`."""
        self.leader_epoch_cache.assign(epoch, start_offset)
        self._latest_epoch = self.leader_epoch_cache.latest_epoch

    def append_as_leader(
        self, records: bytes | bytearray | memoryview, leader_epoch: int = 0
    ) -> AppendResult:
        """`append` with offsets assigned (see `_append_as_leader`); an I/O error (a full disk)
        takes the log's directory offline and answers KafkaStorageError."""
        try:
            return self._append_as_leader(records, leader_epoch)
        except OSError as exc:
            raise self._io_failure(exc, "append") from exc

    def _append_as_leader(
        self, records: bytes | bytearray | memoryview, leader_epoch: int = 0
    ) -> AppendResult:
        """`append` with offsets assigned, answering AppendInfo's fields as a plain tuple: the
        produce path calls this once per batch, and building a result object costs as much as a
        quarter of the work around the write."""
        n = len(records)
        if _MIN_BATCH <= n <= self._fast_max_bytes:
            # fast path: exactly one batch (the common produce request). It reads only the header
            # fields it needs, keeps the roll check to integer comparisons against values the
            # segment precomputes, and leaves the segment's bookkeeping to one segment call.
            length, magic, lod, max_ts, producer_id = _unpack_fast_header(records, 0)
            # idempotent producers' batches take the full path: their sequence is checked there
            if length + 12 == n and magic == 2 and lod >= 0 and producer_id < 0:
                lock = self._lock
                lock.acquire()
                try:
                    if self._closed:
                        raise self._closed_error()
                    first = self._leo
                    last = first + lod
                    if leader_epoch > self._latest_epoch:
                        self._assign_epoch(leader_epoch, first)
                    seg = self._active
                    pos = seg.size
                    # seg.roll_ts: the newest batch timestamp that cannot trigger segment.ms (-1
                    # while the segment is empty, has no timestamps, or has a full index: those
                    # take the full check)
                    if (
                        pos + n > self._segment_bytes
                        or not 0 <= max_ts <= seg.roll_ts
                        or last > seg.max_offset
                    ):
                        seg = self._maybe_roll_at(seg, n, first, max_ts, last)
                        pos = seg.size
                    # the segment's open file (a lease: an eviction meanwhile cannot close it
                    # under this write); reopened through the FileCache only after an eviction
                    fh = seg._fh
                    if fh is None:
                        fh = seg.handle()
                    else:
                        fh.used = True
                    fd = fh.fd
                    # one write per batch, straight to the page cache: an acknowledged append
                    # must survive a crash of this process (not of the machine) without a flush
                    if type(records) is bytearray or (
                        type(records) is memoryview and not records.readonly
                    ):  # the caller's own buffer (a request received in place): stamped there
                        _stamp(records, 0, first, length, leader_epoch)
                        written = _pwrite(fd, records, pos)
                    elif n < _COPY_MAX:
                        records = bytearray(records)
                        _stamp(records, 0, first, length, leader_epoch)
                        written = _pwrite(fd, records, pos)
                    else:  # immutable and large: the stamped 16 bytes, then the rest uncopied
                        stamped = _stamped(first, length, leader_epoch)
                        written = _pwritev(fd, (stamped, memoryview(records)[16:]), pos)
                    if written < n:
                        _write_rest(fd, records, first, leader_epoch, pos, written)
                    seg.appended(first, last, pos, n, max_ts, self._roll_ms)
                    self._leo = last + 1
                finally:
                    lock.release()
                return first, last, -1, max_ts, self._log_start, 1, n
        return self._append_batches(records, leader_epoch, True)

    def _append_batches(
        self, records: bytes | bytearray | memoryview, leader_epoch: int, assign_offsets: bool
    ) -> AppendResult:
        """The general append: any number of batches, LogAppendTime, replica appends."""
        buf: bytearray | memoryview = (
            records
            if type(records) is bytearray or (type(records) is memoryview and not records.readonly)
            else bytearray(records)
        )
        cfg = self.config
        try:
            headers: list[tuple[int, BatchHeader]] = list(iter_batch_headers(buf))
        except DecodeError as e:
            raise CorruptRecord(f"malformed record batch: {e}") from e
        if not headers:
            raise CorruptRecord("no record batches to append")
        for _, h in headers:
            if h.size > cfg.max_message_bytes:
                raise RecordBatchTooLarge(
                    f"batch of {h.size} bytes exceeds max.message.bytes {cfg.max_message_bytes}"
                )
        total = len(buf)
        if total > cfg.segment_bytes:
            raise RecordBatchTooLarge(
                f"{total} bytes of batches exceed segment.bytes {cfg.segment_bytes}"
            )
        producers = [h for _, h in headers if h.producer_id >= 0 and h.base_sequence >= 0]
        if producers and assign_offsets and len(headers) != 1:
            raise InvalidProducerBatch(
                "an idempotent producer's batch must be the only batch of its append"
            )
        log_append_time = -1
        with self._lock:
            if self._closed:
                raise self._closed_error()
            if self._producer_state is None and any(h.producer_id >= 0 for _, h in headers):
                # (a log restored lazily: the state is built from what is there before this
                # append, which then updates it, so the last stable offset stays right)
                self._producer_state_locked()
            if producers and assign_offsets:
                dup = self._check_producer(producers[0])
                if dup is not None:
                    return dup
                h0 = producers[0]
                self._producer_state_locked().check_transactional(
                    h0.producer_id, h0.is_transactional, h0.producer_epoch
                )
            elif assign_offsets:
                # a coordinator's transactional batch (TxnOffsetCommit: no sequence) is still
                # fenced by the producer's epoch
                for _, h in headers:
                    if h.producer_id >= 0 and h.is_transactional and not h.is_control:
                        self._producer_state_locked().check_transactional(
                            h.producer_id, True, h.producer_epoch
                        )
            first = nxt = self._leo
            if cfg.log_append_time and assign_offsets:
                # the leader stamps LogAppendTime; a follower keeps the leader's bytes
                log_append_time = self.clock()
            max_ts = -1
            for pos, h in headers:
                if assign_offsets:
                    set_base_offset(buf, pos, nxt)
                    set_partition_leader_epoch(buf, pos, leader_epoch)
                    h.base_offset = nxt
                    h.partition_leader_epoch = leader_epoch
                elif h.base_offset < nxt:
                    # later offsets may be missing (the leader's log was compacted): not earlier
                    raise UnexpectedAppendOffset(
                        f"{self.dir.name}: replica batch starts at offset {h.base_offset}, "
                        f"below the log end {nxt}"
                    )
                if log_append_time >= 0:
                    set_max_timestamp_and_type(buf, pos, h.size, log_append_time, True)
                    h.max_timestamp = log_append_time
                    h.base_timestamp = log_append_time
                if h.max_timestamp > max_ts:
                    max_ts = h.max_timestamp
                nxt = h.base_offset + h.last_offset_delta + 1
            if not assign_offsets:
                first = headers[0][1].base_offset
                for _, h in headers:
                    if h.partition_leader_epoch > self._latest_epoch:
                        self._assign_epoch(h.partition_leader_epoch, h.base_offset)
            elif leader_epoch > self._latest_epoch:
                self._assign_epoch(leader_epoch, first)
            seg = self._maybe_roll(total, headers[0][1], nxt - 1)
            seg.append(buf, headers)
            self._leo = nxt
            state = self._producer_state
            if state is not None:
                for pos, h in headers:
                    if h.producer_id < 0:
                        continue
                    if h.is_control:
                        self._apply_marker(state, seg, buf, pos, h)
                    else:
                        state.update_from_header(h)
        return first, nxt - 1, log_append_time, max_ts, self._log_start, len(headers), total

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
            if self._closed:
                raise self._closed_error()
            self._producer_state_locked().check_marker(
                producer_id, producer_epoch, coordinator_epoch
            )
            return self._append_batches(batch, leader_epoch, True)

    def _maybe_roll(self, size: int, first: BatchHeader, last_offset: int) -> LogSegment:
        return self._maybe_roll_at(
            self._segments[-1], size, first.base_offset, first.max_timestamp, last_offset
        )

    def _maybe_roll_at(
        self, seg: LogSegment, size: int, base_offset: int, batch_ts: int, last_offset: int
    ) -> LogSegment:
        if seg.size == 0:
            # an empty active segment must be named after the first offset it will hold
            if seg.base_offset != base_offset:
                return self.roll(base_offset)
            return seg
        if self._should_roll(seg, size, batch_ts, last_offset):
            return self.roll(base_offset)
        seg.reset_roll_deadline(self._roll_ms)
        return seg

    def _should_roll(self, seg: LogSegment, size: int, batch_ts: int, last_offset: int) -> bool:
        """Kafka's roll conditions: segment.bytes, segment.ms, a full index, or offsets that no
        longer fit the index's 32-bit relative offsets."""
        cfg = self.config
        if seg.size > cfg.segment_bytes - size:
            return True
        first_ts = seg.first_batch_timestamp
        if first_ts >= 0 and batch_ts >= 0:
            waited = batch_ts - first_ts
        else:
            waited = self.clock() - seg.created_ms
        if waited > self._roll_ms:
            return True
        if seg.index_full or seg.offset_index.is_full or seg.time_index.is_full:
            return True
        return last_offset - seg.base_offset > _INT32_MAX

    def roll(self, base_offset: int | None = None) -> LogSegment:
        """Start a new active segment at the log end offset (or `base_offset`)."""
        with self._lock:
            base = self._leo if base_offset is None else base_offset
            old = self._segments[-1]
            if old.size == 0 and old.base_offset == base:
                return old
            old.seal()
            new = self._new_segment(base)
            segs = list(self._segments)
            if old.size == 0:
                segs.pop()
                self._schedule_delete([old])
            segs.append(new)
            self._set_segments(segs)
            self._dir_dirty = True
            self._snapshot_producers()
            return new

    # -- flush ----------------------------------------------------------------------------------
    def flush(self, offset: int | None = None) -> None:
        """Make everything below `offset` (default: the log end) durable. Group commit: callers
        arriving while an fsync runs wait for it and then share the next one."""
        try:
            self._flush(offset)
        except OSError as exc:
            raise self._io_failure(exc, "flush") from exc

    # -- a failed disk -----------------------------------------------------------------------------
    def _closed_error(self) -> LogClosed:
        if self.offline:
            return LogDirOffline(
                f"log {self.dir.name} is offline: its log dir {self.dir.parent} failed"
            )
        return LogClosed(f"log {self.dir.name} is closed")

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
        self.offline = True
        try:
            self.close(flush=False)
        except OSError:
            log.warning("closing %s after its log dir failed", self.dir, exc_info=True)

    def _flush(self, offset: int | None = None) -> None:
        target = self._leo if offset is None else min(offset, self._leo)
        cond = self._flush_cond
        with cond:
            while True:
                if self._recovery_point >= target or self._closed:
                    return
                if not self._flushing:
                    self._flushing = True
                    break
                cond.wait()
        flushed_to = self._recovery_point
        started = time.monotonic_ns()
        try:
            with self._lock:
                leo = self._leo
                segs = self._segments
                dir_dirty, self._dir_dirty = self._dir_dirty, False
            last = segs[-1]
            for seg in segs:
                if seg.next_offset > self._recovery_point or seg.dirty:
                    seg.flush(indexes=seg is not last)
            self.leader_epoch_cache.write_pending()
            if dir_dirty:
                self._fsync_dir()
            flushed_to = leo
            self._last_flush_ms = self.clock()
            with _FLUSH_STATS_LOCK:  # logs flush in several threads and share one histogram
                self.flush_times.observe_ns(time.monotonic_ns() - started)
        finally:
            with cond:
                if flushed_to > self._recovery_point:
                    self._recovery_point = flushed_to
                self._flushing = False
                cond.notify_all()

    def flush_if_needed(self) -> bool:
        """Flush when flush.messages is reached; returns whether it flushed."""
        if self.needs_flush:
            self.flush()
            return True
        return False

    def _fsync_dir(self) -> None:
        fd = os.open(self.dir, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    # -- lifecycle ------------------------------------------------------------------------------
    def close(self, *, flush: bool = True, sync: bool = True) -> None:
        """Flush everything (with indexes, unless `flush=False` or the log was deleted), then
        close all files. With `sync=False` everything is written but nothing fsynced: the caller
        syncs the file system once for every log it closes (LogManager.shutdown)."""
        with self._lock:
            if self._files_closed:
                return
            segs = self._segments
            if flush and not self._closed:
                for s in segs[:-1]:
                    s.seal()
                for s in segs:
                    s.flush(indexes=True, sync=sync)
                self._snapshot_producers(fsync=sync)
                if sync:
                    # (a shutdown's manifest keeps the epochs instead; without it a deferred
                    # checkpoint, all entries at offset 0, is rebuilt from the batches)
                    self.leader_epoch_cache.write_pending()
                    self._fsync_dir()
                self._recovery_point = self._leo
            self._closed = True
            self._files_closed = True
            for s in segs:
                s.close(discard=self._deleted)
        self.remove_deleted_segments(force=True)
        with self._flush_cond:
            self._flush_cond.notify_all()

    def take_place_of_files(self, finish: Callable[[], Log]) -> tuple[LogSegment, ...]:
        """A move to another log dir ends: under this log's lock (appends wait), `finish()` returns
        the caught-up copy reopened in its final place, and this log takes over its directory,
        segments, leader-epoch cache and producer state; the high watermark stays. Returns the old
        segments, for the caller to close once in-flight reads are done."""
        with self._lock:
            if self._closed:
                raise self._closed_error()
            self.remove_deleted_segments(force=True)
            new = finish()
            old = self._segments
            self.dir = new.dir
            self._set_segments(new._segments)
            self._leo = new._leo
            self._log_start = new._log_start
            self._recovery_point = new._recovery_point
            self._hw = min(max(self._hw, self._log_start), self._leo)
            self.leader_epoch_cache = new.leader_epoch_cache
            self._latest_epoch = new._latest_epoch
            self._producer_state = new._producer_state
            self.recovery = new.recovery
            self._dir_dirty = True
            return old

    def mark_deleted(self) -> None:
        """Refuse further appends and flushes; reads keep working until `close()` (the topic is
        being deleted, and FileSlices already handed out must stay valid for a while)."""
        with self._lock:
            self._closed = True
            self._deleted = True
        with self._flush_cond:
            self._flush_cond.notify_all()

    def delete(self) -> None:
        """Close and remove the whole partition directory."""
        self.close(flush=False)
        shutil.rmtree(self.dir, ignore_errors=True)

    def __repr__(self) -> str:
        return (
            f"Log({self.dir.name}, start={self._log_start}, end={self._leo}, "
            f"segments={len(self._segments)}, recovery_point={self._recovery_point})"
        )
