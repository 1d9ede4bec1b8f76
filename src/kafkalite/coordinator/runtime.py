"""The coordinator's shared machinery: groups by `__consumer_offsets` partition, ownership and loading,
request validation, the clock, and writing records then replaying them (the one path state takes).

Live writes (from the records' decoded form) and the load after a restart (parsing bytes) both end in
`_apply`; nothing else changes persisted state.
"""

from __future__ import annotations

import collections
import logging
import uuid
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from kafkalite.coordinator import consumer_group_records as cgr
from kafkalite.coordinator import records as rec
from kafkalite.coordinator.consumer_group import (
    ConsumerGroup,
    GroupConfig,
)
from kafkalite.coordinator.consumer_group_types import (
    ConsumerGroupRecord,
    GroupEpochRecord,
    TargetAssignmentEpochRecord,
)
from kafkalite.coordinator.deferred import Deferred
from kafkalite.coordinator.group import GroupMetadata, MemberMetadata
from kafkalite.coordinator.share_group import ShareGroup, ShareGroupConfig
from kafkalite.coordinator.state import GroupState
from kafkalite.coordinator.types import (
    CoordinatorConfig,
    CoordinatorRecord,
    JoinGroupResult,
    OffsetAndMetadata,
    SyncGroupResult,
    TopicPartition,
)
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.exceptions import DecodeError

log = logging.getLogger("kafkalite.coordinator")


class AppendFn(Protocol):
    """append(partition, records[, (producer id, epoch)]) -> Deferred completed with NO_ERROR or the
    storage error code, on the loop thread. With a producer, the batch is transactional (TxnOffsetCommit)."""

    def __call__(
        self,
        partition: int,
        records: list[CoordinatorRecord],
        producer: tuple[int, int] | None = ...,
        /,
    ) -> Deferred[ErrorCode]: ...


Clock = Callable[[], int]

E = ErrorCode


def _default_member_id(client_id: str) -> str:
    return f"{client_id}-{uuid.uuid4()}"


def group_store_error(code: ErrorCode) -> ErrorCode:
    """The error a client sees when storing group metadata failed (as Kafka maps it)."""
    if code in (
        E.UNKNOWN_TOPIC_OR_PARTITION,
        E.NOT_ENOUGH_REPLICAS,
        E.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        E.REQUEST_TIMED_OUT,
    ):
        return E.COORDINATOR_NOT_AVAILABLE
    if code in (E.NOT_LEADER_OR_FOLLOWER, E.KAFKA_STORAGE_ERROR):
        return E.NOT_COORDINATOR
    if code in (E.MESSAGE_TOO_LARGE, E.RECORD_LIST_TOO_LARGE, E.INVALID_FETCH_SIZE):
        return E.UNKNOWN_SERVER_ERROR
    return code


def offset_store_error(code: ErrorCode) -> ErrorCode:
    """The error a client sees when appending offset commits failed (as Kafka maps it)."""
    if code in (
        E.UNKNOWN_TOPIC_OR_PARTITION,
        E.NOT_ENOUGH_REPLICAS,
        E.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ):
        return E.COORDINATOR_NOT_AVAILABLE
    if code in (E.NOT_LEADER_OR_FOLLOWER, E.KAFKA_STORAGE_ERROR):
        return E.NOT_COORDINATOR
    if code in (E.MESSAGE_TOO_LARGE, E.RECORD_LIST_TOO_LARGE, E.INVALID_FETCH_SIZE):
        return E.INVALID_COMMIT_OFFSET_SIZE
    return code


