"""FileCache: the process's bounded set of open segment and index files (least recently used out,
by the CLOCK approximation), so descriptors are bounded by configuration, not by partitions.

A file is an `OpenFile` handle owned by one segment or index (`owner._fh`); the cache opens it on
demand and, when full, evicts the least recently used one: the owner forgets it and the descriptor
is closed when the last reference goes. Whoever holds a handle (an append's local, a FileSlice being
sent) holds a lease: an eviction never closes a file mid-write or mid-sendfile.
"""

from __future__ import annotations

import errno
import logging
import os
import resource
import threading
from collections import OrderedDict
from typing import Protocol

log = logging.getLogger(__name__)

MIN_CAPACITY = 16
# descriptors left to everything else (sockets, checkpoints, ZooKeeper, TLS) by the default size
_RESERVED_FDS = 256
_READ_CHUNK = 1 << 16
_EMFILE_RELEASE = 32  # files closed to retry an open that failed with EMFILE / ENFILE


class OpenFile:
    """One open descriptor. `used` is the CLOCK reference bit: set by whoever uses the handle again
    (one attribute store on the hot path), cleared by the cache's eviction sweep (second chance). A
    new handle starts without it: it is at the back of the queue already."""

    __slots__ = ("fd", "used")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.used = False

    def close(self) -> None:
        fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)

    def __del__(self) -> None:
        # the last reference (cache, owner, in-flight FileSlice or append) is gone
        try:
            self.close()
        except OSError:
            pass


class FileOwner(Protocol):
    """A segment's .log file or an index file: knows how to open itself, holds its current handle."""

    _fh: OpenFile | None

    def _open_fd(self) -> int: ...


def default_capacity(soft_limit: int | None = None) -> int:
    """Half of the soft RLIMIT_NOFILE (after `_RESERVED_FDS` for the rest of the broker), at least
    MIN_CAPACITY; unlimited soft limits count as 1 << 20."""
    if soft_limit is None:
        soft_limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft_limit == resource.RLIM_INFINITY or soft_limit < 0:
        soft_limit = 1 << 20
    return max(MIN_CAPACITY, (soft_limit - _RESERVED_FDS) // 2)


class FileCache:
    """At most `capacity` files kept open by this cache (handles leased to in-flight reads and
    writes stay open until released, beyond the bound). Thread-safe; the hot path never locks:
    it uses the owner's handle when present and only calls `open` when it was evicted."""

    def __init__(self, capacity: int | None = None) -> None:
        self._lock = threading.Lock()
        self._files: OrderedDict[OpenFile, FileOwner] = OrderedDict()
        self.capacity = default_capacity() if capacity is None else max(1, capacity)
        self.opens = 0  # files opened (first opens and reopens after an eviction)
        self.evictions = 0

    def configure(self, capacity: int) -> None:
        """Resize (evicting down to the new size at once)."""
        with self._lock:
            self.capacity = max(1, capacity)
            while len(self._files) > self.capacity:
                self._evict_one()

    def __len__(self) -> int:
        return len(self._files)

    def open(self, owner: FileOwner) -> OpenFile:
        """The owner's handle, opening its file (and evicting another) if it has none."""
        with self._lock:
            fh = owner._fh
            if fh is not None:
                fh.used = True
                return fh
            while len(self._files) >= self.capacity:
                self._evict_one()
            try:
                fd = owner._open_fd()
            except OSError as e:
                # the process ran out anyway (connections, a low limit): give back some of ours
                if e.errno not in (errno.EMFILE, errno.ENFILE) or not self._files:
                    raise
                for _ in range(min(len(self._files), _EMFILE_RELEASE)):
                    self._evict_one()
                log.warning(
                    "out of file descriptors (%s) with %d log files open; closed some and retried",
                    e.strerror,
                    len(self._files),
                )
                fd = owner._open_fd()
            fh = OpenFile(fd)
            self.opens += 1
            self._files[fh] = owner
            owner._fh = fh
            return fh

    def forget(self, owner: FileOwner) -> None:
        """The owner is done with its file (closed, deleted): drop it; the descriptor closes once
        no lease holds it."""
        with self._lock:
            fh = owner._fh
            if fh is None:
                return
            owner._fh = None
            self._files.pop(fh, None)

    def _evict_one(self) -> None:
        """Caller holds the lock: drop the least recently used file, giving each recently used one
        a second chance (moved to the back with its bit cleared)."""
        files = self._files
        for _ in range(2 * len(files) + 1):
            fh, owner = files.popitem(last=False)
            if fh.used:
                fh.used = False
                files[fh] = owner
                continue
            if owner._fh is fh:
                owner._fh = None
            self.evictions += 1
            return


_PROCESS_CACHE = FileCache()


def read_file(path: str | os.PathLike[str]) -> bytes:
    """A small file's bytes, by one open and (usually) one read: no buffered or text layer, whose
    set-up costs five times the read (a restart after a crash reads three files per partition)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = []
        while True:
            chunk = os.read(fd, _READ_CHUNK)
            chunks.append(chunk)
            if len(chunk) < _READ_CHUNK:  # (a regular file reads short only at its end)
                return b"".join(chunks) if len(chunks) > 1 else chunk
    finally:
        os.close(fd)


def process_file_cache() -> FileCache:
    """The cache every LogSegment and index of this process uses (sized by the LogManager)."""
    return _PROCESS_CACHE


def raise_nofile_limit() -> tuple[int, int, int]:
    """Raise the soft RLIMIT_NOFILE to the hard limit; returns (soft before, soft after, hard)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    new = soft
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard
        if hard == resource.RLIM_INFINITY:  # an unlimited hard limit: the kernel's nr_open
            try:
                with open("/proc/sys/fs/nr_open") as f:
                    target = int(f.read().strip())
            except (OSError, ValueError):
                target = 1 << 20
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            new = target
        except (ValueError, OSError) as e:
            log.warning("cannot raise the open-files limit from %d to %d: %s", soft, target, e)
    return soft, new, hard
