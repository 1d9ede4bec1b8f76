"""LogSegment: one `<base offset>.log` file of whole record batches plus its .index and .timeindex
(file names in segment_files, batch scans in segment_scan).

Appends batches (positional writes), answers offset/position/timestamp lookups with header-only
reads, validates and truncates itself on recovery, and renames itself for deletion and swaps.
"""

from __future__ import annotations

import errno
import functools
import logging
import os
import struct
import time
from pathlib import Path

from kafkalite.records.header import TIMESTAMP_TYPE_MASK, BatchHeader
from kafkalite.storage import segment_files as files
from kafkalite.storage import segment_scan
from kafkalite.storage.file_cache import OpenFile, process_file_cache
from kafkalite.storage.index import CorruptIndex, OffsetIndex, TimeIndex
from kafkalite.storage.segment_scan import RecoveryResult
from kafkalite.storage.txn_index import TXN_INDEX_SUFFIX, TransactionIndex

log = logging.getLogger("kafkalite.storage.log")

_INT32_MAX = 2**31 - 1
_STAMP = struct.Struct(">qii")  # base offset, batch length, partition leader epoch
_stamp = _STAMP.pack_into
_stamped = _STAMP.pack
_pwrite = os.pwrite
_pwritev = os.pwritev
# immutable batches up to this size are copied to be stamped; larger ones are written with pwritev
_COPY_MAX = 4096


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


# (base offset, size, next offset, max timestamp, its offset, first batch's timestamp, bytes since
# the last offset-index entry, the time index's last timestamp)
SegmentState = tuple[int, int, int, int, int, int, int, int]


