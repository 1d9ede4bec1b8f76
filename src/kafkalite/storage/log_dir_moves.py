"""LogDirMoves: the AlterReplicaLogDirs moves in flight on one broker — starting, resuming after a
restart, copying a step at a time, cancelling, and the finish where the copy takes the log's place.

Owned by LogManager; its registry (the logs and the dir of each) is read through the callables given.
"""

from __future__ import annotations

import logging
import shutil
import threading
import uuid
from collections.abc import Callable
from pathlib import Path

from kafkalite.storage.errors import KafkaStorageError, LogClosed
from kafkalite.storage.log import Log
from kafkalite.storage.log_dir_move import ReplicaMove, RetiredSegments, future_dir
from kafkalite.storage.log_dirs import DELETE_DIR_SUFFIX, TopicPartition

log = logging.getLogger("kafkalite.storage.manager")


class LogDirMoves:
    """Moves by partition, and the dirs asked for partitions not created yet (Kafka's preferred
    log dirs). `lock` is the LogManager's: the move table changes under it."""

    def __init__(
        self,
        lock: threading.RLock,
        get_log: Callable[[TopicPartition], Log | None],
        dir_of: Callable[[TopicPartition], Path | None],
        open_future: Callable[[Path, Log], Log],
        moved: Callable[[TopicPartition, Path], None],
        finished: Callable[[TopicPartition, ReplicaMove, Path, RetiredSegments], None],
    ) -> None:
        self._lock = lock
        self._get_log = get_log
        self._dir_of = dir_of
        self._open_future = open_future  # a future log opened for `source`, adopted by the manager
        self._moved = moved  # under the lock: the partition's log is in this dir now
        self._finished = finished  # then: the old dir, renamed `target`, retires its segments
        self._moves: dict[TopicPartition, ReplicaMove] = {}
        self._preferred: dict[TopicPartition, Path] = {}
        # taken by whoever starts, cancels or finishes a move, never under a log's lock (a log's
        # I/O failure takes the manager's lock while holding its own)
        self.move_lock = threading.Lock()

    def moves(self) -> dict[TopicPartition, ReplicaMove]:
        with self._lock:
            return dict(self._moves)

    def take_preferred_dir(self, tp: TopicPartition) -> Path | None:
        """Under the manager's lock: the dir asked for a partition now being created."""
        return self._preferred.pop(tp, None)

    def pop(self, tp: TopicPartition) -> ReplicaMove | None:
        """Under the manager's lock (and `move_lock`): stop tracking the partition's move."""
        return self._moves.pop(tp, None)

    def take_all(self) -> list[ReplicaMove]:
        with self._lock:
            moves, self._moves = list(self._moves.values()), {}
        return moves

    def stop_in(self, d: Path) -> list[Log]:
        """Under the manager's lock, `d` failed: moves into it stop, and a log moving out of it
        goes offline with its copy. Answers the copies of the moves stopped."""
        out: list[Log] = []
        for tp, mv in list(self._moves.items()):
            if mv.dest == d or self._dir_of(tp) == d:
                del self._moves[tp]
                out.append(mv.future)
        return out

    def alter(self, tp: TopicPartition, dest: Path) -> bool:
        """Move the partition's log to `dest` (see LogManager.alter_log_dir)."""
        with self.move_lock:
            topic, partition = tp
            with self._lock:
                src = self._get_log(tp)
                if src is None:
                    self._preferred[tp] = dest
                    return False
                if src.offline:
                    raise KafkaStorageError(f"log {src.dir.name} is offline")
                current = self._moves.get(tp)
                if current is not None and current.dest == dest:
                    return True  # already on its way there
                cancelled = self._moves.pop(tp, None)
                if self._dir_of(tp) != dest:
                    fut = self._open_future(future_dir(dest, topic, partition), src)
                    self._moves[tp] = ReplicaMove(src, fut, dest)
                    log.info("moving %s-%d from %s to %s", topic, partition, src.dir.parent, dest)
            if cancelled is not None:
                cancelled.abort()
            return True

    def resume(self, path: Path, tp: TopicPartition, dest: Path) -> None:
        """A move the restart cut short continues from what its copy had (recovered), as Kafka's."""
        src = self._get_log(tp)
        if src is None or self._dir_of(tp) == dest:
            shutil.rmtree(path, ignore_errors=True)
            return
        fut = self._open_future(path, src)
        self._moves[tp] = ReplicaMove(src, fut, dest)
        log.info("resuming the move of %s-%d to %s at offset %d", *tp, dest, fut.log_end_offset)

    def run_once(self, budget_bytes: int) -> int:
        """Copy up to `budget_bytes` per move; moves that caught up take their log's place.
        Returns how many moves finished."""
        done = 0
        for tp, mv in self.moves().items():
            try:
                start = mv.bytes_copied
                caught_up = mv.copy_step()
                while not caught_up and mv.bytes_copied - start < budget_bytes:
                    caught_up = mv.copy_step()
                if caught_up and self._finish(tp, mv):
                    done += 1
            except (LogClosed, KafkaStorageError, OSError) as exc:
                with self._lock:
                    if self._moves.get(tp) is mv:
                        del self._moves[tp]
                log.warning("move of %s-%d to %s stopped: %s", tp[0], tp[1], mv.dest, exc)
                if not mv.future.offline:
                    mv.abort()
        return done

    def _finish(self, tp: TopicPartition, mv: ReplicaMove) -> bool:
        with self.move_lock:
            if self._moves.get(tp) is not mv:
                return False  # cancelled, replaced or failed meanwhile
            old_dir = mv.source.dir
            target = old_dir.with_name(f"{old_dir.name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}")
            old_segments = mv.finish(target)
            with self._lock:
                self._moves.pop(tp, None)
                self._moved(tp, mv.dest)
        self._finished(tp, mv, target, RetiredSegments(old_segments))
        return True
