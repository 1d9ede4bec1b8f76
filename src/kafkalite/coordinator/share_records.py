"""The `__share_group_state` record format (ShareSnapshot key type 0, ShareUpdate key type 1, values v0), the
coordinator key and its placement, and Kafka's combination of overlapping state batches.
"""

from __future__ import annotations

import base64
import functools
import heapq
import itertools
import uuid
from dataclasses import dataclass
from typing import Any

from kafkalite.coordinator.records import java_string_hash, kafka_abs
from kafkalite.coordinator.types import CoordinatorRecord
from kafkalite.protocol import primitives as p
from kafkalite.protocol.exceptions import DecodeError
from kafkalite.protocol.schema import F, data

SHARE_GROUP_STATE_TOPIC = "__share_group_state"
# the key version is the record type, as in Kafka's coordinator records
SHARE_SNAPSHOT_RECORD_TYPE = 0
SHARE_UPDATE_RECORD_TYPE = 1
SHARE_VALUE_VERSION = 0
# what a read answers for a share-partition nobody initialized (Kafka's PartitionFactory)
UNINITIALIZED_START_OFFSET = -1
DEFAULT_STATE_EPOCH = 0
NO_LEADER_EPOCH = -1

ShareSnapshotKey = data(
    "ShareSnapshotKey",
    valid="0",
    flexible="none",
    fields=[F("group_id", "string", "0"), F("topic_id", "uuid", "0"), F("partition", "int32", "0")],
)

ShareUpdateKey = data(
    "ShareUpdateKey",
    valid="1",
    flexible="none",
    fields=[F("group_id", "string", "1"), F("topic_id", "uuid", "1"), F("partition", "int32", "1")],
)

_STATE_BATCH = [
    F("first_offset", "int64", "0"),
    F("last_offset", "int64", "0"),
    F("delivery_state", "int8", "0"),
    F("delivery_count", "int16", "0"),
]

ShareSnapshotValue = data(
    "ShareSnapshotValue",
    valid="0",
    flexible="0+",
    fields=[
        F("snapshot_epoch", "uint16", "0"),
        F("state_epoch", "int32", "0+"),
        F("leader_epoch", "int32", "0+"),
        F("start_offset", "int64", "0"),
        F("state_batches", "[]StateBatch", "0", fields=_STATE_BATCH),
    ],
)

ShareUpdateValue = data(
    "ShareUpdateValue",
    valid="0",
    flexible="0+",
    fields=[
        F("snapshot_epoch", "uint16", "0"),
        F("leader_epoch", "int32", "0+"),
        F("start_offset", "int64", "0"),
        F("state_batches", "[]StateBatch", "0", fields=_STATE_BATCH),
    ],
)


def kafka_uuid_str(value: uuid.UUID) -> str:
    """Kafka's `Uuid.toString()`: 22 characters of URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(value.bytes).decode("ascii").rstrip("=")


@dataclass(frozen=True, slots=True)
class SharePartitionKey:
    """One share-partition: a share group's view of one topic partition."""

    group_id: str
    topic_id: uuid.UUID
    partition: int

    def coordinator_key(self) -> str:
        """Kafka's `SharePartitionKey.asCoordinatorKey()`: "groupId:topicId:partition"."""
        return f"{self.group_id}:{kafka_uuid_str(self.topic_id)}:{self.partition}"


@dataclass(frozen=True, slots=True)
class PersisterStateBatch:
    """A run of offsets [first_offset, last_offset] sharing one delivery state and delivery count."""

    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class ShareSnapshot:
    """The whole durable state of one share-partition (a ShareSnapshotValue)."""

    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: tuple[PersisterStateBatch, ...]


@dataclass(frozen=True, slots=True)
class ShareUpdate:
    """An incremental change (a ShareUpdateValue), merged into the state so far on replay."""

    snapshot_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: tuple[PersisterStateBatch, ...]


