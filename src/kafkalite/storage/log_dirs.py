"""The broker's log dirs on disk: their lock files, the scan at startup (partition dirs, the
clean-shutdown marker and manifest, interrupted deletes and moves), and syncing their file systems.

Used by LogManager: directory names and files, and the closing of a dir's logs at shutdown.
"""

from __future__ import annotations

import ctypes
import fcntl
import functools
import logging
import os
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from kafkalite.storage.checkpoint import LogOffsets, read_dir_checkpoints
from kafkalite.storage.config import LogConfig
from kafkalite.storage.errors import KafkaStorageError
from kafkalite.storage.log import Log
from kafkalite.storage.log_dir_move import future_partition
from kafkalite.storage.log_manifest import LogState, take_manifest, write_manifest
from kafkalite.storage.types import parse_topic_partition

log = logging.getLogger("kafkalite.storage.manager")

LOCK_FILE = ".lock"
# Kafka's marker of a clean shutdown: written last by shutdown(), removed by startup()
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
DELETE_DIR_SUFFIX = "-delete"

TopicPartition = tuple[str, int]
# a log to load from its files: (dir, partition, recovery point, log start, cleaner's first dirty
# offset, high watermark, whether the last shutdown was clean)
LoadJob = tuple[Path, TopicPartition, int, int, int, int, bool]

# a shutdown fsyncs the files of up to this many logs one by one, more with one syncfs per log dir
SYNC_EACH_LOG_UP_TO = 256


@dataclass
class DirScan:
    """What one log dir holds at startup."""

    jobs: list[LoadJob] = field(default_factory=list)  # logs to load from their files
    # logs the clean shutdown's manifest describes: (dir, partition, entry, cleaner offset)
    restores: list[tuple[Path, TopicPartition, LogState, int]] = field(default_factory=list)
    # copies of moves cut short: (future dir, partition, log dir)
    futures: list[tuple[Path, TopicPartition, Path]] = field(default_factory=list)
    clean: bool = True  # the dir had its clean-shutdown marker, or no partition at all


def scan_log_dir(d: Path, log_dir_of: dict[TopicPartition, Path]) -> DirScan:
    """Take the dir's clean-shutdown marker and manifest, remove dirs renamed for deletion, and
    list its partitions (added to `log_dir_of`; KafkaStorageError when one is in two dirs)."""
    scan = DirScan()
    marker = d / CLEAN_SHUTDOWN_FILE
    clean = marker.exists()
    # (taken either way: a manifest without its marker is stale)
    manifest = take_manifest(d)
    if clean:
        marker.unlink()
    else:
        manifest = None
        if any(parse_topic_partition(e) is not None for e in os.listdir(d)):
            scan.clean = False
    manifest = manifest or {}
    rp, hws, lso, cleaner = read_dir_checkpoints(d)
    # (the listing says which entries are directories: no stat per partition)
    for item in sorted(os.scandir(d), key=lambda e: e.name):
        entry = item.name
        state = manifest.get(entry)
        if state is None and not item.is_dir():
            continue
        path = d / entry
        if entry.endswith(DELETE_DIR_SUFFIX):
            shutil.rmtree(path, ignore_errors=True)
            continue
        ftp = future_partition(entry)
        if ftp is not None:  # a move cut short by the restart: decided once all dirs are seen
            scan.futures.append((path, ftp, d))
            continue
        tp = parse_topic_partition(entry)
        if tp is None:
            continue
        if tp in log_dir_of:
            raise KafkaStorageError(f"duplicate log directories for {tp}: {path}")
        log_dir_of[tp] = d
        if state is not None:
            scan.restores.append((path, tp, state, cleaner.get(tp, 0)))
            continue
        scan.jobs.append(
            (path, tp, rp.get(tp, 0), lso.get(tp, 0), cleaner.get(tp, 0), hws.get(tp, 0), clean)
        )
    return scan


