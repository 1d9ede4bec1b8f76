"""ReplicaManager: the only way request handlers reach partition data — leader appends, reads bounded by
the high watermark, offset lookups, and become-leader / become-follower from LeaderAndIsr.

Owns the hosted Partitions over storage's LogManager, `append_records` (validation, flush policy, the acks
decision, the delayed produce, the topic stats) and the purgatory of delayed operations, woken when a
partition is appended to or its high watermark moves. Single-node mode leads every partition itself.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Coroutine, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafkalite.cluster.append_records import (
    AppendOrigin,
    AppendRecordsResult,
    DelayedProduce,
    EndTxnMarker,
    PartitionAppendResult,
    PartitionRecords,
    ProduceStats,
    TransactionVerification,
)
from kafkalite.cluster.delayed_operations import DelayedOperations
from kafkalite.cluster.errors import NotLeaderOrFollower, ReplicaError, UnknownTopicOrPartition
from kafkalite.cluster.fetch_messages import (
    FetchMessagesResult,
    FetchParams,
    FetchPartition,
    FetchStats,
    fetch_messages,
)
from kafkalite.cluster.log_validator import RecordValidationError, validate_records
from kafkalite.cluster.partition import LeaderAndIsrState, Partition
from kafkalite.protocol.errors import ErrorCode
from kafkalite.storage import Log, LogManager
from kafkalite.storage.errors import StorageError
from kafkalite.storage.log_dir_move import ReplicaMove
from kafkalite.storage.producer_state import SENTINEL_GUARD
from kafkalite.storage.types import AppendResult, FetchDataInfo

if TYPE_CHECKING:
    from kafkalite.cluster.remote_log_manager import RemoteLogManager

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
        notify: DelayedOperations | Callable[[Hashable], None],
        clock: Callable[[], int] = _now_ms,
    ) -> None:
        """`notify` is the purgatory the delayed produce / fetch wait in, or a callable told of
        every wake-up (then the ReplicaManager keeps a purgatory of its own that also calls it)."""
        self.broker_id = broker_id
        self.log_manager = log_manager
        self.delayed = _purgatory_of(notify)
        self._notify = self.delayed.notify
        self.clock = clock
        self._partitions: dict[TopicPartition, Partition] = {}
        self.controller_epoch = -1
        # cluster mode: proposes an ISR change to the controller (AlterPartition); None alone
        self.alter_isr: Callable[[Partition, tuple[int, ...]], None] | None = None
        # KIP-890 (transaction.partition.verification.enable): a client's batch that opens a
        # transaction on a partition is appended only with the guard its verification gave
        self.transaction_verification_enabled = True
        # KIP-405: the remote tier's reads below the local log start (None: tiered storage off)
        self.remote_log_manager: RemoteLogManager | None = None

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
            if existing is not None and existing.offline:
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
    def append_records(
        self,
        entries: Iterable[tuple[str, Iterable[PartitionRecords]]],
        required_acks: int,
        timeout_ms: int,
        origin: AppendOrigin,
        *,
        stats: ProduceStats | None = None,
        requester: tuple[object, object] = ("", ""),
        verification: TransactionVerification | None = None,
    ) -> AppendRecordsResult:
        """Append each topic's partition entries on this leader (Kafka's appendRecords): a client's
        records are validated first (`stats` counts them per topic, `requester` is its address and
        client id for the log); the flush policy and, with
        acks=all, the wait for the ISR are left in the result's `delayed` produce to await. Errors
        are per partition: UNKNOWN_TOPIC_OR_PARTITION (not hosted), NOT_LEADER_OR_FOLLOWER,
        NOT_ENOUGH_REPLICAS, the validator's codes, KAFKA_STORAGE_ERROR; with KIP-890 verification
        on, a client's transaction-opening batch without its `verification` guard is refused
        (INVALID_TXN_STATE), and a partition whose verification failed answers that error."""
        client = origin is AppendOrigin.CLIENT
        verifying = client and self.transaction_verification_enabled
        now_ms = _now_ms() if client else 0
        partitions = self._partitions
        notify = self._notify
        topic_stats = stats.topics if stats is not None else None
        flushes: list[Partition] = []
        waiting: list[tuple[PartitionAppendResult, Partition, int]] = []
        out: list[list[PartitionAppendResult]] = []
        for topic, parts in entries:
            results: list[PartitionAppendResult] = []
            out.append(results)
            for entry in parts:
                index = entry.index
                pr = PartitionAppendResult(index)
                results.append(pr)
                part = partitions.get((topic, index))
                if part is None:
                    pr.error_code = (
                        ErrorCode.NOT_LEADER_OR_FOLLOWER
                        if self.log_manager.is_loading(topic, index)
                        else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    )
                    continue
                if client and not part.is_leader:
                    pr.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
                    continue
                records = entry.records
                guard = None
                if verifying:
                    guard = SENTINEL_GUARD
                    if verification is not None:
                        refused = verification.errors.get((topic, index))
                        if refused is not None:
                            pr.error_code, pr.error_message = refused
                            continue
                        guard = verification.guards.get((topic, index), SENTINEL_GUARD)
                try:
                    if isinstance(records, EndTxnMarker):
                        if client:
                            raise RecordValidationError(
                                ErrorCode.INVALID_RECORD, "clients may not produce control batches"
                            )
                        first, last, append_time, _, log_start, _, _ = part.append_control_marker(
                            records.producer_id, records.producer_epoch,
                            records.coordinator_epoch, records.commit, notify=False,
                        )  # fmt: skip
                        size = 0
                    else:
                        if records is None:
                            records = b""
                        if client:
                            records = validate_records(
                                records, part._log.config, now_ms, f"{topic}-{index}"
                            )
                        # a plain tuple of AppendInfo's fields: no result object per batch
                        first, last, append_time, _, log_start, _, _ = (
                            part.append_records_to_leader(records, required_acks, False, guard)
                        )
                        size = len(records)
                except RecordValidationError as rej:
                    if stats is not None:
                        stats.failed_produce(topic)
                    pr.error_code = rej.code
                    pr.error_message = rej.message
                    pr.record_errors = rej.record_errors
                    log.info(
                        "produce to %s-%d from %s (%s) rejected: %s %s",
                        topic, index, requester[0], requester[1], rej.code.name, rej.message,
                    )  # fmt: skip
                    continue
                except ReplicaError as exc:
                    if stats is not None:
                        stats.failed_produce(topic)
                    pr.error_code = exc.error_code
                    pr.error_message = str(exc)
                    if not client:
                        log.info("append to %s-%d refused: %s", topic, index, exc)
                    continue
                except Exception as exc:
                    if stats is not None:
                        stats.failed_produce(topic)
                    code = getattr(exc, "error_code", None)
                    if code is None:
                        log.exception("append to %s-%d failed", topic, index)
                        code = ErrorCode.KAFKA_STORAGE_ERROR
                    else:
                        log.warning("append to %s-%d failed: %s", topic, index, exc)
                    pr.error_code = ErrorCode(code)
                    continue
                if topic_stats is not None and stats is not None:
                    ts = topic_stats.get(topic) or stats.topic(topic)
                    ts.produce_requests += 1
                    ts.messages_in += last - first + 1  # offsets are contiguous: one per record
                    ts.bytes_in += size
                pr.base_offset = first
                pr.last_offset = last
                pr.log_append_time_ms = append_time
                pr.log_start_offset = log_start
                notify(part.key)  # once: long-poll fetches and acks=all waits on it
                lg = part._log  # (the cluster package reads its partitions' logs directly)
                if required_acks == -1 and lg.high_watermark <= last:
                    waiting.append((pr, part, last + 1))
                if lg.needs_flush:
                    flushes.append(part)
        delayed = (
            DelayedProduce(self.delayed, flushes, waiting, timeout_ms)
            if flushes or waiting
            else None
        )
        return AppendRecordsResult(out, delayed)

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

    def fetch_messages(
        self, params: FetchParams, topics: list[list[FetchPartition]], stats: FetchStats
    ) -> Coroutine[Any, Any, FetchMessagesResult | None]:
        """Read the partitions asked for (Kafka's fetchMessages): consumers below the high
        watermark (or the last stable offset), followers up to the log end (their fetch moves our
        high watermark); long-polls in the purgatory until `params.min_bytes` are there or
        `params.max_wait_ms` passes. Results are per topic, in request order."""
        return fetch_messages(self, params, topics, stats)

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
        limit = partition.log_end_offset if from_follower else partition.high_watermark
        return partition.read(offset, max_bytes, max_offset=limit, min_one_message=min_one_message)


def _purgatory_of(notify: DelayedOperations | Callable[[Hashable], None]) -> DelayedOperations:
    """The purgatory a ReplicaManager waits in: the one given (the broker's, shared with its other
    delayed operations), or a new one that also calls `notify` (tests that watch the wake-ups)."""
    if isinstance(notify, DelayedOperations):
        return notify
    return DelayedOperations(on_notify=notify)