@functools.lru_cache(maxsize=65536)
def partition_for(coordinator_key: str, num_partitions: int) -> int:
    """The `__share_group_state` partition whose leader coordinates this key (Kafka's placement)."""
    return kafka_abs(java_string_hash(coordinator_key)) % num_partitions


# ---------------------------------------------------------------------------
# framing: an int16 version (the record type for keys), then the versioned struct


def _versioned(struct_obj: Any, version: int) -> bytes:
    out = bytearray()
    p.write_int16(out, version)
    out += struct_obj.encode(version)
    return bytes(out)


def share_snapshot_key(key: SharePartitionKey) -> bytes:
    return _versioned(
        ShareSnapshotKey(group_id=key.group_id, topic_id=key.topic_id, partition=key.partition),
        SHARE_SNAPSHOT_RECORD_TYPE,
    )


def share_update_key(key: SharePartitionKey) -> bytes:
    return _versioned(
        ShareUpdateKey(group_id=key.group_id, topic_id=key.topic_id, partition=key.partition),
        SHARE_UPDATE_RECORD_TYPE,
    )


def _batches_out(cls: Any, batches: tuple[PersisterStateBatch, ...]) -> list[Any]:
    return [
        cls(
            first_offset=b.first_offset,
            last_offset=b.last_offset,
            delivery_state=b.delivery_state,
            delivery_count=b.delivery_count,
        )
        for b in batches
    ]


def _batches_in(batches: list[Any]) -> tuple[PersisterStateBatch, ...]:
    return tuple(
        PersisterStateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
        for b in batches
    )


def share_snapshot_value(snapshot: ShareSnapshot) -> bytes:
    value = ShareSnapshotValue(
        snapshot_epoch=snapshot.snapshot_epoch,
        state_epoch=snapshot.state_epoch,
        leader_epoch=snapshot.leader_epoch,
        start_offset=snapshot.start_offset,
        state_batches=_batches_out(ShareSnapshotValue.StateBatch, snapshot.state_batches),
    )
    return _versioned(value, SHARE_VALUE_VERSION)


def share_update_value(update: ShareUpdate) -> bytes:
    value = ShareUpdateValue(
        snapshot_epoch=update.snapshot_epoch,
        leader_epoch=update.leader_epoch,
        start_offset=update.start_offset,
        state_batches=_batches_out(ShareUpdateValue.StateBatch, update.state_batches),
    )
    return _versioned(value, SHARE_VALUE_VERSION)


def parse_key(buf: bytes) -> tuple[int, SharePartitionKey]:
    """(record type, key) of a record key; DecodeError for a malformed key or an unknown type."""
    version, pos = p.read_int16(buf, 0)
    if version == SHARE_SNAPSHOT_RECORD_TYPE:
        k = ShareSnapshotKey.decode(buf, version, pos)
    elif version == SHARE_UPDATE_RECORD_TYPE:
        k = ShareUpdateKey.decode(buf, version, pos)
    else:
        raise DecodeError(f"unknown __share_group_state record type {version}")
    if k.partition < 0:
        raise DecodeError(f"negative partition {k.partition} in a __share_group_state key")
    return version, SharePartitionKey(k.group_id, k.topic_id, k.partition)


def parse_value(record_type: int, buf: bytes) -> ShareSnapshot | ShareUpdate:
    """The value of a record of `record_type` (a version this side does not know is an error)."""
    version, pos = p.read_int16(buf, 0)
    if version != SHARE_VALUE_VERSION:
        raise DecodeError(f"unknown __share_group_state value version {version}")
    if record_type == SHARE_SNAPSHOT_RECORD_TYPE:
        s = ShareSnapshotValue.decode(buf, version, pos)
        return ShareSnapshot(
            s.snapshot_epoch,
            s.state_epoch,
            s.leader_epoch,
            s.start_offset,
            _batches_in(s.state_batches),
        )
    u = ShareUpdateValue.decode(buf, version, pos)
    return ShareUpdate(
        u.snapshot_epoch, u.leader_epoch, u.start_offset, _batches_in(u.state_batches)
    )


