"""Sparse per-segment indexes: OffsetIndex (relative offset -> file position, 8-byte entries) and
TimeIndex (max timestamp so far -> relative offset, 12-byte entries); both rebuildable from the log.

Entries live in memory as arrays (bisect lookups); new ones go to the big-endian files on disk in
batches (every few hundred entries, and on flush, truncate and close).
"""

from __future__ import annotations

import errno
import os
import struct
import sys
import threading
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

from kafkalite.storage.file_cache import OpenFile, process_file_cache

_BIG = sys.byteorder == "big"
_OFF_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_SPILL_ENTRIES = 256  # entries appended in memory before they are handed to the file together
_LAZY_LOAD_LOCK = threading.RLock()  # one lazy load at a time (rare: first lookup of a segment)


class CorruptIndex(Exception):
    """An index file failed its sanity check; the caller rebuilds it from the log."""


def _to_native(a: array[int]) -> None:
    if not _BIG:
        a.byteswap()


class _IndexFile:
    """An index file whose appended entries are buffered and written in blocks (on flush, close,
    or every few KiB): indexes are rebuildable, so a lost tail only makes them sparser.

    Its descriptor comes from the process's FileCache, opened (creating the file) only when bytes
    must reach the file or be read from it, and closed whenever the cache needs the slot."""

    _BLOCK = 8192

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh: OpenFile | None = None
        self._cache = process_file_cache()
        self.closed = False
        self.dirty = False
        self._pending = bytearray()
        self._pending_at = 0
        self._absent = False  # known not to exist (until this object creates it)

    def known_absent(self) -> None:
        """The file is known not to exist (a new directory, or its listing says so): reading or
        cutting it needs no call to the file system."""
        if self._fh is None:
            self._absent = True

    def _open_fd(self) -> int:
        if self.closed:
            raise OSError(errno.EBADF, f"index {self.path} is closed")
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        self._absent = False
        return fd

    def _handle(self) -> OpenFile:
        fh = self._fh
        if fh is None:
            return self._cache.open(self)
        fh.used = True
        return fh

    @property
    def is_open(self) -> bool:
        return self._fh is not None

    def exists(self) -> bool:
        return self._fh is not None or (not self._absent and self.path.exists())

    def write(self, data: bytes, at: int) -> None:
        pending = self._pending
        if not pending:
            self._pending_at = at
        elif self._pending_at + len(pending) != at:
            self.drain()
            self._pending_at = at
            pending = self._pending
        pending += data
        self.dirty = True
        if len(pending) >= self._BLOCK:
            self.drain()

    def drain(self) -> None:
        if self._pending:
            fh = self._handle()  # a local lease: an eviction cannot close it under the write
            os.pwrite(fh.fd, self._pending, self._pending_at)
            self._pending = bytearray()

    def read_all(self) -> bytes:
        """The file's bytes (empty when it does not exist: nothing is created to read it)."""
        if self._pending:
            self.drain()
        fh = self._fh
        if fh is None:
            if self._absent:
                return b""
            try:
                with open(self.path, "rb") as f:  # one open for one read: no cache slot taken
                    return f.read()
            except FileNotFoundError:
                return b""
        size = os.fstat(fh.fd).st_size
        return os.pread(fh.fd, size, 0) if size else b""

    def read_tail(self, entry_size: int) -> bytes | None:
        """The file's last `entry_size` bytes (fewer when its size is not a multiple of it), or
        None when it is empty or missing."""
        if self._pending:
            self.drain()
        if self._absent and self._fh is None:
            return None
        try:
            with open(self.path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                if size == 0:
                    return None
                cut = size % entry_size or entry_size
                f.seek(size - cut)
                return f.read(cut)
        except FileNotFoundError:
            return None

    def truncate(self, size: int) -> None:
        self._pending = bytearray() if size <= self._pending_at else self._pending
        self.drain()
        fh = self._fh
        if fh is None and size == 0:  # by name: no descriptor taken, nothing created
            if self._absent:
                return
            try:
                os.truncate(self.path, 0)
            except FileNotFoundError:
                return  # nothing to cut: do not create the file for it
            self.dirty = True
            return
        fh = self._handle()
        os.ftruncate(fh.fd, size)
        self.dirty = True

    def flush(self, *, sync: bool = True) -> None:
        """Write pending entries and fsync (creating the file if it does not exist yet, so a
        flushed segment always has its index files); without `sync` only write them (the caller
        syncs the whole file system)."""
        self.drain()
        if not sync:
            return
        if self.dirty or not self.exists():
            self.dirty = False
            fh = self._handle()
            os.fsync(fh.fd)

    def rename(self, path: Path) -> None:
        if not self._absent:
            os.rename(self.path, path)
        self.path = path

    def close(self, *, discard: bool = False) -> None:
        """Write what is pending (dropped with `discard`: its directory is gone) and let go."""
        if not self.closed:
            try:
                if not discard:
                    self.drain()
            finally:
                self.closed = True
                self._cache.forget(self)


class _SparseIndex:
    """What both indexes share: two parallel columns in memory, spilled to their file in batches."""

    ENTRY: ClassVar[struct.Struct]
    ENTRY_SIZE: ClassVar[int]

    def __init__(self, path: Path, base_offset: int, max_index_bytes: int) -> None:
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_bytes // self.ENTRY_SIZE)
        self._file = _IndexFile(path)
        self._written = 0  # entries handed to the file
        # Kafka's LazyIndex: a segment loaded at startup below the recovery point leaves its
        # entries on disk until a lookup needs them; `_loader` (the segment's) reads and checks them
        self._loaded = True
        self._loader: Callable[[], None] | None = None

    def known_absent(self) -> None:
        """Its file is known not to exist: nothing to read or cut until entries are written."""
        self._file.known_absent()

    def defer_load(self, loader: Callable[[], None]) -> None:
        """Leave the entries on disk; `loader` loads them (calling `load`) on first need."""
        self._loaded = False
        self._loader = loader

    @property
    def loaded(self) -> bool:
        return self._loaded

    def _ensure_loaded(self) -> None:
        if not self._loaded:
            with _LAZY_LOAD_LOCK:
                if not self._loaded and self._loader is not None:
                    self._loader()
                self._loaded = True
                self._loader = None  # (the segment's bound method: no cycle kept once loaded)

    def _file_tail(self) -> bytes | None:
        """The last whole entry in the file (None: no entry); CorruptIndex on a partial one."""
        data = self._file.read_tail(self.ENTRY_SIZE)
        if data is None:
            return None
        if len(data) != self.ENTRY_SIZE:
            raise CorruptIndex(f"{self.path}: size is not a multiple of {self.ENTRY_SIZE}")
        return data

    def _columns(self) -> tuple[array[int], array[int]]:
        """The two columns in file order (each entry is ENTRY.pack(first[i], second[i]))."""
        raise NotImplementedError

    @property
    def path(self) -> Path:
        return self._file.path

    def __len__(self) -> int:
        self._ensure_loaded()
        return len(self._columns()[0])

    @property
    def is_full(self) -> bool:
        return len(self) >= self.max_entries

    def _spill(self) -> None:
        """Hand the entries not yet in the file to it, in one write."""
        if not self._loaded:
            return  # nothing new: every entry is in the file
        first, second = self._columns()
        n, w = len(first), self._written
        if n > w:
            self._file.write(self._encode(first[w:n], second[w:n]), w * self.ENTRY_SIZE)
            self._written = n

    def _encode(self, first: array[int], second: array[int]) -> bytes:
        """Entries as the file stores them."""
        return b"".join(map(self.ENTRY.pack, first, second))

    def _keep_on_disk(self, n: int) -> None:
        """The columns were cut to `n` entries: cut the file to match."""
        self._written = min(self._written, n)
        self._file.truncate(n * self.ENTRY_SIZE)

    def flush(self, *, sync: bool = True) -> None:
        self._spill()
        self._file.flush(sync=sync)

    def rename(self, path: Path) -> None:
        self._file.rename(path)

    def close(self, *, discard: bool = False) -> None:
        try:
            if not self._file.closed and not discard:
                self._spill()
        finally:
            self._file.close(discard=discard)


class OffsetIndex(_SparseIndex):
    """Maps relative offsets of batch starts to positions in the segment's .log file."""

    ENTRY = _OFF_ENTRY
    ENTRY_SIZE = 8

    def __init__(self, path: Path, base_offset: int, max_index_bytes: int) -> None:
        super().__init__(path, base_offset, max_index_bytes)
        # positions are appended before offsets, so a reader bisecting `_offsets` always
        # finds the matching position present
        self._offsets: array[int] = array("i")
        self._positions: array[int] = array("i")

    def _columns(self) -> tuple[array[int], array[int]]:
        return self._offsets, self._positions

    def _encode(self, first: array[int], second: array[int]) -> bytes:
        # both columns are int32: interleave them in one array (C loops, not a pack per entry)
        both: array[int] = array("i", bytes(8 * len(first)))
        both[0::2] = first
        both[1::2] = second
        _to_native(both)
        return both.tobytes()

    def load(self, log_size: int) -> None:
        """Read entries from disk; CorruptIndex if they are not a monotonic, in-bounds sequence."""
        data = self._file.read_all()
        if len(data) % self.ENTRY_SIZE:
            raise CorruptIndex(f"{self.path}: size {len(data)} is not a multiple of 8")
        raw: array[int] = array("i")
        raw.frombytes(data)
        _to_native(raw)
        offsets, positions = raw[0::2], raw[1::2]
        prev_o, prev_p = -1, -1
        for o, p in zip(offsets, positions):
            if o <= prev_o or p <= prev_p or p >= log_size:
                raise CorruptIndex(f"{self.path}: entry ({o}, {p}) out of order or past the log")
            prev_o, prev_p = o, p
        self._positions = positions
        self._offsets = offsets
        self._written = len(offsets)
        self._loaded = True
        self._loader = None  # (a bound method of the segment: no cycle kept once loaded)

    def last_file_entry(self) -> tuple[int, int] | None:
        """(absolute offset, position) of the file's last entry, read without loading the rest."""
        data = self._file_tail()
        if data is None:
            return None
        rel, pos = _OFF_ENTRY.unpack(data)
        return self.base_offset + rel, pos

    def entries(self) -> list[tuple[int, int]]:
        """(absolute offset, position) pairs."""
        self._ensure_loaded()
        b = self.base_offset
        return [(b + o, p) for o, p in zip(self._offsets, self._positions)]

    def append(self, offset: int, position: int) -> bool:
        """Add an entry (ignored unless offset and position both grow); True when the index is
        full afterwards (the segment's appender checks this instead of calling `is_full`)."""
        if not self._loaded:
            self._ensure_loaded()
        rel = offset - self.base_offset
        offsets = self._offsets
        n = len(offsets)
        if n and (rel <= offsets[-1] or position <= self._positions[-1]):
            return n >= self.max_entries
        self._positions.append(position)
        offsets.append(rel)
        n += 1
        if n - self._written >= _SPILL_ENTRIES:
            self._spill()
        return n >= self.max_entries

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the last entry at or below `offset`, else (base offset, 0)."""
        if not self._loaded:
            self._ensure_loaded()
        offsets = self._offsets
        i = bisect_right(offsets, offset - self.base_offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + offsets[i], self._positions[i]

    def lookup_position(self, position: int) -> tuple[int, int]:
        """(offset, position) of the last entry whose position is at or below `position`."""
        if not self._loaded:
            self._ensure_loaded()
        n = len(self._offsets)
        i = min(bisect_right(self._positions, position), n) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self._offsets[i], self._positions[i]

    def truncate_to(self, offset: int) -> None:
        """Drop entries for offsets >= `offset`."""
        self._ensure_loaded()
        i = bisect_left(self._offsets, offset - self.base_offset)
        self._offsets = self._offsets[:i]
        self._positions = self._positions[:i]
        self._keep_on_disk(i)

    def reset(self) -> None:
        self._offsets = array("i")
        self._positions = array("i")
        self._loaded = True
        self._loader = None  # (a bound method of the segment: no cycle kept once loaded)
        self._keep_on_disk(0)


class TimeIndex(_SparseIndex):
    """Maps the running max timestamp to the relative offset of the batch that first reached it."""

    ENTRY = _TIME_ENTRY
    ENTRY_SIZE = 12

    def __init__(self, path: Path, base_offset: int, max_index_bytes: int) -> None:
        super().__init__(path, base_offset, max_index_bytes)
        self._timestamps: array[int] = array("q")
        self._offsets: array[int] = array("q")
        # the newest entry's timestamp (-1: none), for a check that needs no call
        self.last_timestamp = -1

    def _columns(self) -> tuple[array[int], array[int]]:
        return self._timestamps, self._offsets

    @property
    def last_entry(self) -> tuple[int, int]:
        """(timestamp, absolute offset) of the newest entry, or (-1, base offset)."""
        self._ensure_loaded()
        if not self._timestamps:
            return -1, self.base_offset
        return self._timestamps[-1], self.base_offset + self._offsets[-1]

    def load(self, next_offset_bound: int | None = None) -> None:
        data = self._file.read_all()
        if len(data) % self.ENTRY_SIZE:
            raise CorruptIndex(f"{self.path}: size {len(data)} is not a multiple of 12")
        ts: array[int] = array("q")
        offs: array[int] = array("q")
        prev_t, prev_o = -(2**63), -1
        for t, o in _TIME_ENTRY.iter_unpack(data):
            if t <= prev_t or o < prev_o or o < 0:
                raise CorruptIndex(f"{self.path}: entry ({t}, {o}) out of order")
            if next_offset_bound is not None and self.base_offset + o >= next_offset_bound:
                raise CorruptIndex(f"{self.path}: entry offset {o} past the log end")
            ts.append(t)
            offs.append(o)
            prev_t, prev_o = t, o
        self._offsets = offs
        self._timestamps = ts
        self._written = len(ts)
        self.last_timestamp = ts[-1] if ts else -1
        self._loaded = True
        self._loader = None  # (a bound method of the segment: no cycle kept once loaded)

    def last_file_entry(self) -> tuple[int, int] | None:
        """(timestamp, absolute offset) of the file's last entry, read without loading the rest."""
        data = self._file_tail()
        if data is None:
            return None
        ts, rel = _TIME_ENTRY.unpack(data)
        return ts, self.base_offset + rel

    def defer_load(self, loader: Callable[[], None], last_timestamp: int = -1) -> None:
        """As the base's; `last_timestamp` is the file's last entry's (read by the caller)."""
        super().defer_load(loader)
        # the append path reads this attribute directly: keep it right while unloaded
        self.last_timestamp = last_timestamp

    def entries(self) -> list[tuple[int, int]]:
        """(timestamp, absolute offset) pairs."""
        self._ensure_loaded()
        b = self.base_offset
        return [(t, b + o) for t, o in zip(self._timestamps, self._offsets)]

    def maybe_append(self, timestamp: int, offset: int) -> bool:
        """Add an entry if `timestamp` is a new maximum; True when the index is full afterwards."""
        if not self._loaded:
            self._ensure_loaded()
        timestamps = self._timestamps
        n = len(timestamps)
        if n and timestamp <= timestamps[-1]:
            return n >= self.max_entries
        self._offsets.append(offset - self.base_offset)
        timestamps.append(timestamp)
        self.last_timestamp = timestamp
        n += 1
        if n - self._written >= _SPILL_ENTRIES:
            self._spill()
        return n >= self.max_entries

    def lookup_before(self, timestamp: int) -> int:
        """Absolute offset from which to scan for the first batch with max timestamp >= `timestamp`.

        Every batch up to an entry's offset has timestamps <= the entry's, so the last entry strictly
        below the target is a safe starting point."""
        self._ensure_loaded()
        i = bisect_left(self._timestamps, timestamp) - 1
        if i < 0:
            return self.base_offset
        return self.base_offset + self._offsets[i]

    def truncate_to(self, offset: int) -> None:
        self._ensure_loaded()
        rel = offset - self.base_offset
        keep = len(self._offsets)
        while keep and self._offsets[keep - 1] >= rel:
            keep -= 1
        self._offsets = self._offsets[:keep]
        self._timestamps = self._timestamps[:keep]
        self.last_timestamp = self._timestamps[-1] if keep else -1
        self._keep_on_disk(keep)

    def reset(self) -> None:
        self._offsets = array("q")
        self._timestamps = array("q")
        self.last_timestamp = -1
        self._loaded = True
        self._loader = None  # (a bound method of the segment: no cycle kept once loaded)
        self._keep_on_disk(0)