class CoordinatorRuntime:
    """Groups, partition ownership/loading, validation, and the write-then-replay path."""

    def __init__(
        self,
        append: AppendFn,
        *,
        config: CoordinatorConfig | None = None,
        clock: Clock | None = None,
        new_member_id: Callable[[str], str] | None = None,
    ) -> None:
        import time

        self.config = config or CoordinatorConfig()
        self._append = append
        self._clock: Clock = clock or (lambda: int(time.time() * 1000))
        self._new_member_id = new_member_id or _default_member_id
        self.groups: dict[str, GroupMetadata] = {}
        self.owned_partitions: set[int] = set()
        self.loading_partitions: set[int] = set()
        self.active = True
        self._next_expiry_check: int | None = None
        # KIP-848 groups: their settings, and per group the operations waiting for a write
        self.consumer_config = GroupConfig()
        self._cg_queues: dict[str, collections.deque[Callable[[], None]]] = {}
        # KIP-932 share groups (membership in memory; see coordinator.share_group)
        self.share_groups: dict[str, ShareGroup] = {}
        # rebalances started here, by group type: classic generations, consumer group-epoch bumps
        self.rebalances: dict[str, int] = {"classic": 0, "consumer": 0}
        self.share_configs: dict[str, ShareGroupConfig] = {}

    # ------------------------------------------------------------------ placement / validation

    def now(self) -> int:
        return self._clock()

    def partition_for(self, group_id: str) -> int:
        return rec.partition_for(group_id, self.config.offsets_topic_num_partitions)

    def is_coordinator_for(self, group_id: str) -> bool:
        return self.partition_for(group_id) in self.owned_partitions

    def is_loading(self, group_id: str) -> bool:
        return self.partition_for(group_id) in self.loading_partitions

    def _validate(self, group_id: str | None, *, allow_empty_id: bool = False) -> ErrorCode | None:
        """Kafka's group-status checks, in its order; None when the request may proceed."""
        if group_id is None or (group_id == "" and not allow_empty_id):
            return E.INVALID_GROUP_ID
        if not self.active:
            return E.COORDINATOR_NOT_AVAILABLE
        partition = self.partition_for(group_id)
        if partition not in self.owned_partitions:
            return E.NOT_COORDINATOR
        if partition in self.loading_partitions:
            return E.COORDINATOR_LOAD_IN_PROGRESS
        return None

    def _live_groups(self) -> list[GroupMetadata]:
        """Groups of partitions we own and have finished loading."""
        return [
            g
            for g in self.groups.values()
            if (p := self.partition_for(g.group_id)) in self.owned_partitions
            and p not in self.loading_partitions
        ]

    # ------------------------------------------------------------------ heartbeat bookkeeping

    def _schedule_heartbeat(self, member: MemberMetadata, timeout_ms: int | None = None) -> None:
        member.heartbeat_deadline = self.now() + (
            member.session_timeout_ms if timeout_ms is None else timeout_ms
        )

    # ------------------------------------------------------------------ writing and replay

    def _write(
        self,
        group_id: str,
        records: list[CoordinatorRecord],
        on_done: Callable[[ErrorCode], None] | None = None,
        producer: tuple[int, int] | None = None,
    ) -> None:
        """Append records to the group's partition; replay them once appended, then call `on_done`.
        With `producer` (id, epoch) they are a transaction's offsets: pending until its marker."""
        partition = self.partition_for(group_id)
        try:
            if producer is None:
                pending = self._append(partition, records)
            else:
                pending = self._append(partition, records, producer)
        except (
            Exception
        ):  # the sink must answer with a code; never let it take the coordinator down
            log.exception("append to __consumer_offsets-%d raised", partition)
            pending = Deferred.completed(E.UNKNOWN_SERVER_ERROR)

        def appended(code: ErrorCode) -> None:
            if code == E.NO_ERROR and producer is not None:
                for r in records:
                    self._replay_txn_offset(producer[0], r.parsed_key, r.parsed_value)
            elif code == E.NO_ERROR:
                apply = self._apply
                for r in records:
                    if r.parsed_key is None:  # built from bytes alone: read them as a load would
                        self._replay(partition, r.key, r.value, live=True)
                    else:
                        apply(partition, r.parsed_key, r.parsed_value, live=True)
            else:
                log.warning(
                    "could not append %d record(s) for group %r to __consumer_offsets-%d: %s",
                    len(records),
                    group_id,
                    partition,
                    ErrorCode.name_of(code),
                )
                group = self.groups.get(group_id)
                if group is not None and group.is_(GroupState.DEAD):
                    del self.groups[group_id]  # it was being removed: gone from memory either way
            if on_done is not None:
                on_done(code)

        pending.on_done(appended)

    def _replay(
        self, partition: int, key: bytes | None, value: bytes | None, *, live: bool
    ) -> None:
        """Parse one `__consumer_offsets` record and apply it (the load path; unreadable records are
        skipped with a warning)."""
        if key is None:
            return
        try:
            parsed = rec.parse_key(key)
        except DecodeError as exc:
            log.warning(
                "__consumer_offsets-%d: skipping a record with a key we cannot read: %s",
                partition,
                exc,
            )
            return
        parsed_value: Any = None
        try:
            if isinstance(parsed, cgr.ConsumerGroupKey):
                parsed_value = cgr.parse_record(parsed, value)
            elif value is None:
                pass
            elif isinstance(parsed, rec.OffsetKey):
                parsed_value = rec.parse_offset_value(value)
            else:
                parsed_value = rec.parse_group_value(value)
        except DecodeError as exc:
            if isinstance(parsed, rec.OffsetKey):
                tp = TopicPartition(parsed.topic, parsed.partition)
                log.warning("unreadable committed offset of %r %s: %s", parsed.group, tp, exc)
            else:
                log.warning(
                    "__consumer_offsets-%d: unreadable metadata of group %r: %s",
                    partition,
                    parsed.group,
                    exc,
                )
            return
        self._apply(partition, parsed, parsed_value, live=live)

    def _apply(self, partition: int, key: Any, value: Any, *, live: bool) -> None:
        """Apply one decoded record (value None = tombstone). Live appends and loading both end here:
        nothing else changes persisted state."""
        if type(key) is rec.OffsetKey:
            self._replay_offset(key, value)
        elif type(key) is cgr.ConsumerGroupKey:
            self._replay_consumer_group(key.group, value)
        elif value is None:
            self._replay_group_tombstone(key.group, live=live)
        else:
            self._replay_group_metadata(key.group, value, live=live)

    def _replay_consumer_group(self, group_id: str, record: ConsumerGroupRecord | None) -> None:
        """Apply one KIP-848 record; a group-epoch tombstone ends the consumer group."""
        if record is None:
            return
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = GroupMetadata(group_id)
        if group.consumer is None:
            group.consumer = ConsumerGroup(group_id)
        group.consumer.replay(record)
        if isinstance(record, GroupEpochRecord) and record.epoch is None:
            group.consumer = None

    def delete_share_group(self, group_id: str) -> ErrorCode:
        """DeleteGroups for a share group: only an empty one."""
        group = self.share_groups.get(group_id)
        if group is None:
            return E.GROUP_ID_NOT_FOUND
        if group.members:
            return E.NON_EMPTY_GROUP
        del self.share_groups[group_id]
        return E.NO_ERROR

    def _consumer_group_tombstones(self, group_id: str) -> list[CoordinatorRecord]:
        """The tombstones that end an empty consumer group's own records."""
        return [
            cgr.to_coordinator_record(TargetAssignmentEpochRecord(group_id, None)),
            cgr.to_coordinator_record(GroupEpochRecord(group_id, None)),
        ]

    def _downgrade_empty_consumer_group(self, group: GroupMetadata) -> None:
        """An empty consumer group joined by a classic member becomes a classic group again: its
        consumer-group records get tombstones (written ahead of the classic group's metadata)."""
        gid = group.group_id
        records = self._consumer_group_tombstones(gid)
        group.consumer = None
        log.info("consumer group %r is empty and becomes a classic group", gid)
        self._write(gid, records)

    def _replay_offset(self, key: rec.OffsetKey, value: OffsetAndMetadata | None) -> None:
        tp = TopicPartition(key.topic, key.partition)
        group = self.groups.get(key.group)
        if value is None:
            if group is not None:
                group.offsets.pop(tp, None)
            return
        if group is None:
            group = self.groups[key.group] = GroupMetadata(key.group)
        group.offsets[tp] = value

    def _replay_txn_offset(
        self, producer_id: int, key: Any, value: OffsetAndMetadata | None
    ) -> None:
        """A transaction's offset commit: held per producer until its COMMIT (or ABORT) marker."""
        if type(key) is not rec.OffsetKey or value is None:
            return
        group = self.groups.get(key.group)
        if group is None:
            group = self.groups[key.group] = GroupMetadata(key.group)
        group.pending_txn_offsets.setdefault(producer_id, {})[
            TopicPartition(key.topic, key.partition)
        ] = value

    def replay_txn(
        self, partition: int, producer_id: int, key: bytes | None, value: bytes | None
    ) -> None:
        """Load path: one record of a transactional batch (a TxnOffsetCommit)."""
        if key is None or value is None:
            return
        try:
            parsed = rec.parse_key(key)
            if not isinstance(parsed, rec.OffsetKey):
                return
            om = rec.parse_offset_value(value)
        except DecodeError as exc:
            log.warning(
                "__consumer_offsets-%d: unreadable transactional offset: %s", partition, exc
            )
            return
        self._replay_txn_offset(producer_id, parsed, om)

    def complete_txn(self, partition: int, producer_id: int, commit: bool) -> None:
        """A COMMIT or ABORT marker for `producer_id` is in `__consumer_offsets-partition` (live or
        replayed): its pending offsets become the committed ones, or are dropped."""
        for group in list(self.groups.values()):
            if self.partition_for(group.group_id) != partition:
                continue
            pending = group.pending_txn_offsets.pop(producer_id, None)
            if pending and commit:
                group.offsets.update(pending)

    def _replay_group_metadata(self, group_id: str, value: Any, *, live: bool) -> None:
        group = self.groups.get(group_id)
        if live:
            # a live write applies only if the group is still in the generation the record describes
            if group is None or group.generation_id != value.generation:
                return
            if group.state not in (
                GroupState.COMPLETING_REBALANCE,
                GroupState.STABLE,
                GroupState.EMPTY,
            ):
                return
        elif group is None:
            group = self.groups[group_id] = GroupMetadata(group_id)
        group.apply_metadata_value(value, live=live)

    def _replay_group_tombstone(self, group_id: str, *, live: bool) -> None:
        group = self.groups.get(group_id)
        if group is None or group.consumer is not None:
            return  # a consumer group's classic metadata was dropped when it became one
        for member in list(group.members.values()):
            self._fence_member(group, member, E.COORDINATOR_NOT_AVAILABLE)
            group.remove(member.member_id)
        group.pending_members.clear()
        if group.offsets or group.pending_offset_commits or group.pending_txn_offsets:
            # offsets outlive the group's metadata (a group that is then used only to store offsets)
            fresh = GroupMetadata(
                group_id,
                offsets=group.offsets,
                pending_offset_commits=group.pending_offset_commits,
                pending_txn_offsets=group.pending_txn_offsets,
            )
            self.groups[group_id] = fresh
        else:
            if live and not group.is_(GroupState.DEAD):
                group.transition_to(GroupState.DEAD, self.now())
            del self.groups[group_id]

    def _fence_member(self, group: GroupMetadata, member: MemberMetadata, code: ErrorCode) -> None:
        """Answer whatever JoinGroup/SyncGroup a member is waiting on with an error."""
        group.complete_join(member, JoinGroupResult(code, member_id=member.member_id))
        member.complete_sync(SyncGroupResult(code))

    # ------------------------------------------------------------------ loading

    def begin_loading(self, partition: int) -> None:
        """We became leader of this `__consumer_offsets` partition: its groups answer LOAD_IN_PROGRESS
        until `finish_loading`."""
        self.owned_partitions.add(partition)
        self.loading_partitions.add(partition)
        for gid in [g for g in self.groups if self.partition_for(g) == partition]:
            del self.groups[gid]

    def replay(self, partition: int, key: bytes | None, value: bytes | None) -> None:
        """Feed one record of the partition's log, oldest first, while it loads."""
        self._replay(partition, key, value, live=False)

    def finish_loading(self, partition: int) -> None:
        """Every record is replayed: settle loaded groups (Stable with members, else Empty), the initial
        state of a loaded group, as Kafka constructs it (not a transition)."""
        for group in self.groups.values():
            if self.partition_for(group.group_id) != partition:
                continue
            group.state = GroupState.STABLE if group.members else GroupState.EMPTY
            for member in group.members.values():
                self._schedule_heartbeat(member)
            if group.consumer is not None:
                now = self.now()
                for cm in group.consumer.members.values():
                    cm.session_deadline_ms = now + self.consumer_config.session_timeout_ms
        self.loading_partitions.discard(partition)
        log.debug("__consumer_offsets-%d loaded", partition)

    def load_partition(
        self, partition: int, records: Iterable[tuple[bytes | None, bytes | None]]
    ) -> None:
        """begin_loading + replay every (key, value) + finish_loading, in one call."""
        self.begin_loading(partition)
        for key, value in records:
            self.replay(partition, key, value)
        self.finish_loading(partition)

    def unload(self, partition: int) -> None:
        """We are no longer leader of this partition: drop its groups; waiting members get NOT_COORDINATOR."""
        self.owned_partitions.discard(partition)
        self.loading_partitions.discard(partition)
        for gid in [g for g in self.share_groups if self.partition_for(g) == partition]:
            del self.share_groups[gid]
        now = self.now()
        for gid in [g for g in self.groups if self.partition_for(g) == partition]:
            group = self.groups.pop(gid)
            for member in list(group.members.values()):
                self._fence_member(group, member, E.NOT_COORDINATOR)
            group.transition_to(GroupState.DEAD, now)

    def shutdown(self) -> None:
        self.active = False
        for partition in list(self.owned_partitions):
            self.unload(partition)
