"""ReplicaManager: the only way request handlers reach partition data — leader appends, reads bounded by
the high watermark, offset lookups, and become-leader / become-follower from LeaderAndIsr.

Owns the hosted Partitions over storage's LogManager; wakes delayed operations when a high watermark
moves. Single-node mode creates every partition as its own leader (replication factor 1).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kafkalite.cluster.errors import NotLeaderOrFollower, UnknownTopicOrPartition
from kafkalite.cluster.partition import LeaderAndIsrState, Partition
from kafkalite.protocol.errors import ErrorCode
from kafkalite.storage import Log, LogManager
from kafkalite.storage.errors import StorageError
from kafkalite.storage.log_dir_move import ReplicaMove
from kafkalite.storage.types import AppendResult, FetchDataInfo

log = logging.getLogger("kafkalite.cluster.replica_manager")

TopicPartition = tuple[str, int]


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class LeadershipChange:
    """What a LeaderAndIsr did on this broker, for the components that follow leadership (fetchers,
    coordinators): partitions it now leads, partitions it now follows (with their leader)."""

    became_leader: list[Partition] = field(default_factory=list)
    became_follower: list[Partition] = field(default_factory=list)
    errors: dict[TopicPartition, ErrorCode] = field(default_factory=dict)


class ReplicaManager:
    def __init__(
        self,
        broker_id: int,
        log_manager: LogManager,
        notify: Callable[[Hashable], None],
        clock: Callable[[], int] = _now_ms,
    ) -> None:
        self.broker_id = broker_id
        self.log_manager = log_manager
        self._notify = notify
        self.clock = clock
        self._partitions: dict[TopicPartition, Partition] = {}
        self.controller_epoch = -1
        # cluster mode: proposes an ISR change to the controller (AlterPartition); None alone
        self.alter_isr: Callable[[Partition, tuple[int, ...]], None] | None = None

    # -- lookups -----------------------------------------------------------------------------------
    def get_partition(self, topic: str, partition: int) -> Partition | None:
        return self._partitions.get((topic, partition))

    def partitions(self) -> list[Partition]:
        return list(self._partitions.values())

    # -- log dirs (JBOD) ----------------------------------------------------------------------------
    def alter_replica_log_dir(self, topic: str, partition: int, path: str) -> ErrorCode:
        """AlterReplicaLogDirs for one replica: move its log to the log dir `path`, online. A
        replica not hosted here has the dir remembered for its creation and answers
        NOT_LEADER_OR_FOLLOWER, as Kafka's does."""
        try:
            here = self.log_manager.alter_log_dir(topic, partition, path)
        except StorageError as exc:
            log.warning("AlterReplicaLogDirs of %s-%d to %s: %s", topic, partition, path, exc)
            return exc.error_code
        if here and (topic, partition) in self._partitions:
            return ErrorCode.NO_ERROR
        return ErrorCode.NOT_LEADER_OR_FOLLOWER

    def log_dir_moves(self) -> dict[TopicPartition, ReplicaMove]:
        """Replicas being moved to another log dir (their future logs), for DescribeLogDirs."""
        return self.log_manager.moves()

    def offline_log_dirs(self) -> set[Path]:
        return set(self.log_manager.offline_dirs)

    def hosts_topic(self, topic: str) -> bool:
        return any(t == topic for t, _ in self._partitions)

    def leader_partitions(self) -> list[Partition]:
        return [p for p in self._partitions.values() if p.is_leader]

    def leader_partition(
        self, topic: str, partition: int, current_leader_epoch: int = -1
    ) -> Partition:
        """The partition if this broker leads it (and the caller's epoch matches); otherwise raises
        UnknownTopicOrPartition, NotLeaderOrFollower, FencedLeaderEpoch or UnknownLeaderEpoch."""
        p = self._partitions.get((topic, partition))
        if p is None:
            if self.log_manager.is_loading(topic, partition):  # (its leader is not there yet)
                raise NotLeaderOrFollower(f"{topic}-{partition} is still being recovered")
            raise UnknownTopicOrPartition(f"{topic}-{partition} is not hosted on this broker")
        p.require_leader(current_leader_epoch)
        return p

    def _on_high_watermark(self, p: Partition) -> None:
        self._notify(p.key)

    # -- creating and removing replicas ----------------------------------------------------------
    def _ensure_partition(
        self,
        topic: str,
        partition: int,
        topic_id: uuid.UUID | None,
        config_overrides: Mapping[str, str] | None = None,
    ) -> Partition:
        key = (topic, partition)
        p = self._partitions.get(key)
        if p is not None:
            return p
        lg = self.log_manager.get_or_create_log(topic, partition, config_overrides, topic_id)
        p = Partition(topic, partition, self.broker_id, lg, self._on_high_watermark)
        self._partitions[key] = p
        return p

    def create_local_leader(
        self,
        topic: str,
        partition: int,
        topic_id: uuid.UUID | None,
        config_overrides: Mapping[str, str] | None = None,
    ) -> Partition:
        """Single-node mode: this broker is the only replica and leads at epoch 0."""
        p = self._ensure_partition(topic, partition, topic_id, config_overrides)
        if not p.is_leader:
            me = (self.broker_id,)
            p.make_leader(LeaderAndIsrState(self.broker_id, 0, me, me), self.clock())
        return p

    def adopt_loaded_logs(self, logs: Iterable[Log]) -> None:
        """Logs found on disk at startup become hosted replicas (not yet leader or follower)."""
        for lg in logs:
            key = (lg.topic, lg.partition)
            if key not in self._partitions:
                self._partitions[key] = Partition(
                    lg.topic, lg.partition, self.broker_id, lg, self._on_high_watermark
                )

    def stop_replica(self, topic: str, partition: int, delete: bool) -> bool:
        """StopReplica: forget the replica (deleting its log when asked); waiters are woken."""
        p = self._partitions.pop((topic, partition), None)
        if p is not None:
            # waiters on it (acks=all produce, long-poll fetch) answer now, as a replica that lost
            # leadership does (NOT_LEADER_OR_FOLLOWER), instead of sitting out their timeout
            p.is_leader = False
        if delete:
            self.log_manager.delete_log(topic, partition)
        self._notify((topic, partition))
        return p is not None

    def delete_topic(self, topic: str) -> list[int]:
        parts = sorted(p for (t, p) in self._partitions if t == topic)
        for part in parts:
            self._partitions.pop((topic, part), None)
        self.log_manager.delete_topic(topic)
        for part in parts:
            self._notify((topic, part))
        return parts

    # -- LeaderAndIsr ------------------------------------------------------------------------------
    def become_leader_or_follower(
        self,
        controller_epoch: int,
        states: Mapping[TopicPartition, LeaderAndIsrState],
        topic_ids: Mapping[str, uuid.UUID | None],
        topic_configs: Mapping[str, Mapping[str, str]] | None = None,
    ) -> LeadershipChange:
        """Apply a LeaderAndIsr request. Partitions whose leader epoch is not newer than ours are
        left alone (STALE_CONTROLLER_EPOCH is the caller's check, per request)."""
        change = LeadershipChange()
        now = self.clock()
        self.controller_epoch = max(self.controller_epoch, controller_epoch)
        for (topic, part), st in states.items():
            if self.broker_id not in st.replicas:
                change.errors[(topic, part)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            existing = self._partitions.get((topic, part))
            if existing is not None and st.leader_epoch < existing.leader_epoch:
                log.info(
                    "ignoring LeaderAndIsr for %s-%d: leader epoch %d is older than our %d",
                    topic, part, st.leader_epoch, existing.leader_epoch,
                )  # fmt: skip
                change.errors[(topic, part)] = ErrorCode.STALE_CONTROLLER_EPOCH
                continue
            if existing is not None and existing.log.offline:
                # its log dir failed: the controller takes the replica offline on this answer
                change.errors[(topic, part)] = ErrorCode.KAFKA_STORAGE_ERROR
                continue
            try:
                p = self._ensure_partition(
                    topic, part, topic_ids.get(topic), (topic_configs or {}).get(topic)
                )
            except Exception as exc:
                log.error("cannot create the replica of %s-%d: %s", topic, part, exc)
                change.errors[(topic, part)] = ErrorCode.KAFKA_STORAGE_ERROR
                continue
            if (
                existing is not None
                and st.leader_epoch == existing.leader_epoch
                and ((st.leader == self.broker_id) == existing.is_leader)
            ):
                # same epoch: an ISR or replica-set refresh only
                p.isr, p.replicas, p.partition_epoch = st.isr, st.replicas, st.partition_epoch
                change.errors[(topic, part)] = ErrorCode.NO_ERROR
                continue
            if st.leader == self.broker_id:
                p.make_leader(st, now)
                change.became_leader.append(p)
                log.info(
                    "%s-%d: leader at epoch %d, ISR %s", topic, part, st.leader_epoch, list(st.isr)
                )
            else:
                p.make_follower(st)
                change.became_follower.append(p)
                log.info(
                    "%s-%d: follower of %d at epoch %d", topic, part, st.leader, st.leader_epoch
                )
            self._notify((topic, part))
            change.errors[(topic, part)] = ErrorCode.NO_ERROR
        return change

    # -- reads and writes --------------------------------------------------------------------------
    def append_to_leader(
        self, topic: str, partition: int, records: bytes | bytearray, required_acks: int
    ) -> tuple[Partition, AppendResult]:
        p = self._partitions.get((topic, partition))
        if p is None:
            raise NotLeaderOrFollower(
                f"{topic}-{partition} is not hosted on broker {self.broker_id}"
            )
        result = p.append_records_to_leader(records, required_acks)
        self._notify(p.key)
        return p, result

    def update_follower_fetch_state(
        self, partition: Partition, replica_id: int, fetch_offset: int, log_start_offset: int = -1
    ) -> None:
        """A follower fetched at `fetch_offset` (its log end): move the high watermark and, once it
        has caught up, propose it back into the ISR."""
        may_join = partition.update_follower_fetch_state(
            replica_id, fetch_offset, self.clock(), log_start_offset
        )
        if may_join and self.alter_isr is not None:
            self.alter_isr(partition, tuple(sorted({*partition.isr, replica_id})))

    def read(
        self,
        partition: Partition,
        offset: int,
        max_bytes: int,
        *,
        from_follower: bool,
        min_one_message: bool,
    ) -> FetchDataInfo:
        """Consumers read up to the high watermark; followers up to the log end."""
        lg = partition.log
        limit = lg.log_end_offset if from_follower else lg.high_watermark
        return lg.read(offset, max_bytes, max_offset=limit, min_one_message=min_one_message)
