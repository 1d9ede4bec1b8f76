"""LogManager: the broker's log directories — loading (recovery) at startup, creating and deleting
partition logs, per-topic config overrides, checkpoints, and the retention/flush/cleaner threads.

Directory names are `<topic>-<partition>`; checkpoints and topic overrides use Kafka's file formats/names.
"""

from __future__ import annotations

import ctypes
import fcntl
import functools
import gc
import logging
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

from kafkalite.storage.checkpoint import (
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    OffsetCheckpointFile,
)
from kafkalite.storage.cleaner import LogCleaner
from kafkalite.storage.config import LogConfig
from kafkalite.storage.errors import (
    InvalidConfig,
    KafkaStorageError,
    LogClosed,
    LogDirNotFound,
    LogDirOffline,
)
from kafkalite.storage.file_cache import default_capacity, process_file_cache
from kafkalite.storage.latency import LatencyHistogram
from kafkalite.storage.log import Log
from kafkalite.storage.log_dir_move import (
    FUTURE_DIR_SUFFIX,
    ReplicaMove,
    RetiredSegments,
    future_dir,
    future_partition,
)
from kafkalite.storage.log_manifest import LogState, take_manifest, write_manifest
from kafkalite.storage.types import MIN_FD_GRACE_MS, now_ms, parse_topic_partition

log = logging.getLogger(__name__)

TOPIC_CONFIG_DIR = "topic-configs"
LOCK_FILE = ".lock"
# Kafka's marker of a clean shutdown: written last by shutdown(), removed by startup()
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
DELETE_DIR_SUFFIX = "-delete"

TopicPartition = tuple[str, int]
# a log to load from its files: (dir, partition, recovery point, log start, cleaner's first dirty
# offset, high watermark, whether the last shutdown was clean)
_LoadJob = tuple[Path, TopicPartition, int, int, int, int, bool]


class _Offsets(NamedTuple):
    """What the offset checkpoint files hold for one log (`first_dirty` only when compacted)."""

    recovery_point: int
    high_watermark: int
    log_start: int
    first_dirty: int | None

    @classmethod
    def of(cls, lg: Log) -> _Offsets:
        dirty = lg.first_dirty_offset if lg.config.compact else None
        return cls(lg.recovery_point, lg.high_watermark, lg.log_start_offset, dirty)

    @classmethod
    def of_job(cls, job: _LoadJob, config: LogConfig) -> _Offsets:
        """A log not loaded yet: the offsets it was found with."""
        _, _, rp, lso, dirty, hw, _ = job
        return cls(rp, hw, lso, dirty if config.compact else None)


# a shutdown fsyncs the files of up to this many logs one by one, more with one syncfs per log dir
SYNC_EACH_LOG_UP_TO = 256

# Kafka's producer.id.expiration.ms default: an idempotent producer silent this long is forgotten
PRODUCER_ID_EXPIRATION_MS = 86_400_000


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


class _Periodic(threading.Thread):
    def __init__(
        self, name: str, interval_ms: int, fn: Callable[[], object], stop: threading.Event
    ) -> None:
        super().__init__(name=name, daemon=True)
        self.interval = max(interval_ms, 1) / 1000.0
        self.fn = fn
        self.stop_event = stop

    def run(self) -> None:
        while not self.stop_event.wait(self.interval):
            try:
                self.fn()
            except Exception:
                log.exception("background task %s failed", self.name)