class LogSegment:
    """A segment file and its indexes. Mutated only under the owning Log's lock; read lock-free."""

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int,
        max_index_bytes: int,
        suffix: str = "",
        create: bool = False,
        fresh_dir: bool = False,
        known_size: int | None = None,
        names: set[str] | None = None,
    ) -> None:
        self.dir = directory
        self.base_offset = base_offset
        self.suffix = suffix
        self._interval = index_interval_bytes
        self._cache = process_file_cache()
        self._fh: OpenFile | None = None  # the .log file while the cache keeps it open
        self._create_flags = 0  # O_CREAT | O_TRUNC for the first open of a new segment only
        self.closed = False
        self.log_path = directory / (files.segment_file_name(base_offset) + suffix)
        # (a new directory has no index files to replace: its segment's come with its flush)
        if create and not fresh_dir:
            files.create_empty_indexes(directory, base_offset, suffix)
        self._max_index_bytes = max_index_bytes
        self._deferred_ts: int | None = None  # see _defer_index_loads
        # which of its index files (offset, time, transaction) are known not to exist
        self._absent, self.indexes_missing = files.absent_index_files(
            directory, base_offset, suffix, create, fresh_dir, known_size, names
        )
        if create:  # a new segment is about to be written: its file goes straight into the cache
            self._create_flags = os.O_CREAT | os.O_TRUNC
            if not fresh_dir:  # (in a new directory the first use creates it: a partition that
                self._cache.open(self)  # is made and never written costs no file)
            size = 0
        elif known_size is not None:  # restored from a clean shutdown's manifest: no stat
            size = known_size
            if size == 0:  # (a segment never written may have no file yet: its first use makes it)
                self._create_flags = os.O_CREAT
        else:
            try:
                size = os.stat(self.log_path).st_size
            except FileNotFoundError:  # as before: opening a segment creates its missing file
                self._create_flags = os.O_CREAT
                self._cache.open(self)
                size = 0
        self.size = size
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = base_offset
        self.first_batch_timestamp = -1
        self.created_ms = int(time.time() * 1000)
        # an append starting at a position past `index_due` gets an index entry (Kafka's "more than
        # index.interval.bytes since the last entry", kept as one integer the hot path compares)
        self.index_due = self.size + index_interval_bytes
        self.synced_size = self.size  # bytes known to be fsynced (-1: unknown, sync needed)
        self.index_full = False
        # see Log.append: batches with timestamps up to this cannot roll by time (-1: full check)
        self.roll_ts = -1
        self.max_offset = base_offset + _INT32_MAX  # relative offsets must fit the index's int32

    # -- its indexes: made on first use (a restart makes a segment per partition, and most are
    # never looked up before the broker's next restart) --------------------------------------------
    def _index_path(self, ext: str) -> Path:
        return self.dir / (files.segment_file_name(self.base_offset, ext) + self.suffix)

    @functools.cached_property
    def offset_index(self) -> OffsetIndex:
        idx = OffsetIndex(
            self._index_path(files.INDEX_SUFFIX), self.base_offset, self._max_index_bytes
        )
        if self._absent[0]:
            idx.known_absent()
        if self._deferred_ts is not None:
            idx.defer_load(self._load_indexes)
        return idx

    @functools.cached_property
    def time_index(self) -> TimeIndex:
        idx = TimeIndex(
            self._index_path(files.TIME_INDEX_SUFFIX), self.base_offset, self._max_index_bytes
        )
        if self._absent[1]:
            idx.known_absent()
        if self._deferred_ts is not None:
            idx.defer_load(self._load_indexes, self._deferred_ts)
        return idx

    def _reset_indexes(self) -> None:
        """Both indexes emptied, to be rebuilt (one not made whose file is known not to exist is
        empty already: a restart after a crash makes no index for a partition's small segment)."""
        self._deferred_ts = None
        made = self.__dict__
        if "offset_index" in made or not self._absent[0]:
            self.offset_index.reset()
        if "time_index" in made or not self._absent[1]:
            self.time_index.reset()

    def _defer_index_loads(self, last_timestamp: int) -> None:
        """Leave both indexes' entries on disk until a lookup needs them (Kafka's LazyIndex);
        `last_timestamp` is the time index's last. An index not made yet is made so."""
        self._deferred_ts = last_timestamp
        made = self.__dict__
        if "offset_index" in made:
            self.offset_index.defer_load(self._load_indexes)
        if "time_index" in made:
            self.time_index.defer_load(self._load_indexes, last_timestamp)

    @functools.cached_property
    def txn_index(self) -> TransactionIndex:
        """The aborted transactions whose abort marker is in this segment (written by the Log)."""
        idx = TransactionIndex(self._index_path(TXN_INDEX_SUFFIX))
        if self._absent[2]:
            idx.known_empty()
        return idx

    # -- the .log file's descriptor (from the process's FileCache) ------------------------------
    def _open_fd(self) -> int:
        """Open the .log file for the cache (FileNotFoundError once it is renamed and unlinked)."""
        if self.closed:
            raise OSError(errno.EBADF, f"segment {self.log_path} is closed")
        path = self.log_path
        try:
            fd = os.open(path, os.O_RDWR | self._create_flags, 0o644)
        except FileNotFoundError:
            if self.log_path == path:
                raise
            fd = os.open(self.log_path, os.O_RDWR)  # renamed (.deleted, .swap) meanwhile
        self._create_flags = 0
        return fd

    def handle(self) -> OpenFile:
        """A lease on the .log file's descriptor: valid as long as the caller keeps the handle
        (an eviction only makes the segment forget it)."""
        fh = self._fh
        if fh is None:
            return self._cache.open(self)
        fh.used = True
        return fh

    @property
    def is_open(self) -> bool:
        """The .log file is currently held open by the cache."""
        return self._fh is not None

    @property
    def index_interval_bytes(self) -> int:
        return self._interval

    @index_interval_bytes.setter
    def index_interval_bytes(self, value: int) -> None:
        since = self.bytes_since_last_index_entry
        self._interval = value
        self.index_due = self.size - since + value

    @property
    def bytes_since_last_index_entry(self) -> int:
        """Bytes appended since the batch that got the last index entry (inclusive)."""
        return self.size - (self.index_due - self._interval)

    @bytes_since_last_index_entry.setter
    def bytes_since_last_index_entry(self, value: int) -> None:
        self.index_due = self.size - value + self._interval

    # -- writing ----------------------------------------------------------------------------------
    def append(
        self, buf: bytes | bytearray | memoryview, headers: list[tuple[int, BatchHeader]]
    ) -> None:
        """Write whole batches (offsets already assigned) and index them."""
        pos0 = self.size
        mv = memoryview(buf)
        written = 0
        total = len(mv)
        fh = self.handle()  # held (a lease) until the writes are done
        fd = fh.fd
        while written < total:
            written += os.pwrite(fd, mv[written:], pos0 + written)
        for p, h in headers:
            if pos0 + p > self.index_due:
                self.add_index_entries(h.base_offset, pos0 + p)
            if h.max_timestamp > self.max_timestamp:
                self.max_timestamp = h.max_timestamp
                self.offset_of_max_timestamp = h.base_offset + h.last_offset_delta
            if self.first_batch_timestamp < 0:
                self.first_batch_timestamp = h.max_timestamp
        self.size = pos0 + total
        if headers:
            last = headers[-1][1]
            self.next_offset = last.base_offset + last.last_offset_delta + 1

    def append_stamped(
        self,
        records: bytes | bytearray | memoryview,
        first: int,
        last: int,
        length: int,
        max_ts: int,
        leader_epoch: int,
        roll_ms: int,
    ) -> None:
        """Write one batch of offsets `first`..`last` at the end, stamped with its base offset,
        length and partition leader epoch, and account for it (the leader's append fast path).
        A caller's writable buffer is stamped in place; immutable bytes are copied when small,
        else written from a stamped copy of their first 16 bytes and a view of the rest (the CRC
        starts at byte 21). One positional write per batch, straight to the page cache: an
        acknowledged append must survive a crash of this process without a flush. `roll_ms` is
        segment.ms less its jitter, for the precomputed roll deadline."""
        pos = self.size
        n = length + 12
        # the open file (a lease: an eviction meanwhile cannot close it under this write);
        # reopened through the FileCache only after an eviction
        fh = self._fh
        if fh is None:
            fh = self._cache.open(self)
        else:
            fh.used = True
        fd = fh.fd
        if type(records) is bytearray or (type(records) is memoryview and not records.readonly):
            _stamp(records, 0, first, length, leader_epoch)  # the caller's own buffer
            written = _pwrite(fd, records, pos)
        elif n < _COPY_MAX:
            records = bytearray(records)
            _stamp(records, 0, first, length, leader_epoch)
            written = _pwrite(fd, records, pos)
        else:
            written = _pwritev(
                fd, (_stamped(first, length, leader_epoch), memoryview(records)[16:]), pos
            )
        if written < n:
            _write_rest(fd, records, first, leader_epoch, pos, written)
        if pos > self.index_due:
            self.add_index_entries(first, pos)
        if max_ts > self.max_timestamp:
            self.max_timestamp = max_ts
            self.offset_of_max_timestamp = last
        if not pos:
            self.first_batch_timestamp = max_ts
            self.roll_ts = max_ts + roll_ms if max_ts >= 0 else -1
        self.size = pos + n
        self.next_offset = last + 1

    def reset_roll_deadline(self, roll_ms: int) -> None:
        """Recompute `roll_ts` (the newest batch timestamp that cannot trigger segment.ms) after a
        full roll check found no reason to roll; -1 when the segment has no timestamps."""
        fs = self.first_batch_timestamp
        self.roll_ts = fs + roll_ms if fs >= 0 else -1

    def reconfigure(self, index_interval_bytes: int) -> None:
        """Apply a new index.interval.bytes; the next append takes the full roll check."""
        self.index_interval_bytes = index_interval_bytes
        self.roll_ts = -1

    def add_index_entries(self, base_offset: int, pos: int) -> None:
        """Index the batch at `pos` (and the max timestamp of the batches before it)."""
        self.index_due = pos + self._interval
        full = self.offset_index.append(base_offset, pos)
        max_ts = self.max_timestamp
        ti = self.time_index
        if max_ts > ti.last_timestamp and max_ts >= 0:  # else maybe_append would skip it
            full = ti.maybe_append(max_ts, self.offset_of_max_timestamp) or full
        if full:
            self.index_full = True
            self.roll_ts = -1  # the next append takes the full roll check (and rolls)

    def seal(self) -> None:
        """The segment stops being active: record its final max timestamp in the time index."""
        # (compared first: a lazy time index whose last entry has it stays unloaded)
        if self.max_timestamp > self.time_index.last_timestamp and self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)

    def flush(self, *, indexes: bool = True, sync: bool = True) -> None:
        """fsync what was appended (and write and fsync the indexes); without `sync` nothing is
        synced here: the caller syncs the whole file system once (a shutdown of many logs)."""
        if self.closed:
            return
        size = self.size  # every byte below it was written before it was published
        if size != self.synced_size and sync:
            try:
                # any descriptor of the file syncs it (the data may have gone through another)
                fh = self.handle()
                os.fdatasync(fh.fd)
            except OSError:
                if self.closed:  # deleted (after file.delete.delay.ms) while a flush held it
                    return
                raise
            self.synced_size = size
        # abort markers' entries are rare: synced with the data they describe
        self.txn_index.flush(sync=sync)
        if indexes:
            self.offset_index.flush(sync=sync)
            self.time_index.flush(sync=sync)

    @property
    def dirty(self) -> bool:
        """Bytes were appended (or the file changed) since the last fsync."""
        return self.size != self.synced_size

    def last_modified_ms(self) -> int:
        try:
            return int(os.stat(self.log_path).st_mtime * 1000)
        except OSError:
            return 0

    def largest_timestamp(self) -> int:
        """Max record timestamp, or the file's mtime when no batch carried one (retention.ms)."""
        return self.max_timestamp if self.max_timestamp > 0 else self.last_modified_ms()

    # -- reading ----------------------------------------------------------------------------------
    def find_batch(self, offset: int, limit: int | None = None) -> tuple[int, BatchHeader] | None:
        """(position, header) of the first batch whose last offset is >= `offset`, below `limit`."""
        _, pos = self.offset_index.lookup(offset)
        return segment_scan.batch_reaching(
            self.handle().fd, pos, self.size if limit is None else limit, offset
        )

    def position_bound(self, max_offset: int, limit: int) -> int:
        """Position of the first batch whose base offset is >= `max_offset` (or `limit`)."""
        if max_offset >= self.next_offset:
            return limit
        found = self.find_batch(max_offset, limit)
        if found is None:
            return limit
        pos, h = found
        return pos if h.base_offset >= max_offset else pos + h.size

    def read(
        self, offset: int, max_bytes: int, limit: int, min_one_message: bool
    ) -> tuple[int, int, BatchHeader] | None:
        """(position, length, first header) covering whole batches starting at `offset`'s batch."""
        found = self.find_batch(offset, limit)
        if found is None:
            return None
        pos, first = found
        if first.size > max_bytes:
            return (pos, first.size, first) if min_one_message else (pos, 0, first)
        target = pos + max_bytes
        if target >= limit:
            return pos, limit - pos, first
        # whole batches up to `target`: start from the last index entry at or below it
        _, p = self.offset_index.lookup_position(target)
        end = segment_scan.whole_batches_end(self.handle().fd, max(p, pos), limit, target)
        return pos, end - pos, first

    def read_bytes(self, position: int, length: int) -> bytes:
        return segment_scan.read_fully(self.handle().fd, position, length)

    def timestamp_lookup(self, timestamp: int, start_offset: int) -> tuple[int, BatchHeader] | None:
        """First batch with max timestamp >= `timestamp` and last offset >= `start_offset`."""
        from_offset = max(self.time_index.lookup_before(timestamp), start_offset)
        _, pos = self.offset_index.lookup(from_offset)
        return segment_scan.batch_at_time(self.handle().fd, pos, self.size, timestamp, start_offset)

    # -- loading and recovery -------------------------------------------------------------------
    def load(self) -> bool:
        """Open a segment below the recovery point without loading its indexes (Kafka's LazyIndex):
        its end is found from the offset index's last entry and a scan of the batch headers past
        it, its max timestamp from the time index's last entry. The indexes load (and are spot-
        checked against the log, rebuilt if damaged) on their first lookup. Returns False if the
        caller must run `recover()` instead."""
        if self.indexes_missing and self.size:
            return False
        fh = self.handle()
        try:
            last = self.offset_index.last_file_entry()
            t_last = self.time_index.last_file_entry()
        except CorruptIndex:
            return False
        st = segment_scan.scan_tail(fh.fd, self.size, self.base_offset, last, t_last)
        if st is None:
            return False
        self.next_offset = st.next_offset
        self.max_timestamp, self.offset_of_max_timestamp = (
            st.max_timestamp,
            st.offset_of_max_timestamp,
        )
        self._defer_index_loads(t_last[0] if t_last is not None else -1)
        self.bytes_since_last_index_entry = st.since_index
        self._load_first_timestamp()
        return True

    def state(self) -> SegmentState:
        """What `restore` needs to take this segment up again without reading it (a closed,
        flushed segment: written into the clean-shutdown manifest)."""
        return (
            self.base_offset, self.size, self.next_offset, self.max_timestamp,
            self.offset_of_max_timestamp, self.first_batch_timestamp,
            self.bytes_since_last_index_entry, self._time_index_last_timestamp(),
        )  # fmt: skip

    def _time_index_last_timestamp(self) -> int:
        if "time_index" not in self.__dict__ and self._deferred_ts is not None:
            return self._deferred_ts  # (not made yet: its entries are still those on disk)
        return self.time_index.last_timestamp

    def restore(self, state: SegmentState) -> None:
        """`load` without I/O, from `state()` as written at a clean shutdown: both indexes stay on
        disk until a lookup needs them (then they are loaded and spot-checked as after `load`)."""
        _, size, nxt, max_ts, off_max, first_ts, since, last_ts = state
        self.size = self.synced_size = size
        self.next_offset = nxt
        self.max_timestamp, self.offset_of_max_timestamp = max_ts, off_max
        self.first_batch_timestamp = first_ts
        self._defer_index_loads(last_ts)
        self.bytes_since_last_index_entry = since

    def _load_indexes(self) -> None:
        """Load both lazy indexes and spot-check them against the log; rebuild them from the
        batch headers when they fail (they are derived data: the log is the truth)."""
        try:
            if not self.offset_index.loaded:
                self.offset_index.load(self.size)
                self._spot_check_index()
            if not self.time_index.loaded:
                self.time_index.load(self.next_offset)
                self._spot_check_time_index()
        except CorruptIndex as e:
            log.warning("%s: rebuilding indexes of segment %d: %s", self.dir, self.base_offset, e)
            self._rebuild_indexes()

    def _rebuild_indexes(self) -> None:
        """Both indexes again from the batch headers (no CRC: a loaded segment below the recovery
        point; size and offsets stay as they are)."""
        self._reset_indexes()
        fh = self.handle()
        segment_scan.rebuild_indexes(
            fh.fd, self.size, self.base_offset, self._interval, self.offset_index, self.time_index
        )

    def _spot_check_index(self) -> None:
        segment_scan.spot_check_offset_index(self.handle().fd, self.size, self.offset_index)

    def _spot_check_time_index(self) -> None:
        segment_scan.spot_check_time_index(self.time_index, self.find_batch)

    def _load_first_timestamp(self) -> None:
        fh = self.handle()
        h = segment_scan.read_header(fh.fd, 0, self.size)
        self.first_batch_timestamp = h.max_timestamp if h is not None else -1

    def recover(self, min_next_offset: int | None = None) -> RecoveryResult:
        """Scan every batch (framing, magic, CRC-32C, offset order), rebuild both indexes, and
        truncate the file at the first batch that is torn or corrupt."""
        self._reset_indexes()
        expected = self.base_offset if min_next_offset is None else min_next_offset
        fh = self.handle()
        file_size, st = segment_scan.recovery_scan(
            fh.fd,
            self.base_offset,
            expected,
            self.index_interval_bytes,
            self.offset_index,
            self.time_index,
        )
        pos, batches = st.pos, st.batches
        truncated = file_size - pos
        if truncated:
            os.ftruncate(fh.fd, pos)
        self.size = pos
        self.next_offset = st.next_offset if batches else self.base_offset
        self.max_timestamp, self.offset_of_max_timestamp = (
            st.max_timestamp,
            st.offset_of_max_timestamp,
        )
        self.first_batch_timestamp = st.first_timestamp
        self.bytes_since_last_index_entry = st.since_index
        self.synced_size = -1
        if "txn_index" in self.__dict__ or not self._absent[2]:  # (else there are none)
            self.txn_index.truncate_to(self.next_offset)  # markers past the recovered end are gone
        return RecoveryResult(pos, truncated, batches)

    def truncate_to(self, offset: int) -> int:
        """Remove batches whose last offset is >= `offset`; returns the bytes removed."""
        found = self.find_batch(offset)
        if found is None:
            return 0
        pos, h = found
        removed = self.size - pos
        fh = self.handle()
        os.ftruncate(fh.fd, pos)
        self.size = pos
        self.offset_index.truncate_to(h.base_offset)
        self.time_index.truncate_to(h.base_offset)
        self.txn_index.truncate_to(offset)
        # recompute the tail state by rescanning (rare: replication truncation)
        self.recover()
        return removed

    # -- files ------------------------------------------------------------------------------------
    def all_paths(self) -> list[Path]:
        return [self.log_path, self.offset_index.path, self.time_index.path, self.txn_index.path]

    def change_suffix(self, old: str, new: str) -> None:
        """Rename the segment's files from suffix `old` to `new` (fds stay valid)."""

        def renamed(p: Path) -> Path:
            name = p.name[: len(p.name) - len(old)] if old else p.name
            return p.with_name(name + new)

        os.rename(self.log_path, renamed(self.log_path))
        self.log_path = renamed(self.log_path)
        for idx in (self.offset_index, self.time_index):
            target = renamed(idx.path)
            if idx.path.exists():
                idx.rename(target)
            else:
                idx._file.path = target
        self.txn_index.rename(renamed(self.txn_index.path))
        self.suffix = new

    def close(self, *, discard: bool = False) -> None:
        """Close its files; with `discard` index entries not yet written are dropped (the
        segment's directory was renamed for deletion: there is nowhere to write them)."""
        if self.closed:
            return
        self.closed = True
        try:
            self._cache.forget(self)
        finally:
            made = self.__dict__  # (an index never made holds nothing to write or let go)
            if "offset_index" in made:
                self.offset_index.close(discard=discard)
            if "time_index" in made:
                self.time_index.close(discard=discard)
            if "txn_index" in made:
                self.txn_index.close()

    def delete_files(self) -> None:
        self.close()
        for p in self.all_paths():
            try:
                p.unlink()
            except FileNotFoundError:
                pass

    def __repr__(self) -> str:
        return f"LogSegment(base={self.base_offset}, size={self.size}, next={self.next_offset})"

    @staticmethod
    def is_log_append_time(h: BatchHeader) -> bool:
        return bool(h.attributes & TIMESTAMP_TYPE_MASK)