def lock_dir(d: Path) -> int:
    """flock the dir's lock file and write this process's pid in it (named when another fails);
    answers the descriptor to keep open."""
    fd = os.open(d / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        try:
            holder = os.read(fd, 32).decode("ascii", "replace").strip()
        finally:
            os.close(fd)
        by = f"process {holder}" if holder.isdigit() else "another process"
        raise KafkaStorageError(
            f"data dir {d} is locked by {by} (another broker on the same data dir?); stop it "
            "or use --data-dir DIR"
        ) from e
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def unlock_dirs(fds: list[int]) -> None:
    for fd in fds:
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)


def sync_file_system(path: Path) -> None:
    """Write everything cached for the file system holding `path` to disk (syncfs(2); sync(2)
    where the C library has no syncfs)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        syncfs = getattr(_libc(), "syncfs", None)
        if syncfs is None:
            os.sync()
        elif syncfs(fd) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err), str(path))
    finally:
        os.close(fd)


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def finish_cut_moves(
    futures: list[tuple[Path, TopicPartition, Path]], log_dir_of: dict[TopicPartition, Path]
) -> list[LoadJob]:
    """Copies of moves whose old dir is gone (the restart came between retiring it and renaming
    the complete copy): each copy becomes the partition's log. The others resume later."""
    jobs: list[LoadJob] = []
    for path, ftp, d in futures:
        if ftp in log_dir_of:
            continue  # resumed once the logs are loaded
        final = d / f"{ftp[0]}-{ftp[1]}"
        os.rename(path, final)
        log.warning("%s: finishing a move the restart cut short: %s", final, path.name)
        log_dir_of[ftp] = d
        jobs.append((final, ftp, 0, 0, 0, 0, False))
    return jobs


def close_logs(
    logs: list[Log],
    dirs: list[Path],
    offline: set[Path],
    never_recovered: Callable[[], Iterable[Path]],
) -> set[Path]:
    """Close every log at shutdown; answers the dirs whose logs are not all durable (a log that
    failed to close, one `never_recovered`, or a failed sync). With many logs each is written
    out without an fsync of its own, then each file system is synced once (100,000 logs: one
    syncfs instead of several hundred thousand fsyncs); a few logs are fsynced one by one (a
    syncfs also writes whatever else is cached there)."""
    not_durable: set[Path] = set()
    each = len(logs) <= SYNC_EACH_LOG_UP_TO
    for lg in logs:
        try:
            lg.close(sync=each)
        except Exception:
            log.exception("failed to close %s", lg)
            not_durable.add(lg.dir.parent)
    # logs never recovered: the next start must recover them from their files
    not_durable.update(never_recovered())
    if not each:
        for d in dirs:
            if d in offline or d in not_durable:
                continue
            try:
                sync_file_system(d)
            except OSError as exc:
                log.error("could not sync the file system of %s: %s", d, exc)
                not_durable.add(d)
    return not_durable


def least_used_dir(
    dirs: list[Path], offline: set[Path], log_dir_of: dict[TopicPartition, Path]
) -> Path:
    """The online log dir holding the fewest partitions (a new log goes there)."""
    if len(dirs) == 1:
        return dirs[0]
    online = [d for d in dirs if d not in offline]
    if not online:
        raise KafkaStorageError("every log dir is offline")
    counts = {d: 0 for d in online}
    for d in log_dir_of.values():
        if d in counts:
            counts[d] += 1
    return min(online, key=lambda d: counts[d])


def write_dir_manifest(d: Path, logs: list[Log]) -> None:
    """The dir's clean-shutdown manifest of its closed logs (see log_manifest); without it the
    next start loads the logs from their files, so a failure here only costs time."""
    try:
        write_manifest(d, [lg.manifest_state() for lg in logs if lg.closed and not lg.offline])
    except OSError as exc:
        log.warning("could not write the log manifest of %s: %s", d, exc)


def offsets_of(lg: Log) -> LogOffsets:
    """What the checkpoint files keep of a log (its cleaner offset only when compacted)."""
    dirty = lg.first_dirty_offset if lg.config.compact else None
    return LogOffsets(lg.recovery_point, lg.high_watermark, lg.log_start_offset, dirty)


def offsets_of_job(job: LoadJob, config: LogConfig) -> LogOffsets:
    """A log not loaded yet: the offsets it was found with."""
    _, _, rp, lso, dirty, hw, _ = job
    return LogOffsets(rp, hw, lso, dirty if config.compact else None)
