"""The share coordinator's state: the durable state of every share-partition per `__share_group_state`
partition, its operations returning (records, result), loading by replay and fencing by state and leader epoch.

As in Kafka, a write is recorded as a ShareUpdate (a delta) and, every `updates_per_snapshot` updates
(or when the state epoch changes), as a whole ShareSnapshot. An update holds the batches that differ
from the share-partition's last snapshot, not from the update before it: the topic is compacted,
which keeps only the last record of each key, and the last snapshot with the last update still
replays to the whole state (the stored state only moves forward per offset, as the batch combiner
keeps the batch of highest delivery count and state).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from kafkalite.coordinator.share_records import (
    DEFAULT_STATE_EPOCH,
    NO_LEADER_EPOCH,
    SHARE_GROUP_STATE_TOPIC,
    SHARE_SNAPSHOT_RECORD_TYPE,
    UNINITIALIZED_START_OFFSET,
    PersisterStateBatch,
    SharePartitionKey,
    ShareSnapshot,
    ShareUpdate,
    combine_state_batches,
    parse_key,
    parse_value,
    partition_for,
    share_tombstone,
    share_update_tombstone,
    snapshot_record,
    update_record,
)
from kafkalite.coordinator.types import CoordinatorRecord
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.exceptions import DecodeError

log = logging.getLogger("kafkalite.coordinator.share")

E = ErrorCode
_SNAPSHOT_EPOCH_MODULUS = 1 << 16  # the snapshot epoch is a uint16 on the wire
# share.coordinator.snapshot.update.records.per.snapshot's default
UPDATES_PER_SNAPSHOT = 500


@dataclass(frozen=True, slots=True)
class ShareStateResult:
    """What an operation answers for one share-partition (the fields its response carries)."""

    error: ErrorCode
    message: str | None = None
    state_epoch: int = DEFAULT_STATE_EPOCH
    start_offset: int = UNINITIALIZED_START_OFFSET
    batches: tuple[PersisterStateBatch, ...] = ()


Outcome = tuple[list[CoordinatorRecord], ShareStateResult]


def _error(code: ErrorCode, message: str | None = None) -> Outcome:
    return [], ShareStateResult(code, message)


class ShareStateManager:
    """The share-partitions of the `__share_group_state` partitions this broker leads.

    Operations return the records to append and the answer to give once they are committed; the
    state changes only when records are applied (`apply` after an append, `replay` while loading), so a
    reload rebuilds what the live path built. As in Kafka, the highest leader epoch seen is also kept in
    memory, raised by reads, to fence writes from a former partition leader.
    """

    def __init__(
        self, num_partitions: int, updates_per_snapshot: int = UPDATES_PER_SNAPSHOT
    ) -> None:
        self.num_partitions = num_partitions
        self.updates_per_snapshot = updates_per_snapshot
        # each share-partition's last ShareSnapshot (what updates are written against) and the
        # number of ShareUpdates applied since
        self.snapshots: dict[int, dict[SharePartitionKey, ShareSnapshot]] = {}
        self.update_counts: dict[int, dict[SharePartitionKey, int]] = {}
        # partitions we lead -> their leader epoch when we became leader
        self.coordinator_epochs: dict[int, int] = {}
        self.loading_partitions: set[int] = set()
        self.states: dict[int, dict[SharePartitionKey, ShareSnapshot]] = {}
        self.leader_epochs: dict[int, dict[SharePartitionKey, int]] = {}

    # ------------------------------------------------------------------ placement

    def partition_for(self, key: SharePartitionKey) -> int:
        return partition_for(key.coordinator_key(), self.num_partitions)

    def locate(self, key: SharePartitionKey) -> int | ErrorCode:
        """The partition of `key`, or LOAD_IN_PROGRESS / NOT_COORDINATOR when we cannot serve it."""
        partition = self.partition_for(key)
        if partition in self.loading_partitions:
            return E.COORDINATOR_LOAD_IN_PROGRESS
        if partition not in self.coordinator_epochs:
            return E.NOT_COORDINATOR
        return partition

    def owns(self, partition: int, coordinator_epoch: int) -> bool:
        return (
            self.coordinator_epochs.get(partition) == coordinator_epoch
            and partition not in self.loading_partitions
        )

    def state(self, key: SharePartitionKey) -> ShareSnapshot | None:
        return self.states.get(self.partition_for(key), {}).get(key)

    def _check(self, key: SharePartitionKey) -> tuple[int, ShareSnapshot | None] | ShareStateResult:
        """(partition, stored state) of a key we serve, or the error to answer."""
        if not key.group_id:
            return ShareStateResult(E.INVALID_REQUEST, "the group id is empty")
        if key.partition < 0:
            return ShareStateResult(E.INVALID_REQUEST, "the partition id cannot be negative")
        located = self.locate(key)
        if isinstance(located, ErrorCode):
            return ShareStateResult(located)
        return located, self.states.get(located, {}).get(key)

    def _leader_fenced(self, partition: int, key: SharePartitionKey, leader_epoch: int) -> bool:
        return self.leader_epochs.get(partition, {}).get(key, NO_LEADER_EPOCH) > leader_epoch

    # ------------------------------------------------------------------ operations

    def initialize(self, key: SharePartitionKey, state_epoch: int, start_offset: int) -> Outcome:
        """A fresh snapshot at `state_epoch` from `start_offset`, no batches (FENCED_STATE_EPOCH when
        a newer state epoch is stored)."""
        checked = self._check(key)
        if isinstance(checked, ShareStateResult):
            return [], checked
        _, current = checked
        if current is not None and current.state_epoch > state_epoch:
            return _error(E.FENCED_STATE_EPOCH, f"state epoch {current.state_epoch} is stored")
        snapshot = ShareSnapshot(
            snapshot_epoch=_next_snapshot_epoch(current),
            state_epoch=state_epoch,
            leader_epoch=current.leader_epoch if current is not None else NO_LEADER_EPOCH,
            start_offset=start_offset,
            state_batches=(),
        )
        return [snapshot_record(key, snapshot)], ShareStateResult(
            E.NO_ERROR, None, state_epoch, start_offset
        )

    def read(self, key: SharePartitionKey, leader_epoch: int) -> Outcome:
        """The stored state (an uninitialized share-partition reads as state epoch 0, start offset -1,
        no batches, as Kafka answers); a read by a newer leader fences writes of older ones, a read
        with leader epoch -1 only looks."""
        checked = self._check(key)
        if isinstance(checked, ShareStateResult):
            return [], checked
        partition, current = checked
        observer = leader_epoch < 0  # an administrator's look (kafkalite): no fencing either way
        if not observer and self._leader_fenced(partition, key, leader_epoch):
            return _error(E.FENCED_LEADER_EPOCH, "the leader epoch is older than the one recorded")
        if current is None:
            return [], ShareStateResult(E.NO_ERROR)
        if not observer:
            self.leader_epochs.setdefault(partition, {})[key] = leader_epoch
        return [], ShareStateResult(
            E.NO_ERROR, None, current.state_epoch, current.start_offset, current.state_batches
        )

    def read_summary(self, key: SharePartitionKey, leader_epoch: int) -> Outcome:
        """The stored state epoch and start offset."""
        checked = self._check(key)
        if isinstance(checked, ShareStateResult):
            return [], checked
        partition, current = checked
        if self._leader_fenced(partition, key, leader_epoch):
            return _error(E.FENCED_LEADER_EPOCH, "the leader epoch is older than the one recorded")
        if current is None:
            return [], ShareStateResult(E.NO_ERROR)
        return [], ShareStateResult(E.NO_ERROR, None, current.state_epoch, current.start_offset)

    def write(
        self,
        key: SharePartitionKey,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        batches: tuple[PersisterStateBatch, ...] | list[PersisterStateBatch],
    ) -> Outcome:
        """Merge a write into the stored state and record the result as a whole snapshot.

        Fenced with FENCED_LEADER_EPOCH when a newer leader epoch was seen and FENCED_STATE_EPOCH
        when a newer state epoch is stored. -1 for an epoch or the start offset keeps the stored
        one; the new batches are combined with the stored ones and cut at the start offset."""
        checked = self._check(key)
        if isinstance(checked, ShareStateResult):
            return [], checked
        partition, current = checked
        if self._leader_fenced(partition, key, leader_epoch):
            return _error(E.FENCED_LEADER_EPOCH, "the leader epoch is older than the one recorded")
        if current is not None and current.state_epoch > state_epoch:
            return _error(E.FENCED_STATE_EPOCH, "the state epoch is older than the one stored")
        if current is None:
            snapshot = ShareSnapshot(
                0,
                state_epoch,
                leader_epoch,
                start_offset,
                combine_state_batches((), batches, start_offset),
            )
            record = snapshot_record(key, snapshot)
        else:
            new_start = current.start_offset if start_offset == -1 else start_offset
            new_state_epoch = current.state_epoch if state_epoch == -1 else state_epoch
            merged = combine_state_batches(current.state_batches, batches, new_start)
            base = self.snapshots.get(partition, {}).get(key)
            updates = self.update_counts.get(partition, {}).get(key, 0)
            if (
                base is None
                or updates >= self.updates_per_snapshot
                or new_state_epoch != current.state_epoch
                or new_start < current.start_offset  # a delta cannot bring cut offsets back
            ):
                snapshot = ShareSnapshot(
                    snapshot_epoch=_next_snapshot_epoch(current),
                    state_epoch=new_state_epoch,
                    leader_epoch=current.leader_epoch if leader_epoch == -1 else leader_epoch,
                    start_offset=new_start,
                    state_batches=merged,
                )
                record = snapshot_record(key, snapshot)
            else:
                snapshot = ShareSnapshot(
                    snapshot_epoch=current.snapshot_epoch,
                    state_epoch=current.state_epoch,
                    leader_epoch=current.leader_epoch if leader_epoch == -1 else leader_epoch,
                    start_offset=new_start,
                    state_batches=merged,
                )
                update = ShareUpdate(
                    snapshot_epoch=base.snapshot_epoch,
                    leader_epoch=snapshot.leader_epoch,
                    start_offset=new_start,
                    state_batches=changed_since(base.state_batches, merged),
                )
                record = update_record(key, update, snapshot)
        return [record], ShareStateResult(
            E.NO_ERROR, None, snapshot.state_epoch, snapshot.start_offset, snapshot.state_batches
        )

    def delete(self, key: SharePartitionKey) -> Outcome:
        """A tombstone for the share-partition's state (nothing to write when there is none)."""
        checked = self._check(key)
        if isinstance(checked, ShareStateResult):
            return [], checked
        _, current = checked
        if current is None:
            return [], ShareStateResult(E.NO_ERROR)
        return [share_tombstone(key), share_update_tombstone(key)], ShareStateResult(E.NO_ERROR)

    # ------------------------------------------------------------------ applying records

    def apply(self, partition: int, record: CoordinatorRecord) -> None:
        """Apply a record this coordinator appended (its decoded key and value)."""
        self._apply(partition, record.parsed_key, record.parsed_value)

    def _apply(
        self,
        partition: int,
        key: SharePartitionKey,
        value: ShareSnapshot | ShareUpdate | tuple[ShareUpdate, ShareSnapshot | None] | None,
    ) -> None:
        states = self.states.setdefault(partition, {})
        epochs = self.leader_epochs.setdefault(partition, {})
        snapshots = self.snapshots.setdefault(partition, {})
        counts = self.update_counts.setdefault(partition, {})
        if value is None:
            states.pop(key, None)
            epochs.pop(key, None)
            snapshots.pop(key, None)
            counts.pop(key, None)
            return
        merged: ShareSnapshot | None = None
        if isinstance(value, tuple):  # an update this coordinator wrote, with its result
            value, merged = value
        if isinstance(value, ShareSnapshot):
            snapshots[key] = value
            counts[key] = 0
        else:
            counts[key] = counts.get(key, 0) + 1
            current = states.get(key)
            if merged is not None:
                value = merged
            elif current is None:
                value = ShareSnapshot(
                    value.snapshot_epoch,
                    DEFAULT_STATE_EPOCH,
                    value.leader_epoch,
                    value.start_offset,
                    combine_state_batches((), value.state_batches, value.start_offset),
                )
            else:  # Kafka's merge of an update into the snapshot so far
                new_start = current.start_offset if value.start_offset == -1 else value.start_offset
                value = ShareSnapshot(
                    current.snapshot_epoch,
                    current.state_epoch,
                    current.leader_epoch if value.leader_epoch == -1 else value.leader_epoch,
                    new_start,
                    combine_state_batches(current.state_batches, value.state_batches, new_start),
                )
        states[key] = value
        if value.leader_epoch > epochs.get(key, NO_LEADER_EPOCH):
            epochs[key] = value.leader_epoch

    def _replay(self, partition: int, key: bytes | None, value: bytes | None) -> None:
        if key is None:
            log.warning(
                "%s-%d: skipping a record without a key", SHARE_GROUP_STATE_TOPIC, partition
            )
            return
        try:
            record_type, parsed_key = parse_key(key)
            if value is None:
                if record_type != SHARE_SNAPSHOT_RECORD_TYPE:
                    return  # an update's tombstone deletes nothing on its own
                parsed: ShareSnapshot | ShareUpdate | None = None
            else:
                parsed = parse_value(record_type, value)
        except DecodeError as exc:
            log.warning(
                "%s-%d: skipping an unreadable record: %s", SHARE_GROUP_STATE_TOPIC, partition, exc
            )
            return
        self._apply(partition, parsed_key, parsed)

    # ------------------------------------------------------------------ ownership

    def begin_loading(self, partition: int, coordinator_epoch: int) -> None:
        """We lead this partition: its keys answer LOAD_IN_PROGRESS until it is replayed."""
        self.coordinator_epochs[partition] = coordinator_epoch
        self.loading_partitions.add(partition)
        self.states[partition] = {}
        self.leader_epochs[partition] = {}
        self.snapshots[partition] = {}
        self.update_counts[partition] = {}

    def replay(self, partition: int, key: bytes | None, value: bytes | None) -> None:
        """Feed one record of the partition's log, oldest first, while it loads."""
        if partition not in self.loading_partitions:
            log.warning("%s-%d is not loading; record ignored", SHARE_GROUP_STATE_TOPIC, partition)
            return
        self._replay(partition, key, value)

    def finish_loading(self, partition: int) -> None:
        if partition not in self.loading_partitions:
            return
        self.loading_partitions.discard(partition)
        log.debug(  # the broker's share coordinator sums up a start at INFO
            "%s-%d loaded at coordinator epoch %d: %d share-partition(s)",
            SHARE_GROUP_STATE_TOPIC,
            partition,
            self.coordinator_epochs.get(partition, -1),
            len(self.states.get(partition, {})),
        )

    def unload(self, partition: int) -> None:
        self.coordinator_epochs.pop(partition, None)
        self.loading_partitions.discard(partition)
        self.states.pop(partition, None)
        self.leader_epochs.pop(partition, None)
        self.snapshots.pop(partition, None)
        self.update_counts.pop(partition, None)

    def shutdown(self) -> None:
        for partition in list(self.coordinator_epochs):
            self.unload(partition)


def changed_since(
    base: tuple[PersisterStateBatch, ...], merged: tuple[PersisterStateBatch, ...]
) -> tuple[PersisterStateBatch, ...]:
    """The batches of `merged` that `base` does not hold as they are: combined with `base` (cut
    at the new start offset) they give `merged` again, since `merged` is at least `base` at every
    offset and the combiner's output is canonical."""
    if not base:
        return merged
    held = set(base)
    return tuple(b for b in merged if b not in held)


def _next_snapshot_epoch(current: ShareSnapshot | None) -> int:
    return 0 if current is None else (current.snapshot_epoch + 1) % _SNAPSHOT_EPOCH_MODULUS


__all__ = [
    "Outcome",
    "PersisterStateBatch",
    "SharePartitionKey",
    "ShareSnapshot",
    "ShareStateManager",
    "ShareStateResult",
]