class LogManager:
    """All partition logs of one broker, across its log dirs."""

    def __init__(
        self,
        log_dirs: list[Path] | list[str],
        default_config: LogConfig | None = None,
        *,
        recovery_threads: int = 1,
        retention_check_interval_ms: int = 300_000,
        flush_check_interval_ms: int = 1000,
        checkpoint_interval_ms: int = 60_000,
        cleaner_enable: bool = True,
        cleaner_backoff_ms: int = 15_000,
        file_delete_check_interval_ms: int = 1000,
        clock: Callable[[], int] = now_ms,
        open_files_max: int | None = None,
    ) -> None:
        if not log_dirs:
            raise ValueError("at least one log dir is required")
        self.log_dirs = [Path(d) for d in log_dirs]
        # dirs that failed (a full disk, an I/O error): their logs serve nothing until a restart
        self.offline_dirs: set[Path] = set()
        self.default_config = default_config if default_config is not None else LogConfig()
        self.recovery_threads = recovery_threads
        self.retention_check_interval_ms = retention_check_interval_ms
        self.flush_check_interval_ms = flush_check_interval_ms
        self.checkpoint_interval_ms = checkpoint_interval_ms
        self.cleaner_enable = cleaner_enable
        self.cleaner_backoff_ms = cleaner_backoff_ms
        self.file_delete_check_interval_ms = file_delete_check_interval_ms
        self.clock = clock
        # segment and index files kept open at once (kafkalite.log.open.files.max; None or <= 0:
        # sized from the soft RLIMIT_NOFILE); the cache is the process's, shared by its logs
        self.file_cache = process_file_cache()
        self.file_cache.configure(
            open_files_max
            if open_files_max is not None and open_files_max > 0
            else default_capacity()
        )
        self.cleaner = LogCleaner(clock)
        # how long each log flush (fsync) took, over every log of this manager (LogFlushStats)
        self.flush_times = LatencyHistogram()
        self._lock = threading.RLock()
        self._checkpoint_lock = threading.Lock()
        self._logs: dict[TopicPartition, Log] = {}
        self._log_dir_of: dict[TopicPartition, Path] = {}
        self._topic_overrides: dict[str, dict[str, str]] = {}
        # topic -> (its overrides dict, the default config, the LogConfig built from both): valid
        # while both are the same objects (overrides are replaced on change, never edited in place)
        self._config_cache: dict[str, tuple[dict[str, str] | None, LogConfig, LogConfig]] = {}
        self._lock_fds: list[int] = []
        # called (on the failing thread) once per log dir that goes offline: the broker tells its
        # controller (cluster mode) and stops fetching the dir's partitions
        self.dir_failure_listeners: list[Callable[[Path], None]] = []
        self._pending_dir_deletes: list[tuple[int, Path, Log | RetiredSegments]] = []
        # AlterReplicaLogDirs: logs being copied to another dir, and the dirs asked for partitions
        # not created yet (Kafka's preferred log dirs)
        self._moves: dict[TopicPartition, ReplicaMove] = {}
        self._preferred_dirs: dict[TopicPartition, Path] = {}
        self.move_interval_ms = 100
        # taken by whoever starts, cancels or finishes a move, never under a log's lock (a log's
        # I/O failure takes _lock while holding its own)
        self._move_lock = threading.Lock()
        self.last_shutdown_clean = True  # every log dir had the clean-shutdown marker at startup
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._started = False
        # logs whose recovery `startup` left for later (`load_later`): their jobs until loaded, and
        # those being loaded right now (by the loading thread, or out of turn by a caller)
        self._later: dict[TopicPartition, _LoadJob] = {}
        self._loading_now: set[TopicPartition] = set()
        self._loaded = threading.Condition(self._lock)

    # -- startup --------------------------------------------------------------------------------
    def startup(
        self,
        later: Callable[[TopicPartition], bool] | None = None,
        later_from: int = 1,
    ) -> None:
        """Lock the dirs, finish interrupted deletes, load and recover every log (in parallel).

        With `later`, the logs it picks that need recovery from their files (a crash: no manifest)
        are left for `load_later`, when there are at least `later_from` of them: the broker then
        serves the others, and these one by one as they are recovered. Until then each keeps its
        checkpointed offsets, and asking for one (get_or_create_log, delete_log) loads it at once."""
        # loading makes millions of objects that live as long as the broker: the collector's full
        # passes over them while they are made cost more than the loading itself (100,000 logs)
        enabled = gc.isenabled()
        gc.disable()
        try:
            self._startup(later, later_from)
        finally:
            if enabled:
                gc.enable()

    def _startup(self, later: Callable[[TopicPartition], bool] | None, later_from: int) -> None:
        jobs: list[_LoadJob] = []
        restores: list[tuple[Path, TopicPartition, LogState, int]] = []
        futures: list[tuple[Path, TopicPartition, Path]] = []
        for d in self.log_dirs:
            d.mkdir(parents=True, exist_ok=True)
            self._lock_dir(d)
            marker = d / CLEAN_SHUTDOWN_FILE
            clean = marker.exists()
            # (taken either way: a manifest without its marker is stale)
            manifest = take_manifest(d)
            if clean:
                marker.unlink()
            else:
                manifest = None
                if any(parse_topic_partition(e) is not None for e in os.listdir(d)):
                    self.last_shutdown_clean = False
            manifest = manifest or {}
            rp = OffsetCheckpointFile(d / RECOVERY_POINT_CHECKPOINT).read()
            hws = OffsetCheckpointFile(d / REPLICATION_OFFSET_CHECKPOINT).read()
            lso = OffsetCheckpointFile(d / LOG_START_OFFSET_CHECKPOINT).read()
            cleaner = OffsetCheckpointFile(d / CLEANER_OFFSET_CHECKPOINT).read()
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
                if ftp is not None:  # a move cut short by the restart: decided below
                    futures.append((path, ftp, d))
                    continue
                tp = parse_topic_partition(entry)
                if tp is None:
                    continue
                if tp in self._log_dir_of:
                    raise KafkaStorageError(f"duplicate log directories for {tp}: {path}")
                self._log_dir_of[tp] = d
                if state is not None:
                    restores.append((path, tp, state, cleaner.get(tp, 0)))
                    continue
                jobs.append(
                    (
                        path, tp, rp.get(tp, 0), lso.get(tp, 0), cleaner.get(tp, 0),
                        hws.get(tp, 0), clean,
                    )
                )  # fmt: skip
        for path, ftp, d in futures:
            if ftp in self._log_dir_of:
                continue  # resumed once the logs are loaded
            # the move had retired the old dir (deleted above) but not yet renamed its complete
            # copy: the copy is the partition's log now
            final = d / f"{ftp[0]}-{ftp[1]}"
            os.rename(path, final)
            log.warning("%s: finishing a move the restart cut short: %s", final, path.name)
            self._log_dir_of[ftp] = d
            jobs.append((final, ftp, 0, 0, 0, 0, False))
        self._load_topic_configs()

        # after a clean shutdown every log is taken up from the manifest, opening no file
        restored = 0
        for path, tp, state, dirty in restores:
            try:
                restored_log = Log.restore(path, self.topic_config(tp[0]), state)
                self._logs[tp] = self._adopt(restored_log, dirty)
                restored += 1
            except ValueError as exc:
                log.warning(
                    "%s: manifest entry unusable (%s); loading it from its files", path, exc
                )
                jobs.append((path, tp, state.log_end, state.log_start, dirty, state.high_watermark,
                             True))  # fmt: skip
        if later is not None:  # (a log whose move to another dir resumes below is loaded now)
            moving = {ftp for _, ftp, _ in futures}
            picked = [job for job in jobs if later(job[1]) and job[1] not in moving]
            if picked and len(picked) >= later_from:
                self._later = {job[1]: job for job in picked}
                jobs = [job for job in jobs if job[1] not in self._later]
        workers = max(1, self.recovery_threads)
        if workers == 1 or len(jobs) == 1:  # (one thread: this one, with no hand-offs per log)
            self._logs.update(map(self._load_job, jobs))
        elif jobs:
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="log-recovery") as ex:
                for tp, lg in ex.map(self._load_job, jobs):
                    self._logs[tp] = lg
        self._started = True
        for path, ftp, d in futures:
            if path.exists():
                self._resume_move(path, ftp, d)
        self.checkpoint()
        scanned = sum(lg.recovery.segments_scanned for lg in self._logs.values())
        cut = sum(lg.recovery.bytes_truncated for lg in self._logs.values())
        dropped = sum(lg.recovery.segments_dropped for lg in self._logs.values())
        log.info(
            "loaded %d logs (%d from the clean-shutdown manifest) from %s; last shutdown %s; "
            "recovery scanned %d segments, truncated %d bytes, dropped %d segments%s",
            len(self._logs),
            restored,
            ", ".join(map(str, self.log_dirs)),
            "was clean" if self.last_shutdown_clean else "was NOT clean (crash or kill)",
            scanned,
            cut,
            dropped,
            f"; {len(self._later)} more are recovered while the broker serves"
            if self._later
            else "",
        )

    def _adopt(self, lg: Log, dirty: int) -> Log:
        lg.clock = self.clock
        lg.flush_times = self.flush_times
        lg.io_error = self._log_dir_failed
        lg.first_dirty_offset = max(lg.log_start_offset, min(dirty, lg.log_end_offset))
        return lg

    def _load_job(self, job: _LoadJob) -> tuple[TopicPartition, Log]:
        path, tp, rp, lso, dirty, hw, clean = job
        lg = Log.open(
            path,
            self.topic_config(tp[0]),
            recovery_point=rp,
            log_start_offset=lso,
            high_watermark=hw,
            clean_shutdown=clean,
        )
        return tp, self._adopt(lg, dirty)

    # -- logs recovered while the broker serves -------------------------------------------------
    def is_loading(self, topic: str, partition: int) -> bool:
        """The partition's log is on disk here but not recovered yet (see `startup`'s `later`)."""
        tp = (topic, partition)
        return tp in self._later or tp in self._loading_now

    def loading_partitions(self) -> set[TopicPartition]:
        with self._lock:
            return set(self._later) | self._loading_now

    def _load_later_one(self, tp: TopicPartition) -> Log | None:
        """Recover one log left for later, now (waiting if another thread is at it); None when it
        is not one of them. On failure its job stays, so nothing takes its directory for empty."""
        with self._lock:
            while tp in self._loading_now:
                self._loaded.wait()
            job = self._later.get(tp)
            if job is None:
                return self._logs.get(tp)
            if self._log_dir_of.get(tp) in self.offline_dirs:
                raise LogDirOffline(f"log dir of {tp[0]}-{tp[1]} is offline")
            self._loading_now.add(tp)
        try:
            _, lg = self._load_job(job)
            with self._lock:
                self._logs[tp] = lg
                del self._later[tp]
            return lg
        finally:
            with self._lock:
                self._loading_now.discard(tp)
                self._loaded.notify_all()

    def load_later(
        self,
        loaded: Callable[[list[Log]], object],
        done: Callable[[], object] | None = None,
        batch: int = 1,
    ) -> threading.Thread:
        """Recover the logs `startup` left for later on a thread of their own, in the order their
        directories sort; `loaded` gets them (`batch` at a time, on that thread) as soon as they
        serve, and `done` is called once none is left. A log that cannot be read takes its dir
        offline, as at any other time; shutdown stops the thread between two logs."""

        def run() -> None:
            started = time.monotonic()
            ready: list[Log] = []
            count = 0
            for tp in sorted(self._later):
                if self._stop.is_set():
                    return
                d = self._log_dir_of.get(tp)
                if d in self.offline_dirs:
                    continue
                try:
                    was_later = tp in self._later
                    lg = self._load_later_one(tp)
                except OSError as exc:
                    if d is not None:
                        self.fail_log_dir(d, exc, f"{tp[0]}-{tp[1]}")
                    continue
                except Exception:
                    log.exception("cannot recover the log of %s-%d; it stays offline", *tp)
                    continue
                if lg is None or not was_later:
                    continue  # (deleted, or loaded out of turn by whoever asked for it)
                ready.append(lg)
                count += 1
                if len(ready) >= batch:
                    loaded(ready)
                    ready = []
            if ready:
                loaded(ready)
            log.info(
                "recovered the other %d logs in %.1f s while serving", count,
                time.monotonic() - started,
            )  # fmt: skip
            if done is not None:
                done()

        t = threading.Thread(target=run, name="kafkalite-log-recovery", daemon=True)
        t.start()
        self._threads.append(t)
        return t

    def _lock_dir(self, d: Path) -> None:
        """flock the dir's lock file and write this process's pid in it (named when another fails)."""
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
        self._lock_fds.append(fd)

    # -- topic configs --------------------------------------------------------------------------
    def _config_dir(self) -> Path:
        return self.log_dirs[0] / TOPIC_CONFIG_DIR

    def _load_topic_configs(self) -> None:
        cdir = self._config_dir()
        if not cdir.is_dir():
            return
        for p in cdir.glob("*.properties"):
            props: dict[str, str] = {}
            for line in p.read_text().splitlines():
                line = line.strip()
                if not line or line.startswith("#") or "=" not in line:
                    continue
                k, _, v = line.partition("=")
                props[k.strip()] = v.strip()
            try:
                LogConfig.from_properties(props, self.default_config)
            except InvalidConfig as e:
                log.warning("ignoring invalid overrides for topic %s: %s", p.stem, e)
                continue
            self._topic_overrides[p.stem] = props

    def _persist_topic_config(self, topic: str) -> None:
        cdir = self._config_dir()
        cdir.mkdir(parents=True, exist_ok=True)
        path = cdir / f"{topic}.properties"
        props = self._topic_overrides.get(topic)
        if not props:
            path.unlink(missing_ok=True)
            return
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text("".join(f"{k}={v}\n" for k, v in sorted(props.items())))
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)

    def topic_config_overrides(self, topic: str) -> dict[str, str]:
        with self._lock:
            return dict(self._topic_overrides.get(topic, {}))

    def topic_config(self, topic: str) -> LogConfig:
        """The topic's LogConfig (its overrides over the default), built once per change: creating
        thousands of partitions of a topic must not parse its properties for each."""
        with self._lock:
            overrides = self._topic_overrides.get(topic)
            cached = self._config_cache.get(topic)
            if cached is not None and cached[0] is overrides and cached[1] is self.default_config:
                return cached[2]
            cfg = LogConfig.from_properties(overrides or {}, self.default_config)
            self._config_cache[topic] = (overrides, self.default_config, cfg)
            return cfg

    def set_topic_config(self, topic: str, overrides: Mapping[str, str]) -> LogConfig:
        """Replace the topic's overrides (AlterConfigs); applies to its logs and persists."""
        cfg = LogConfig.from_properties(overrides, self.default_config)
        with self._lock:
            self._topic_overrides[topic] = {k: str(v) for k, v in overrides.items()}
            self._persist_topic_config(topic)
            for (t, _), lg in self._logs.items():
                if t == topic:
                    lg.update_config(cfg)
        return cfg

    def update_topic_config(self, topic: str, changes: Mapping[str, str | None]) -> LogConfig:
        """IncrementalAlterConfigs: set (value) or remove (None) individual overrides."""
        with self._lock:
            current = dict(self._topic_overrides.get(topic, {}))
            for k, v in changes.items():
                if v is None:
                    current.pop(k, None)
                else:
                    current[k] = v
            return self.set_topic_config(topic, current)

    def update_default_config(self, config: LogConfig) -> None:
        with self._lock:
            self.default_config = config
            for (t, _), lg in self._logs.items():
                lg.update_config(self.topic_config(t))

    # -- logs -----------------------------------------------------------------------------------
    def get_log(self, topic: str, partition: int) -> Log | None:
        return self._logs.get((topic, partition))

    def logs(self) -> list[Log]:
        return list(self._logs.values())

    def partitions(self) -> dict[TopicPartition, Log]:
        return dict(self._logs)

    def topics(self) -> set[str]:
        return {t for t, _ in self._logs}

    def _pick_dir(self) -> Path:
        if len(self.log_dirs) == 1:
            return self.log_dirs[0]
        online = [d for d in self.log_dirs if d not in self.offline_dirs]
        if not online:
            raise KafkaStorageError("every log dir is offline")
        counts = {d: 0 for d in online}
        for d in self._log_dir_of.values():
            if d in counts:
                counts[d] += 1
        return min(online, key=lambda d: counts[d])

    def _log_dir_failed(self, failed: Log, exc: OSError) -> None:
        if failed.dir.name.endswith(FUTURE_DIR_SUFFIX):  # a copy being moved: its target failed
            d = failed.dir.parent
        else:
            d = self._log_dir_of.get((failed.topic, failed.partition), failed.dir.parent)
        self.fail_log_dir(d, exc, failed.dir.name, failed)

    def fail_log_dir(self, d: Path, exc: OSError, where: str, failed: Log | None = None) -> None:
        """An I/O error in `d` (at `where`): the whole log dir goes offline, as Kafka's does. Its
        logs close without flushing and answer KAFKA_STORAGE_ERROR; the other dirs carry on, and no
        clean-shutdown marker is written there (the next start recovers its active segments)."""
        with self._lock:
            first = d not in self.offline_dirs
            self.offline_dirs.add(d)
            victims = [
                self._logs[tp]
                for tp, ld in self._log_dir_of.items()
                if ld == d and tp in self._logs
            ]
            # moves into the failed dir stop; a log moving out of it goes offline with its copy
            for tp, mv in list(self._moves.items()):
                if mv.dest == d or self._log_dir_of.get(tp) == d:
                    del self._moves[tp]
                    victims.append(mv.future)
        if failed is not None and failed not in victims:
            victims.append(failed)
        for lg in victims:
            lg.go_offline()
        if first:
            log.error(
                "log dir %s is offline: %s on %s (%s). Its %d partitions answer KAFKA_STORAGE_ERROR "
                "until the broker restarts; other log dirs keep serving. Free space or fix the disk, "
                "then restart: the logs there are recovered from their last flushed state.",
                d, type(exc).__name__, where, exc.strerror or exc, len(victims),
            )  # fmt: skip
            for fn in list(self.dir_failure_listeners):
                try:
                    fn(d)
                except Exception:
                    log.exception("log dir failure listener failed")

    def get_or_create_log(
        self,
        topic: str,
        partition: int,
        config_overrides: Mapping[str, str] | None = None,
        topic_id: uuid.UUID | None = None,
    ) -> Log:
        """The partition's log, created (with the topic's overrides, persisted) if missing."""
        tp = (topic, partition)
        if tp in self._later:  # on disk, not recovered yet: that log, now (never a new one)
            waited = self._load_later_one(tp)
            if waited is not None:
                if config_overrides:
                    self.set_topic_config(topic, config_overrides)
                return waited
        with self._lock:
            existing = self._logs.get(tp)
            if existing is not None:
                return existing
            if config_overrides:
                self.set_topic_config(topic, config_overrides)
            d = self._log_dir_of.get(tp) or self._preferred_dirs.pop(tp, None) or self._pick_dir()
            if d in self.offline_dirs:
                raise KafkaStorageError(f"log dir {d} of {topic}-{partition} is offline")
            lg = Log.create(d / f"{topic}-{partition}", self.topic_config(topic), topic_id)
            lg.clock = self.clock
            lg.flush_times = self.flush_times
            lg.io_error = self._log_dir_failed
            self._logs[tp] = lg
            self._log_dir_of[tp] = d
            return lg

    def delete_log(self, topic: str, partition: int) -> bool:
        """Stop the partition's log and rename its dir `<name>.<uuid>-delete`; its files are closed
        and removed in the background after file.delete.delay.ms (in-flight reads stay valid)."""
        tp = (topic, partition)
        if tp in self._later:  # not recovered yet: recovered first, then deleted as any log is
            self._load_later_one(tp)
        with self._move_lock, self._lock:
            lg = self._logs.pop(tp, None)
            d = self._log_dir_of.pop(tp, None)
            mv = self._moves.pop(tp, None)
        if mv is not None:
            mv.abort()
        if lg is None:
            return False
        lg.mark_deleted()
        target = lg.dir.with_name(f"{lg.dir.name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}")
        try:
            os.rename(lg.dir, target)
        except FileNotFoundError:
            lg.close(flush=False)
            return True
        due = self.clock() + max(lg.config.file_delete_delay_ms, MIN_FD_GRACE_MS)
        with self._lock:
            self._pending_dir_deletes.append((due, target, lg))
        if d is not None:
            self.checkpoint()
        return True

    def delete_topic(self, topic: str) -> list[int]:
        """Delete every partition log of `topic` and its config overrides; returns the partitions."""
        with self._lock:
            parts = sorted(
                {p for t, p in self._logs if t == topic} | {p for t, p in self._later if t == topic}
            )
        for p in parts:
            self.delete_log(topic, p)
        with self._lock:
            if self._topic_overrides.pop(topic, None) is not None:
                self._persist_topic_config(topic)
        return parts

    # -- periodic work --------------------------------------------------------------------------
    def cleanup_logs(self, now: int | None = None) -> int:
        """Retention for every log; returns segments deleted."""
        t = self.clock() if now is None else now
        deleted = 0
        for lg in self.logs():
            deleted += lg.delete_old_segments(t)
            lg.remove_expired_producers(t, PRODUCER_ID_EXPIRATION_MS)
        return deleted

    def flush_dirty_logs(self, now: int | None = None) -> int:
        """Flush logs whose flush.ms (or flush.messages) is due; returns how many were flushed."""
        t = self.clock() if now is None else now
        n = 0
        # (one cheap test over every log first: a broker may hold 100,000, most of them idle)
        for lg in [lg for lg in list(self._logs.values()) if lg.unflushed_messages > 0]:
            if lg.closed:
                continue
            if lg.needs_flush or lg.flush_due(t):
                lg.flush()
                n += 1
        return n

    def remove_deleted_files(self, now: int | None = None, *, force: bool = False) -> int:
        t = self.clock() if now is None else now
        logs = list(self._logs.values())
        n = sum(lg.remove_deleted_segments(t, force=force) for lg in logs if lg.has_pending_deletes)
        with self._lock:
            ready = [(p, lg) for due, p, lg in self._pending_dir_deletes if force or due <= t]
            self._pending_dir_deletes = [
                e for e in self._pending_dir_deletes if not (force or e[0] <= t)
            ]
        for p, lg in ready:
            lg.close(flush=False)
            shutil.rmtree(p, ignore_errors=True)
        return n + len(ready)

    def run_cleaner_once(self, now: int | None = None, *, force: bool = False) -> int:
        """One compaction pass over the compacted logs; returns how many logs were cleaned."""
        n = 0
        for lg in self.logs():
            if lg.config.compact and not lg.closed:
                stats = self.cleaner.clean(lg, now=now, force=force)
                if stats is not None and not stats.aborted:
                    n += 1
        return n

    def checkpoint(self) -> None:
        """Write recovery-point, replication-offset (high watermark), log-start-offset and
        cleaner-offset checkpoints for every dir."""
        with self._checkpoint_lock:
            with self._lock:
                items = [
                    (self._log_dir_of.get(tp), tp, _Offsets.of(lg)) for tp, lg in self._logs.items()
                ]
                # a log not recovered yet keeps the offsets it was checkpointed with
                items += [
                    (self._log_dir_of.get(tp), tp, _Offsets.of_job(job, self.topic_config(tp[0])))
                    for tp, job in self._later.items()
                    if tp not in self._logs
                ]
            for d in self.log_dirs:
                if d in self.offline_dirs:
                    continue  # its checkpoints stay as they were: the next start recovers from them
                try:
                    self._checkpoint_dir(d, [(tp, o) for ld, tp, o in items if ld == d])
                except OSError as exc:
                    self.fail_log_dir(d, exc, "its checkpoint files")

    def _checkpoint_dir(self, d: Path, mine: list[tuple[TopicPartition, _Offsets]]) -> None:
        OffsetCheckpointFile(d / RECOVERY_POINT_CHECKPOINT).write(
            {tp: o.recovery_point for tp, o in mine}
        )
        OffsetCheckpointFile(d / REPLICATION_OFFSET_CHECKPOINT).write(
            {tp: o.high_watermark for tp, o in mine}
        )
        OffsetCheckpointFile(d / LOG_START_OFFSET_CHECKPOINT).write(
            {tp: o.log_start for tp, o in mine}
        )
        OffsetCheckpointFile(d / CLEANER_OFFSET_CHECKPOINT).write(
            {tp: o.first_dirty for tp, o in mine if o.first_dirty is not None}
        )

    def start_background(self) -> None:
        """Start the retention, flush, checkpoint, file-delete and cleaner threads."""
        if self._threads:
            return
        self._stop.clear()
        tasks: list[tuple[str, int, Callable[[], object]]] = [
            ("kafkalite-log-retention", self.retention_check_interval_ms, self.cleanup_logs),
            ("kafkalite-log-flusher", self.flush_check_interval_ms, self.flush_dirty_logs),
            ("kafkalite-log-checkpoint", self.checkpoint_interval_ms, self.checkpoint),
            ("kafkalite-log-dir-mover", self.move_interval_ms, self.run_moves_once),
            (
                "kafkalite-file-deleter",
                self.file_delete_check_interval_ms,
                self.remove_deleted_files,
            ),
        ]
        if self.cleaner_enable:
            tasks.append(("kafkalite-log-cleaner", self.cleaner_backoff_ms, self.run_cleaner_once))
        for name, interval, fn in tasks:
            t = _Periodic(name, interval, fn, self._stop)
            t.start()
            self._threads.append(t)

    def shutdown(self) -> None:
        """Stop background threads, flush and close every log, write final checkpoints."""
        self._stop.set()
        for t in self._threads:
            t.join(timeout=30)
        self._threads = []
        with self._lock:
            moves, self._moves = list(self._moves.values()), {}
        for mv in moves:  # an unfinished copy is kept: the next start resumes it
            mv.future.close()
        not_durable: set[Path] = set()  # dirs with a log that failed to close, or a failed sync
        # with many logs each is written out without an fsync of its own, then each file system is
        # synced once (100,000 logs: one syncfs instead of several hundred thousand fsyncs); a
        # few logs are fsynced one by one (a syncfs also writes whatever else is cached there)
        logs = self.logs()
        each = len(logs) <= SYNC_EACH_LOG_UP_TO
        for lg in logs:
            try:
                lg.close(sync=each)
            except Exception:
                log.exception("failed to close %s", lg)
                not_durable.add(lg.dir.parent)
        with self._lock:  # logs never recovered: the next start must recover them from their files
            not_durable.update(d for tp in self._later if (d := self._log_dir_of.get(tp)))
        if not each:
            for d in self.log_dirs:
                if d in self.offline_dirs or d in not_durable:
                    continue
                try:
                    sync_file_system(d)
                except OSError as exc:
                    log.error("could not sync the file system of %s: %s", d, exc)
                    not_durable.add(d)
        if self._started:
            self.checkpoint()
        self.remove_deleted_files(force=True)
        if self._started:  # every log closed and checkpointed: the next start had nothing to fear
            for d in self.log_dirs:
                if d not in self.offline_dirs and d not in not_durable:
                    self._write_manifest(d)
                    (d / CLEAN_SHUTDOWN_FILE).touch()
        for fd in self._lock_fds:
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)
        self._lock_fds = []
        self._started = False

    def _write_manifest(self, d: Path) -> None:
        """The dir's clean-shutdown manifest (see log_manifest); without it the next start loads
        the logs from their files, so a failure here only costs time."""
        with self._lock:
            logs = [lg for tp, lg in self._logs.items() if self._log_dir_of.get(tp) == d]
        try:
            write_manifest(d, [lg.manifest_state() for lg in logs if lg.closed and not lg.offline])
        except OSError as exc:
            log.warning("could not write the log manifest of %s: %s", d, exc)

    # -- moving logs between dirs (AlterReplicaLogDirs) -----------------------------------------------
    def log_dir_of(self, topic: str, partition: int) -> Path | None:
        return self._log_dir_of.get((topic, partition))

    def moves(self) -> dict[TopicPartition, ReplicaMove]:
        """The moves in flight: partition -> its copy (the future log, its target dir)."""
        with self._lock:
            return dict(self._moves)

    def resolve_log_dir(self, path: str | Path) -> Path:
        """One of this broker's log dirs, named by an absolute path (LogDirNotFound otherwise)."""
        want = Path(path)
        for d in self.log_dirs:
            if d == want or d.resolve() == want.resolve():
                return d
        raise LogDirNotFound(f"{path} is not a log dir of this broker")

    def alter_log_dir(self, topic: str, partition: int, path: str | Path) -> bool:
        """Move the partition's log to the log dir `path` (online: a future log copies it, then
        takes its place). False when the log is not here: the dir is remembered for its creation.
        Asking for its current dir cancels a move in flight."""
        tp = (topic, partition)
        dest = self.resolve_log_dir(path)
        if dest in self.offline_dirs:
            raise KafkaStorageError(f"log dir {dest} is offline")
        with self._move_lock:
            return self._alter_log_dir(tp, dest)

    def _alter_log_dir(self, tp: TopicPartition, dest: Path) -> bool:
        topic, partition = tp
        with self._lock:
            src = self._logs.get(tp)
            if src is None:
                self._preferred_dirs[tp] = dest
                return False
            if src.offline:
                raise KafkaStorageError(f"log {src.dir.name} is offline")
            current = self._moves.get(tp)
            if current is not None and current.dest == dest:
                return True  # already on its way there
            cancelled = self._moves.pop(tp, None)
            if self._log_dir_of.get(tp) != dest:
                fut = Log.open(future_dir(dest, topic, partition), src.config, src.topic_id)
                fut.clock = self.clock
                fut.flush_times = self.flush_times
                fut.io_error = self._log_dir_failed
                self._moves[tp] = ReplicaMove(src, fut, dest)
                log.info("moving %s-%d from %s to %s", topic, partition, src.dir.parent, dest)
        if cancelled is not None:
            cancelled.abort()
        return True

    def _resume_move(self, path: Path, tp: TopicPartition, dest: Path) -> None:
        """A move the restart cut short continues from what its copy had (recovered), as Kafka's."""
        src = self._logs.get(tp)
        if src is None or self._log_dir_of.get(tp) == dest:
            shutil.rmtree(path, ignore_errors=True)
            return
        fut = Log.open(path, src.config, src.topic_id)
        fut.clock = self.clock
        fut.flush_times = self.flush_times
        fut.io_error = self._log_dir_failed
        self._moves[tp] = ReplicaMove(src, fut, dest)
        log.info("resuming the move of %s-%d to %s at offset %d", *tp, dest, fut.log_end_offset)

    def run_moves_once(self, budget_bytes: int = 8 * 1024 * 1024) -> int:
        """Copy up to `budget_bytes` per move; moves that caught up take their log's place.
        Returns how many moves finished."""
        done = 0
        for tp, mv in self.moves().items():
            try:
                start = mv.bytes_copied
                caught_up = mv.copy_step()
                while not caught_up and mv.bytes_copied - start < budget_bytes:
                    caught_up = mv.copy_step()
                if caught_up and self._finish_move(tp, mv):
                    done += 1
            except (LogClosed, KafkaStorageError, OSError) as exc:
                with self._lock:
                    if self._moves.get(tp) is mv:
                        del self._moves[tp]
                log.warning("move of %s-%d to %s stopped: %s", tp[0], tp[1], mv.dest, exc)
                if not mv.future.offline:
                    mv.abort()
        return done

    def _finish_move(self, tp: TopicPartition, mv: ReplicaMove) -> bool:
        with self._move_lock:
            if self._moves.get(tp) is not mv:
                return False  # cancelled, replaced or failed meanwhile
            old_dir = mv.source.dir
            target = old_dir.with_name(f"{old_dir.name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}")
            old_segments = mv.finish(target)
            with self._lock:
                self._moves.pop(tp, None)
                self._log_dir_of[tp] = mv.dest
        due = self.clock() + max(mv.source.config.file_delete_delay_ms, MIN_FD_GRACE_MS)
        with self._lock:
            self._pending_dir_deletes.append((due, target, RetiredSegments(old_segments)))
        log.info("moved %s-%d to %s (%d bytes copied)", tp[0], tp[1], mv.dest, mv.bytes_copied)
        self.checkpoint()
        return True
