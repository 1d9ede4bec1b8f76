"""The bytes of KIP-848's `__consumer_offsets` records (types 3 group epoch, 5 member subscription,
6 target assignment epoch, 7 target assignment of a member, 8 current member assignment), as Kafka writes them.

A key is the int16 record type and the key struct (version 0, not flexible); a value is int16 version 0
and the flexible value struct; a null value is a tombstone.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from kafkalite.coordinator.consumer_group import (
    MemberState,
)
from kafkalite.coordinator.consumer_group_types import (
    Assignment,
    ConsumerGroupRecord,
    CurrentAssignmentRecord,
    GroupEpochRecord,
    MemberSubscription,
    MemberSubscriptionRecord,
    TargetAssignmentEpochRecord,
    TargetAssignmentMemberRecord,
)
from kafkalite.coordinator.types import CoordinatorRecord
from kafkalite.protocol import primitives as p
from kafkalite.protocol.exceptions import DecodeError
from kafkalite.protocol.schema import F, data

GROUP_EPOCH = 3
MEMBER_METADATA = 5
TARGET_ASSIGNMENT_METADATA = 6
TARGET_ASSIGNMENT_MEMBER = 7
CURRENT_MEMBER_ASSIGNMENT = 8
CONSUMER_GROUP_RECORD_TYPES = frozenset(
    {
        GROUP_EPOCH,
        4,
        MEMBER_METADATA,
        TARGET_ASSIGNMENT_METADATA,
        TARGET_ASSIGNMENT_MEMBER,
        CURRENT_MEMBER_ASSIGNMENT,
    }
)
_PARTITION_METADATA = (
    4  # written by Kafka 4.0 only; kafkalite keeps a metadata hash instead (4.1's way)
)

_STATE_BYTES = {
    MemberState.STABLE: 0,
    MemberState.UNREVOKED_PARTITIONS: 1,
    MemberState.UNRELEASED_PARTITIONS: 2,
}
_STATES = {v: k for k, v in _STATE_BYTES.items()}

GroupKey = data(
    "ConsumerGroupKey", valid="0", flexible="none", fields=[F("group_id", "string", "0")]
)
MemberKey = data(
    "ConsumerGroupMemberKey",
    valid="0",
    flexible="none",
    fields=[F("group_id", "string", "0"), F("member_id", "string", "0")],
)
GroupEpochValue = data(
    "ConsumerGroupMetadataValue",
    valid="0",
    flexible="0+",
    fields=[
        F("epoch", "int32", "0+"),
        F("metadata_hash", "int64", "0+", tag=0, tagged="0+", default=0),
    ],
)
MemberMetadataValue = data(
    "ConsumerGroupMemberMetadataValue",
    valid="0",
    flexible="0+",
    fields=[
        F("instance_id", "string", "0+", nullable="0+"),
        F("rack_id", "string", "0+", nullable="0+"),
        F("client_id", "string", "0+"),
        F("client_host", "string", "0+"),
        F("subscribed_topic_names", "[]string", "0+"),
        F("subscribed_topic_regex", "string", "0+", nullable="0+"),
        F("rebalance_timeout_ms", "int32", "0+", default=-1),
        F("server_assignor", "string", "0+", nullable="0+"),
    ],
)
TargetEpochValue = data(
    "ConsumerGroupTargetAssignmentMetadataValue",
    valid="0",
    flexible="0+",
    fields=[F("assignment_epoch", "int32", "0+")],
)
_TOPIC_PARTITIONS = [F("topic_id", "uuid", "0+"), F("partitions", "[]int32", "0+")]
TargetMemberValue = data(
    "ConsumerGroupTargetAssignmentMemberValue",
    valid="0",
    flexible="0+",
    fields=[F("topic_partitions", "[]TopicPartition", "0+", fields=_TOPIC_PARTITIONS)],
)
CurrentAssignmentValue = data(
    "ConsumerGroupCurrentMemberAssignmentValue",
    valid="0",
    flexible="0+",
    fields=[
        F("member_epoch", "int32", "0+"),
        F("previous_member_epoch", "int32", "0+"),
        F("state", "int8", "0+"),
        F("assigned_partitions", "[]TopicPartitions", "0+"),
        F("partitions_pending_revocation", "[]TopicPartitions", "0+"),
    ],
    common={"TopicPartitions": _TOPIC_PARTITIONS},
)


@dataclass(frozen=True, slots=True)
class ConsumerGroupKey:
    """The decoded key of a consumer-group record (`member_id` None for group-level types)."""

    record_type: int
    group: str
    member_id: str | None = None


def _prefixed(version: int, obj: Any) -> bytes:
    out = bytearray()
    p.write_int16(out, version)
    out += obj.encode(0)
    return bytes(out)


def _topic_partitions(cls: Any, assignment: Assignment) -> list[Any]:
    return [
        cls(topic_id=t, partitions=sorted(ps))
        for t, ps in sorted(assignment.items(), key=lambda kv: str(kv[0]))
        if ps
    ]


def _assignment(items: list[Any]) -> Assignment:
    out: dict[uuid.UUID, frozenset[int]] = {}
    for tp in items:
        if tp.partitions:
            out[tp.topic_id] = out.get(tp.topic_id, frozenset()) | frozenset(tp.partitions)
    return out


def to_coordinator_record(r: ConsumerGroupRecord) -> CoordinatorRecord:
    """The bytes of one record, with its decoded key and value for the live replay."""
    value: bytes | None
    if isinstance(r, GroupEpochRecord):
        key = ConsumerGroupKey(GROUP_EPOCH, r.group_id)
        kb = _prefixed(GROUP_EPOCH, GroupKey(group_id=r.group_id))
        value = (
            None
            if r.epoch is None
            else _prefixed(0, GroupEpochValue(epoch=r.epoch, metadata_hash=r.metadata_hash))
        )
    elif isinstance(r, MemberSubscriptionRecord):
        key = ConsumerGroupKey(MEMBER_METADATA, r.group_id, r.member_id)
        kb = _prefixed(MEMBER_METADATA, MemberKey(group_id=r.group_id, member_id=r.member_id))
        s = r.subscription
        value = (
            None
            if s is None
            else _prefixed(
                0,
                MemberMetadataValue(
                    instance_id=s.instance_id,
                    rack_id=s.rack_id,
                    client_id=s.client_id,
                    client_host=s.client_host,
                    subscribed_topic_names=list(s.subscribed_topic_names),
                    subscribed_topic_regex=s.subscribed_topic_regex,
                    rebalance_timeout_ms=s.rebalance_timeout_ms,
                    server_assignor=s.server_assignor,
                ),
            )
        )
    elif isinstance(r, TargetAssignmentEpochRecord):
        key = ConsumerGroupKey(TARGET_ASSIGNMENT_METADATA, r.group_id)
        kb = _prefixed(TARGET_ASSIGNMENT_METADATA, GroupKey(group_id=r.group_id))
        value = (
            None
            if r.assignment_epoch is None
            else _prefixed(0, TargetEpochValue(assignment_epoch=r.assignment_epoch))
        )
    elif isinstance(r, TargetAssignmentMemberRecord):
        key = ConsumerGroupKey(TARGET_ASSIGNMENT_MEMBER, r.group_id, r.member_id)
        kb = _prefixed(
            TARGET_ASSIGNMENT_MEMBER, MemberKey(group_id=r.group_id, member_id=r.member_id)
        )
        value = (
            None
            if r.partitions is None
            else _prefixed(
                0,
                TargetMemberValue(
                    topic_partitions=_topic_partitions(
                        TargetMemberValue.TopicPartition, r.partitions
                    )
                ),
            )
        )
    else:
        key = ConsumerGroupKey(CURRENT_MEMBER_ASSIGNMENT, r.group_id, r.member_id)
        kb = _prefixed(
            CURRENT_MEMBER_ASSIGNMENT, MemberKey(group_id=r.group_id, member_id=r.member_id)
        )
        tp = CurrentAssignmentValue.TopicPartitions
        value = (
            None
            if r.tombstone
            else _prefixed(
                0,
                CurrentAssignmentValue(
                    member_epoch=r.member_epoch,
                    previous_member_epoch=r.previous_member_epoch,
                    state=_STATE_BYTES[r.state],
                    assigned_partitions=_topic_partitions(tp, r.assigned),
                    partitions_pending_revocation=_topic_partitions(tp, r.pending_revocation),
                ),
            )
        )
    return CoordinatorRecord(kb, value, key, r)


def parse_key(record_type: int, buf: bytes, pos: int) -> ConsumerGroupKey:
    if record_type in (GROUP_EPOCH, TARGET_ASSIGNMENT_METADATA, _PARTITION_METADATA):
        return ConsumerGroupKey(record_type, GroupKey.decode(buf, 0, pos).group_id)
    k = MemberKey.decode(buf, 0, pos)
    return ConsumerGroupKey(record_type, k.group_id, k.member_id)


def _value(cls: Any, buf: bytes) -> Any:
    version, pos = p.read_int16(buf, 0)
    if version != 0:
        raise DecodeError(f"unknown {cls.__name__} version {version}")
    return cls.decode(buf, 0, pos, exact=False)


def parse_record(key: ConsumerGroupKey, value: bytes | None) -> ConsumerGroupRecord | None:
    """The in-memory record a key and value decode to (None: a type kafkalite does not keep)."""
    g, m = key.group, key.member_id or ""
    t = key.record_type
    if t == GROUP_EPOCH:
        if value is None:
            return GroupEpochRecord(g, None)
        v = _value(GroupEpochValue, value)
        return GroupEpochRecord(g, v.epoch, v.metadata_hash)
    if t == MEMBER_METADATA:
        if value is None:
            return MemberSubscriptionRecord(g, m, None)
        v = _value(MemberMetadataValue, value)
        return MemberSubscriptionRecord(
            g,
            m,
            MemberSubscription(
                v.instance_id,
                v.rack_id,
                v.client_id,
                v.client_host,
                tuple(v.subscribed_topic_names),
                v.subscribed_topic_regex,
                v.rebalance_timeout_ms,
                v.server_assignor,
            ),
        )
    if t == TARGET_ASSIGNMENT_METADATA:
        if value is None:
            return TargetAssignmentEpochRecord(g, None)
        return TargetAssignmentEpochRecord(g, _value(TargetEpochValue, value).assignment_epoch)
    if t == TARGET_ASSIGNMENT_MEMBER:
        if value is None:
            return TargetAssignmentMemberRecord(g, m, None)
        return TargetAssignmentMemberRecord(
            g, m, _assignment(_value(TargetMemberValue, value).topic_partitions)
        )
    if t == CURRENT_MEMBER_ASSIGNMENT:
        if value is None:
            return CurrentAssignmentRecord(g, m, tombstone=True)
        v = _value(CurrentAssignmentValue, value)
        state = _STATES.get(v.state)
        if state is None:
            raise DecodeError(f"unknown member state {v.state}")
        return CurrentAssignmentRecord(
            g,
            m,
            v.member_epoch,
            v.previous_member_epoch,
            state,
            _assignment(v.assigned_partitions),
            _assignment(v.partitions_pending_revocation),
        )
    return None  # type 4 (Kafka 4.0's subscription metadata): the metadata hash replaces it
