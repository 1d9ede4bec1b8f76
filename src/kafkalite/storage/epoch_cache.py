"""LeaderEpochFileCache: a partition's leader epochs and the offset each began at, kept in the
partition directory's `leader-epoch-checkpoint` (Kafka's format), for OffsetForLeaderEpoch (KIP-101/279).

Entries are strictly increasing in both epoch and start offset; truncation at either end keeps it so.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterable
from pathlib import Path

from kafkalite.storage.file_cache import read_file

log = logging.getLogger("kafkalite.storage.epoch_cache")

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
_VERSION = 0
UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1

EpochEntry = tuple[int, int]  # (epoch, start offset)


class LeaderEpochFileCache:
    """(epoch, start offset) pairs, oldest first. Thread-safe; every change is written atomically."""

    def __init__(
        self, directory: Path, entries: Iterable[EpochEntry] = (), *, new_log: bool = False
    ) -> None:
        self._dir = directory if isinstance(directory, Path) else Path(directory)
        self._lock = threading.Lock()
        self._entries: list[EpochEntry] = []
        # a new log has no file yet: while its entries all start at offset 0 (they say no more than
        # its batches, from which a lost file is rebuilt) the file is written by the log's next
        # flush or close, not at each leader change (creating 100,000 partitions: 100,000 files)
        self._defer = new_log
        self._pending = False
        for epoch, start in entries:
            self._assign_locked(epoch, start)

    @property
    def path(self) -> Path:
        return self._dir / LEADER_EPOCH_CHECKPOINT

    def load_entries(self, entries: Iterable[EpochEntry]) -> None:
        """Take entries known to be right (a clean shutdown's manifest) without writing the file."""
        with self._lock:
            for epoch, start in entries:
                self._assign_locked(epoch, start)

    # -- reading the file ------------------------------------------------------------------------
    @staticmethod
    def read_file(directory: Path) -> list[EpochEntry] | None:
        """The entries in the directory's checkpoint; None when it is missing or unreadable (a
        warning names what is wrong: the caller rebuilds the cache from the log)."""
        path = Path(directory) / LEADER_EPOCH_CHECKPOINT
        try:
            lines = read_file(path).decode().splitlines()
        except FileNotFoundError:
            return None
        except UnicodeDecodeError as exc:
            log.warning("ignoring malformed %s (%s); rebuilding it from the log", path, exc)
            return None
        except OSError as exc:
            log.warning("cannot read %s: %s; rebuilding it from the log", path, exc)
            return None
        try:
            if int(lines[0]) != _VERSION:
                raise ValueError(f"unknown version {lines[0]!r}")
            count = int(lines[1])
            entries: list[EpochEntry] = []
            for line in lines[2 : 2 + count]:
                epoch, start = line.split()
                entries.append((int(epoch), int(start)))
            if len(entries) != count:
                raise ValueError(f"expected {count} entries, found {len(entries)}")
            return entries
        except (ValueError, IndexError) as exc:
            log.warning("ignoring malformed %s (%s); rebuilding it from the log", path, exc)
            return None

    def _write_locked(self) -> None:
        if self._defer:
            if all(start == 0 for _, start in self._entries):
                self._pending = True
                return
            self._defer = False
        self._pending = False
        text = "\n".join(
            [str(_VERSION), str(len(self._entries))] + [f"{e} {s}" for e, s in self._entries]
        )
        path = self.path
        tmp = path.with_name(path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, (text + "\n").encode())
            # entries that all start at offset 0 say no more than the log's own batches do (a lost
            # file is rebuilt from them): a new partition's checkpoint costs no fsync
            if any(start > 0 for _, start in self._entries):
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)

    def flush(self) -> None:
        with self._lock:
            self._defer = False
            self._write_locked()

    def save(self) -> None:
        """Write the file now or, while the cache is deferred and its entries all start at 0 (they
        say no more than the batches), at the log's next flush or close."""
        with self._lock:
            self._write_locked()

    def write_pending(self) -> None:
        """Write the file if a deferred change is waiting (a new log's first flush or close)."""
        if self._pending:
            self.flush()

    # -- queries ---------------------------------------------------------------------------------
    def entries(self) -> list[EpochEntry]:
        return list(self._entries)

    @property
    def latest_epoch(self) -> int:
        e = self._entries
        return e[-1][0] if e else UNDEFINED_EPOCH

    @property
    def latest_entry(self) -> EpochEntry | None:
        e = self._entries
        return e[-1] if e else None

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch's answer: (the largest epoch <= `requested_epoch`, the offset where
        the next epoch starts — or the log end for the latest epoch). An epoch older than every
        entry answers (requested, the first entry's start): what came before is gone from this log.
        (-1, -1) when the epoch is newer than the latest, or the cache is empty."""
        entries = self._entries
        if not entries or requested_epoch == UNDEFINED_EPOCH:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if requested_epoch == entries[-1][0]:
            return requested_epoch, log_end_offset
        if requested_epoch > entries[-1][0]:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if requested_epoch < entries[0][0]:
            return requested_epoch, entries[0][1]
        # the last entry with epoch <= requested, and the start of the one after it
        for i in range(len(entries) - 1, -1, -1):
            if entries[i][0] <= requested_epoch:
                return entries[i][0], entries[i + 1][1]
        return UNDEFINED_EPOCH, UNDEFINED_OFFSET  # unreachable: entries[0][0] <= requested

    # -- changes ---------------------------------------------------------------------------------
    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that `epoch` began at `start_offset`; returns whether the cache changed. An epoch
        not newer than the latest is ignored; entries whose start is not below the new one are
        replaced (a new leader's epoch that starts where a previous, empty one did)."""
        with self._lock:
            changed = self._assign_locked(epoch, start_offset)
            if changed:
                self._write_locked()
            return changed

    def _assign_locked(self, epoch: int, start_offset: int) -> bool:
        if epoch < 0 or start_offset < 0:
            return False
        e = self._entries
        if e and epoch <= e[-1][0]:
            return False
        while e and e[-1][1] >= start_offset:
            e.pop()
        e.append((epoch, start_offset))
        return True

    def truncate_from_end(self, end_offset: int) -> None:
        """The log was truncated to `end_offset`: epochs that began at or after it are gone."""
        with self._lock:
            before = len(self._entries)
            self._entries = [x for x in self._entries if x[1] < end_offset]
            if len(self._entries) != before:
                self._write_locked()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at `start_offset`: drop epochs wholly below it and move the start of
        the one containing it up to `start_offset`."""
        with self._lock:
            e = self._entries
            keep_from = 0
            for i in range(len(e)):
                if e[i][1] <= start_offset:
                    keep_from = i
            if not e or (e[keep_from][1] >= start_offset and keep_from == 0):
                return
            kept = e[keep_from:]
            kept[0] = (kept[0][0], max(kept[0][1], start_offset))
            if kept != e:
                self._entries = kept
                self._write_locked()

    def clear(self) -> None:
        with self._lock:
            if self._entries:
                self._entries = []
            self._write_locked()
