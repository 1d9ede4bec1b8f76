"""LogManager: the broker's log directories — loading (recovery) at startup, creating and deleting
partition logs, per-topic config overrides, checkpoints, and the retention/flush/cleaner threads.

Its parts: log_dirs (scan, locks, shutdown syncs), topic_overrides, deferred_loads, log_dir_moves.
"""

from __future__ import annotations

import gc
import logging
import os
import shutil
import threading
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kafkalite.storage.checkpoint import write_dir_checkpoints
from kafkalite.storage.cleaner import LogCleaner
from kafkalite.storage.config import LogConfig
from kafkalite.storage.deferred_loads import DeferredLoads
from kafkalite.storage.errors import KafkaStorageError, LogDirNotFound
from kafkalite.storage.file_cache import default_capacity, process_file_cache
from kafkalite.storage.latency import LatencyHistogram
from kafkalite.storage.log import Log
from kafkalite.storage.log_dir_move import FUTURE_DIR_SUFFIX, ReplicaMove, RetiredSegments
from kafkalite.storage.log_dir_moves import LogDirMoves
from kafkalite.storage.log_dirs import (
    CLEAN_SHUTDOWN_FILE,
    DELETE_DIR_SUFFIX,
    LoadJob,
    TopicPartition,
    close_logs,
    finish_cut_moves,
    least_used_dir,
    lock_dir,
    offsets_of,
    offsets_of_job,
    scan_log_dir,
    unlock_dirs,
    write_dir_manifest,
)
from kafkalite.storage.log_manifest import LogState
from kafkalite.storage.periodic import PeriodicTask
from kafkalite.storage.topic_overrides import TOPIC_CONFIG_DIR, TopicOverrides
from kafkalite.storage.types import MIN_FD_GRACE_MS, now_ms

log = logging.getLogger(__name__)