def snapshot_record(key: SharePartitionKey, snapshot: ShareSnapshot) -> CoordinatorRecord:
    return CoordinatorRecord(share_snapshot_key(key), share_snapshot_value(snapshot), key, snapshot)


def update_record(
    key: SharePartitionKey, update: ShareUpdate, merged: ShareSnapshot | None = None
) -> CoordinatorRecord:
    """A ShareUpdate record; `merged` (the state once it is applied, when the writer knows it)
    spares the live path the merge that a replay does."""
    return CoordinatorRecord(
        share_update_key(key), share_update_value(update), key, (update, merged)
    )


def share_tombstone(key: SharePartitionKey) -> CoordinatorRecord:
    """The record that deletes a share-partition's state (compaction drops it later)."""
    return CoordinatorRecord(share_snapshot_key(key), None, key, None)


def share_update_tombstone(key: SharePartitionKey) -> CoordinatorRecord:
    """Deletes the share-partition's last ShareUpdate, so compaction cannot leave it alone to
    bring a deleted state back on a later load (replay ignores it otherwise)."""
    return CoordinatorRecord(share_update_key(key), None, key, None)


# ---------------------------------------------------------------------------
# combining state batches


def combine_state_batches(
    so_far: tuple[PersisterStateBatch, ...] | list[PersisterStateBatch],
    new: tuple[PersisterStateBatch, ...] | list[PersisterStateBatch],
    start_offset: int,
) -> tuple[PersisterStateBatch, ...]:
    """Kafka's PersisterStateBatchCombiner, as a sweep: batches wholly below `start_offset` are
    dropped and one straddling it is cut there (-1: no cut); each offset then keeps the batch of
    highest priority covering it, and neighbouring runs of equal state and count are joined.
    The result is sorted and free of overlaps."""
    batches = [b for b in (*so_far, *new) if b.first_offset <= b.last_offset]
    if start_offset != UNINITIALIZED_START_OFFSET:
        batches = [
            b
            if b.first_offset >= start_offset
            else PersisterStateBatch(
                start_offset, b.last_offset, b.delivery_state, b.delivery_count
            )
            for b in batches
            if b.last_offset >= start_offset
        ]
    if not batches:
        return ()
    points = sorted({b.first_offset for b in batches} | {b.last_offset + 1 for b in batches})
    by_start = sorted(batches, key=lambda b: b.first_offset)
    # max-heap on priority of the batches started so far; ended ones are dropped lazily
    heap: list[tuple[int, int, int]] = []
    out: list[PersisterStateBatch] = []
    i = 0
    for start, nxt in itertools.pairwise(points):
        while i < len(by_start) and by_start[i].first_offset <= start:
            b = by_start[i]
            heapq.heappush(heap, (-b.delivery_count, -b.delivery_state, b.last_offset))
            i += 1
        while heap and heap[0][2] < start:
            heapq.heappop(heap)
        if not heap:
            continue
        count, state = -heap[0][0], -heap[0][1]
        last = out[-1] if out else None
        if (
            last is not None
            and last.last_offset == start - 1
            and (last.delivery_count, last.delivery_state) == (count, state)
        ):
            out[-1] = PersisterStateBatch(last.first_offset, nxt - 1, state, count)
        else:
            out.append(PersisterStateBatch(start, nxt - 1, state, count))
    return tuple(out)


__all__ = [
    "DEFAULT_STATE_EPOCH",
    "NO_LEADER_EPOCH",
    "SHARE_GROUP_STATE_TOPIC",
    "SHARE_SNAPSHOT_RECORD_TYPE",
    "SHARE_UPDATE_RECORD_TYPE",
    "UNINITIALIZED_START_OFFSET",
    "PersisterStateBatch",
    "SharePartitionKey",
    "ShareSnapshot",
    "ShareUpdate",
    "combine_state_batches",
    "kafka_uuid_str",
    "parse_key",
    "parse_value",
    "partition_for",
    "share_snapshot_key",
    "share_tombstone",
    "share_update_key",
    "share_update_tombstone",
    "snapshot_record",
    "update_record",
]
