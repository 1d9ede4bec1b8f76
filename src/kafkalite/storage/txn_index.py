"""TransactionIndex: a segment's `.txnindex` file — the aborted transactions whose abort marker lies in
that segment, as Kafka writes them (34-byte entries: version, producer id, first, last, last stable offset).

Kept in memory per segment (they are few), appended on each abort marker, cut on truncation; a missing
or damaged file reads as empty and the Log rebuilds it by replaying the batch headers.
"""

from __future__ import annotations

import logging
import os
import struct
from pathlib import Path
from typing import NamedTuple

from kafkalite.storage.file_cache import OpenFile, process_file_cache, read_file

log = logging.getLogger("kafkalite.storage.log")

TXN_INDEX_SUFFIX = ".txnindex"
_ENTRY = struct.Struct(
    ">hqqqq"
)  # version, producer id, first offset, last offset, last stable offset
ENTRY_SIZE = _ENTRY.size  # 34
_VERSION = 0


class AbortedTxn(NamedTuple):
    """An aborted transaction of one producer: its data spans [first_offset, last_offset] (the last
    is the abort marker); `last_stable_offset` was the partition's LSO when the marker was written."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TransactionIndex:
    """The aborted transactions of one segment, ordered by their marker's offset."""

    __slots__ = ("_cache", "_dirty", "_entries", "_fh", "path")

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh: OpenFile | None = None  # from the process's FileCache, opened by an append
        self._cache = process_file_cache()
        self._dirty = False
        self._entries: list[AbortedTxn] | None = None  # loaded on first use

    def known_empty(self) -> None:
        """The file is known not to exist (its directory was just listed): nothing to read."""
        if self._entries is None and self._fh is None:
            self._entries = []

    # -- reading ----------------------------------------------------------------------------------
    def entries(self) -> list[AbortedTxn]:
        if self._entries is None:
            self._entries = self._load()
        return self._entries

    def _load(self) -> list[AbortedTxn]:
        try:
            data = read_file(self.path)
        except FileNotFoundError:
            return []
        except OSError as exc:
            log.warning("cannot read %s (it will be rebuilt): %s", self.path, exc)
            return []
        out: list[AbortedTxn] = []
        whole = len(data) - len(data) % ENTRY_SIZE
        for pos in range(0, whole, ENTRY_SIZE):
            version, pid, first, last, lso = _ENTRY.unpack_from(data, pos)
            if version != _VERSION or first > last or (out and last <= out[-1].last_offset):
                log.warning(
                    "%s: damaged entry at byte %d; keeping the %d before it",
                    self.path,
                    pos,
                    len(out),
                )
                break
            out.append(AbortedTxn(pid, first, last, lso))
        if len(out) * ENTRY_SIZE != len(data):
            self._rewrite(out)
        return out

    def collect(self, fetch_offset: int, upper_bound: int) -> tuple[list[AbortedTxn], bool]:
        """Entries overlapping [fetch_offset, upper_bound), and whether the search is complete (an
        entry whose LSO passed the bound: no later segment can hold an overlapping one)."""
        out = []
        for e in self.entries():
            if e.last_offset >= fetch_offset and e.first_offset < upper_bound:
                out.append(e)
            if e.last_stable_offset >= upper_bound:
                return out, True
        return out, False

    # -- writing ----------------------------------------------------------------------------------
    def append(self, entry: AbortedTxn) -> bool:
        """Add an entry; False (and nothing written) when one for this marker is already there — the
        replay after a restart may meet markers the file already holds."""
        entries = self.entries()
        if entries and entry.last_offset <= entries[-1].last_offset:
            return False
        entries.append(entry)
        fh = self._fh if self._fh is not None else self._cache.open(self)
        os.write(fh.fd, _ENTRY.pack(_VERSION, *entry))
        self._dirty = True
        return True

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose marker is at or past `offset`."""
        entries = self.entries()
        kept = [e for e in entries if e.last_offset < offset]
        if len(kept) != len(entries):
            self._entries = kept
            self._rewrite(kept)

    def reset(self) -> None:
        self.truncate_to(-1)

    def _rewrite(self, entries: list[AbortedTxn]) -> None:
        self.close()
        if not entries:
            self.path.unlink(missing_ok=True)
            return
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_bytes(b"".join(_ENTRY.pack(_VERSION, *e) for e in entries))
        os.replace(tmp, self.path)

    def _open_fd(self) -> int:
        return os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def flush(self, *, sync: bool = True) -> None:
        if self._dirty and sync:
            fh = self._fh if self._fh is not None else self._cache.open(self)
            os.fsync(fh.fd)
            self._dirty = False

    def rename(self, path: Path) -> None:
        if self.path.exists():
            os.rename(self.path, path)
        self.path = path

    def close(self) -> None:
        self._cache.forget(self)

    def delete(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)