# Kafka's producer.id.expiration.ms default: an idempotent producer silent this long is forgotten
PRODUCER_ID_EXPIRATION_MS = 86_400_000


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
        self._configs = TopicOverrides(
            self.log_dirs[0] / TOPIC_CONFIG_DIR,
            default_config if default_config is not None else LogConfig(),
        )
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
        self._lock_fds: list[int] = []
        # called (on the failing thread) once per log dir that goes offline: the broker tells its
        # controller (cluster mode) and stops fetching the dir's partitions
        self.dir_failure_listeners: list[Callable[[Path], None]] = []
        self._pending_dir_deletes: list[tuple[int, Path, Log | RetiredSegments]] = []
        # AlterReplicaLogDirs: logs being copied to another dir
        self._moves = LogDirMoves(
            self._lock,
            self._logs.get,
            self._log_dir_of.get,
            self._open_future,
            self._log_dir_of.__setitem__,
            self._move_finished,
        )
        self.move_interval_ms = 100
        self.last_shutdown_clean = True  # every log dir had the clean-shutdown marker at startup
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._started = False
        # logs whose recovery `startup` left for later (`load_later`): their jobs until loaded, and
        # those being loaded right now (by the loading thread, or out of turn by a caller)
        self._later = DeferredLoads(
            self._lock, self._logs, self._log_dir_of.get, self.offline_dirs, self._load_job
        )

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
        jobs: list[LoadJob] = []
        restores: list[tuple[Path, TopicPartition, LogState, int]] = []
        futures: list[tuple[Path, TopicPartition, Path]] = []
        for d in self.log_dirs:
            d.mkdir(parents=True, exist_ok=True)
            self._lock_fds.append(lock_dir(d))
            scan = scan_log_dir(d, self._log_dir_of)
            if not scan.clean:
                self.last_shutdown_clean = False
            jobs += scan.jobs
            restores += scan.restores
            futures += scan.futures
        jobs += finish_cut_moves(futures, self._log_dir_of)
        self._configs.load()

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
                self._later.jobs = {job[1]: job for job in picked}
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
                self._moves.resume(path, ftp, d)
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
            f"; {len(self._later.jobs)} more are recovered while the broker serves"
            if self._later.jobs
            else "",
        )

    def _attach(self, lg: Log) -> Log:
        """A log joins this manager: its clock, flush histogram and I/O failure handler."""
        lg.clock = self.clock
        lg.flush_times = self.flush_times
        lg.io_error = self._log_dir_failed
        return lg

    def _adopt(self, lg: Log, dirty: int) -> Log:
        lg.first_dirty_offset = max(lg.log_start_offset, min(dirty, lg.log_end_offset))
        return self._attach(lg)

    def _load_job(self, job: LoadJob) -> tuple[TopicPartition, Log]:
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
        return self._later.is_loading((topic, partition))

    def loading_partitions(self) -> set[TopicPartition]:
        return self._later.partitions()

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
            self._later.run(loaded, done, batch, self._stop, self.fail_log_dir)

        t = threading.Thread(target=run, name="kafkalite-log-recovery", daemon=True)
        t.start()
        self._threads.append(t)
        return t

    # -- topic configs --------------------------------------------------------------------------
    @property
    def default_config(self) -> LogConfig:
        return self._configs.default_config

    def topic_config_overrides(self, topic: str) -> dict[str, str]:
        with self._lock:
            return self._configs.get(topic)

    def topic_config(self, topic: str) -> LogConfig:
        """The topic's LogConfig (its overrides over the default), built once per change."""
        with self._lock:
            return self._configs.config(topic)

    def set_topic_config(self, topic: str, overrides: Mapping[str, str]) -> LogConfig:
        """Replace the topic's overrides (AlterConfigs); applies to its logs and persists."""
        cfg = LogConfig.from_properties(overrides, self.default_config)
        with self._lock:
            self._configs.set(topic, overrides)
            for (t, _), lg in self._logs.items():
                if t == topic:
                    lg.update_config(cfg)
        return cfg

    def update_topic_config(self, topic: str, changes: Mapping[str, str | None]) -> LogConfig:
        """IncrementalAlterConfigs: set (value) or remove (None) individual overrides."""
        with self._lock:
            current = self._configs.get(topic)
            for k, v in changes.items():
                if v is None:
                    current.pop(k, None)
                else:
                    current[k] = v
            return self.set_topic_config(topic, current)

    def update_default_config(self, config: LogConfig) -> None:
        with self._lock:
            self._configs.default_config = config
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
        return least_used_dir(self.log_dirs, self.offline_dirs, self._log_dir_of)

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
            victims += self._moves.stop_in(d)
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
            waited = self._later.load_one(tp)
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
            d = self._log_dir_of.get(tp) or self._moves.take_preferred_dir(tp) or self._pick_dir()
            if d in self.offline_dirs:
                raise KafkaStorageError(f"log dir {d} of {topic}-{partition} is offline")
            lg = self._attach(
                Log.create(d / f"{topic}-{partition}", self.topic_config(topic), topic_id)
            )
            self._logs[tp] = lg
            self._log_dir_of[tp] = d
            return lg

    def delete_log(self, topic: str, partition: int) -> bool:
        """Stop the partition's log and rename its dir `<name>.<uuid>-delete`; its files are closed
        and removed in the background after file.delete.delay.ms (in-flight reads stay valid)."""
        tp = (topic, partition)
        if tp in self._later:  # not recovered yet: recovered first, then deleted as any log is
            self._later.load_one(tp)
        with self._moves.move_lock, self._lock:
            lg = self._logs.pop(tp, None)
            d = self._log_dir_of.pop(tp, None)
            mv = self._moves.pop(tp)
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
                {p for t, p in self._logs if t == topic}
                | {p for t, p in self._later.jobs if t == topic}
            )
        for p in parts:
            self.delete_log(topic, p)
        with self._lock:
            self._configs.remove(topic)
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
                    (self._log_dir_of.get(tp), tp, offsets_of(lg)) for tp, lg in self._logs.items()
                ]
                # a log not recovered yet keeps the offsets it was checkpointed with
                items += [
                    (self._log_dir_of.get(tp), tp, offsets_of_job(job, self.topic_config(tp[0])))
                    for tp, job in self._later.jobs.items()
                    if tp not in self._logs
                ]
            for d in self.log_dirs:
                if d in self.offline_dirs:
                    continue  # its checkpoints stay as they were: the next start recovers from them
                try:
                    write_dir_checkpoints(d, [(tp, o) for ld, tp, o in items if ld == d])
                except OSError as exc:
                    self.fail_log_dir(d, exc, "its checkpoint files")

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
            t = PeriodicTask(name, interval, fn, self._stop)
            t.start()
            self._threads.append(t)

    def shutdown(self) -> None:
        """Stop background threads, flush and close every log, write final checkpoints."""
        self._stop.set()
        for t in self._threads:
            t.join(timeout=30)
        self._threads = []
        for mv in self._moves.take_all():  # an unfinished copy is kept: the next start resumes it
            mv.future.close()
        not_durable = close_logs(
            self.logs(), self.log_dirs, self.offline_dirs, self._never_recovered_dirs
        )
        if self._started:
            self.checkpoint()
        self.remove_deleted_files(force=True)
        if self._started:  # every log closed and checkpointed: the next start had nothing to fear
            for d in self.log_dirs:
                if d not in self.offline_dirs and d not in not_durable:
                    self._write_manifest(d)
                    (d / CLEAN_SHUTDOWN_FILE).touch()
        unlock_dirs(self._lock_fds)
        self._lock_fds = []
        self._started = False

    def _never_recovered_dirs(self) -> set[Path]:
        with self._lock:
            return {d for tp in self._later.jobs if (d := self._log_dir_of.get(tp))}

    def _write_manifest(self, d: Path) -> None:
        with self._lock:
            logs = [lg for tp, lg in self._logs.items() if self._log_dir_of.get(tp) == d]
        write_dir_manifest(d, logs)

    # -- moving logs between dirs (AlterReplicaLogDirs) -----------------------------------------------
    def log_dir_of(self, topic: str, partition: int) -> Path | None:
        return self._log_dir_of.get((topic, partition))

    def moves(self) -> dict[TopicPartition, ReplicaMove]:
        """The moves in flight: partition -> its copy (the future log, its target dir)."""
        return self._moves.moves()

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
        return self._moves.alter(tp, dest)

    def _open_future(self, path: Path, src: Log) -> Log:
        return self._attach(Log.open(path, src.config, src.topic_id))

    def run_moves_once(self, budget_bytes: int = 8 * 1024 * 1024) -> int:
        """Copy up to `budget_bytes` per move; moves that caught up take their log's place.
        Returns how many moves finished."""
        return self._moves.run_once(budget_bytes)

    def _move_finished(
        self, tp: TopicPartition, mv: ReplicaMove, target: Path, old: RetiredSegments
    ) -> None:
        due = self.clock() + max(mv.source.config.file_delete_delay_ms, MIN_FD_GRACE_MS)
        with self._lock:
            self._pending_dir_deletes.append((due, target, old))
        log.info("moved %s-%d to %s (%d bytes copied)", tp[0], tp[1], mv.dest, mv.bytes_copied)
        self.checkpoint()
