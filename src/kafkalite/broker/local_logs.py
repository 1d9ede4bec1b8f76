"""Single-node mode: making the logs of a new topic's or new partitions' replicas, and undoing that when one
cannot be made (EMFILE, ENOSPC...), so a failed CreateTopics / CreatePartitions leaves nothing behind.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Sequence
from pathlib import Path

from kafkalite.cluster.metadata import TopicInfo
from kafkalite.cluster.replica_manager import ReplicaManager
from kafkalite.storage import LogManager

log = logging.getLogger("kafkalite.broker")


class TopicStorageError(Exception):
    """A partition's log could not be made (an OSError); what the request had made was rolled
    back. Handlers answer KAFKA_STORAGE_ERROR with str(self)."""

    def __init__(self, topic: str, partition: int, cause: OSError) -> None:
        super().__init__(
            f"cannot create the log of partition {topic}-{partition}: "
            f"{cause.strerror or cause} (errno {cause.errno}); nothing was kept"
        )
        self.topic = topic
        self.partition = partition
        self.cause = cause


def make_local_logs(
    replica_manager: ReplicaManager,
    log_manager: LogManager,
    log_dirs: Sequence[Path],
    info: TopicInfo,
    partitions: range,
) -> None:
    """Make and lead the logs of `partitions` here. When one cannot be made the ones made here are
    deleted again, and TopicStorageError says which partition failed and why."""
    made: list[int] = []
    for part in partitions:
        try:
            replica_manager.create_local_leader(info.name, part, info.topic_id, info.configs)
        except OSError as exc:
            drop_local_logs(
                replica_manager, log_manager, log_dirs, info.name, range(part, part + 1), made
            )
            raise TopicStorageError(info.name, part, exc) from exc
        made.append(part)


def drop_local_logs(
    replica_manager: ReplicaManager,
    log_manager: LogManager,
    log_dirs: Sequence[Path],
    topic: str,
    failed: range,
    made: list[int] | None = None,
) -> None:
    """Undo `make_local_logs`: delete the logs `made` (all of `failed` when None) the way deleted
    partitions go, and remove any directory a failed open left behind."""
    for part in failed if made is None else made:
        try:
            replica_manager.stop_replica(topic, part, delete=True)
        except OSError as exc:
            log.error("could not delete the log of %s-%d while rolling back: %s", topic, part, exc)
    for part in failed:
        if log_manager.get_log(topic, part) is not None:
            continue
        if log_manager.is_loading(topic, part):  # (a log on disk, not recovered yet)
            continue
        for d in log_dirs:
            leftover = d / f"{topic}-{part}"
            if leftover.is_dir():
                shutil.rmtree(leftover, ignore_errors=True)
