"""DeferredLoads: the logs a crash restart leaves to recover while the broker serves — their load
jobs until loaded, the one thread that recovers them in order, and loading one out of turn on demand.

Owned by LogManager (see `startup`'s `later`); it changes the manager's logs under the manager's lock.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

from kafkalite.storage.errors import LogDirOffline
from kafkalite.storage.log import Log
from kafkalite.storage.log_dirs import LoadJob, TopicPartition

log = logging.getLogger("kafkalite.storage.manager")


class DeferredLoads:
    """`jobs`: the logs not recovered yet; `loading`: those being recovered right now (by the
    loading thread, or out of turn by a caller)."""

    def __init__(
        self,
        lock: threading.RLock,
        logs: dict[TopicPartition, Log],
        dir_of: Callable[[TopicPartition], Path | None],
        offline_dirs: set[Path],
        load_job: Callable[[LoadJob], tuple[TopicPartition, Log]],
    ) -> None:
        self._lock = lock
        self._logs = logs  # the manager's: a recovered log joins it under the lock
        self._dir_of = dir_of
        self._offline_dirs = offline_dirs
        self._load_job = load_job
        self.jobs: dict[TopicPartition, LoadJob] = {}
        self.loading: set[TopicPartition] = set()
        self._loaded = threading.Condition(lock)

    def __contains__(self, tp: TopicPartition) -> bool:
        return tp in self.jobs

    def is_loading(self, tp: TopicPartition) -> bool:
        return tp in self.jobs or tp in self.loading

    def partitions(self) -> set[TopicPartition]:
        with self._lock:
            return set(self.jobs) | self.loading

    def load_one(self, tp: TopicPartition) -> Log | None:
        """Recover one log left for later, now (waiting if another thread is at it); None when it
        is not one of them. On failure its job stays, so nothing takes its directory for empty."""
        with self._lock:
            while tp in self.loading:
                self._loaded.wait()
            job = self.jobs.get(tp)
            if job is None:
                return self._logs.get(tp)
            if self._dir_of(tp) in self._offline_dirs:
                raise LogDirOffline(f"log dir of {tp[0]}-{tp[1]} is offline")
            self.loading.add(tp)
        try:
            _, lg = self._load_job(job)
            with self._lock:
                self._logs[tp] = lg
                del self.jobs[tp]
            return lg
        finally:
            with self._lock:
                self.loading.discard(tp)
                self._loaded.notify_all()

    def run(
        self,
        loaded: Callable[[list[Log]], object],
        done: Callable[[], object] | None,
        batch: int,
        stop: threading.Event,
        fail_dir: Callable[[Path, OSError, str], None],
    ) -> None:
        """Recover every job in the order their directories sort (see LogManager.load_later)."""
        started = time.monotonic()
        ready: list[Log] = []
        count = 0
        for tp in sorted(self.jobs):
            if stop.is_set():
                return
            d = self._dir_of(tp)
            if d in self._offline_dirs:
                continue
            try:
                was_later = tp in self.jobs
                lg = self.load_one(tp)
            except OSError as exc:
                if d is not None:
                    fail_dir(d, exc, f"{tp[0]}-{tp[1]}")
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
