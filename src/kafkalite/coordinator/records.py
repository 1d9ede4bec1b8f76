"""The `__consumer_offsets` record formats (offset-commit and group-metadata keys and values) and placement.

Keys and values are an int16 version followed by the versioned struct, laid out as Kafka writes them.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from kafkalite.coordinator.types import CoordinatorRecord, OffsetAndMetadata
from kafkalite.protocol import primitives as p
from kafkalite.protocol.exceptions import DecodeError
from kafkalite.protocol.schema import F, data

# key versions double as record types: 0/1 offset commit, 2 group metadata
OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
# value versions we write (we read every version Kafka defines)
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_METADATA_VALUE_VERSION = 3

OffsetCommitKey = data(
    "OffsetCommitKey",
    valid="0-1",
    flexible="none",
    fields=[
        F("group", "string", "0+"),
        F("topic", "string", "0+"),
        F("partition", "int32", "0+"),
    ],
)

OffsetCommitValue = data(
    "OffsetCommitValue",
    valid="0-4",
    flexible="4+",
    fields=[
        F("offset", "int64", "0+"),
        F("leader_epoch", "int32", "3+", default=-1, ignorable=True),
        F("metadata", "string", "0+"),
        F("commit_timestamp", "int64", "0+"),
        F("expire_timestamp", "int64", "1", default=-1, ignorable=True),
    ],
)

GroupMetadataKey = data(
    "GroupMetadataKey",
    valid="2",
    flexible="none",
    fields=[F("group", "string", "2")],
)

GroupMetadataValue = data(
    "GroupMetadataValue",
    valid="0-4",
    flexible="4+",
    fields=[
        F("protocol_type", "string", "0+"),
        F("generation", "int32", "0+"),
        F("protocol", "string", "0+", nullable="0+"),
        F("leader", "string", "0+", nullable="0+"),
        F("current_state_timestamp", "int64", "2+", default=-1, ignorable=True),
        F("members", "[]MemberMetadata", "0+"),
    ],
    common={
        "MemberMetadata": [
            F("member_id", "string", "0+"),
            F("group_instance_id", "string", "3+", nullable="3+", ignorable=True),
            F("client_id", "string", "0+"),
            F("client_host", "string", "0+"),
            F("rebalance_timeout", "int32", "1+", ignorable=True),
            F("session_timeout", "int32", "0+"),
            F("subscription", "bytes", "0+"),
            F("assignment", "bytes", "0+"),
        ]
    },
)


# ---------------------------------------------------------------------------
# placement


def java_string_hash(s: str) -> int:
    """Java's `String.hashCode`: over UTF-16 code units, with int32 overflow."""
    h = 0
    units = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(units), 2):
        h = (31 * h + ((units[i] << 8) | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def kafka_abs(n: int) -> int:
    """Kafka's `Utils.abs`: the absolute value, except that Integer.MIN_VALUE maps to 0."""
    return 0 if n == -(2**31) else abs(n)


@functools.lru_cache(maxsize=65536)
def partition_for(group_id: str, num_partitions: int) -> int:
    """The `__consumer_offsets` partition whose leader coordinates this group (as Kafka places it)."""
    return kafka_abs(java_string_hash(group_id)) % num_partitions


# ---------------------------------------------------------------------------
# keys


@dataclass(frozen=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class GroupKey:
    group: str


def _versioned(struct_obj: Any, version: int) -> bytes:
    out = bytearray()
    p.write_int16(out, version)
    out += struct_obj.encode(version)
    return bytes(out)


def offset_key(group: str, topic: str, partition: int) -> bytes:
    key = OffsetCommitKey(group=group, topic=topic, partition=partition)
    return _versioned(key, OFFSET_COMMIT_KEY_VERSION)


def group_key(group: str) -> bytes:
    return _versioned(GroupMetadataKey(group=group), GROUP_METADATA_KEY_VERSION)


def parse_key(buf: bytes) -> OffsetKey | GroupKey:
    """Decode a record key; DecodeError for a malformed key or a record type we do not know."""
    version, pos = p.read_int16(buf, 0)
    if version in (0, 1):
        k = OffsetCommitKey.decode(buf, version, pos)
        return OffsetKey(k.group, k.topic, k.partition)
    if version == GROUP_METADATA_KEY_VERSION:
        g = GroupMetadataKey.decode(buf, version, pos)
        return GroupKey(g.group)
    raise DecodeError(f"unknown __consumer_offsets key version {version}")


# ---------------------------------------------------------------------------
# values


def offset_value(om: OffsetAndMetadata) -> bytes:
    if om.expire_timestamp is not None:
        version = OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY
    else:
        version = OFFSET_COMMIT_VALUE_VERSION
    value = OffsetCommitValue(
        offset=om.offset,
        leader_epoch=om.leader_epoch if version >= 3 else -1,
        metadata=om.metadata,
        commit_timestamp=om.commit_timestamp,
        expire_timestamp=om.expire_timestamp if om.expire_timestamp is not None else -1,
    )
    return _versioned(value, version)


def parse_offset_value(buf: bytes) -> OffsetAndMetadata:
    version, pos = p.read_int16(buf, 0)
    if version not in OffsetCommitValue.VALID_VERSIONS:
        raise DecodeError(f"unknown offset commit value version {version}")
    # newer brokers may append fields (tagged or not); read what we know and ignore the rest
    v = OffsetCommitValue.decode(buf, version, pos, exact=False)
    return OffsetAndMetadata(
        offset=v.offset,
        leader_epoch=v.leader_epoch,
        metadata=v.metadata or "",
        commit_timestamp=v.commit_timestamp,
        expire_timestamp=v.expire_timestamp if v.expire_timestamp >= 0 else None,
    )


def group_value(value: Any) -> bytes:
    """Encode a `GroupMetadataValue` instance at the version we write."""
    return _versioned(value, GROUP_METADATA_VALUE_VERSION)


def parse_group_value(buf: bytes) -> Any:
    """Decode a group-metadata value into a `GroupMetadataValue` instance (any version 0-4)."""
    version, pos = p.read_int16(buf, 0)
    if version not in GroupMetadataValue.VALID_VERSIONS:
        raise DecodeError(f"unknown group metadata value version {version}")
    return GroupMetadataValue.decode(buf, version, pos, exact=False)


def offset_commit_record(
    group: str, topic: str, partition: int, om: OffsetAndMetadata
) -> CoordinatorRecord:
    return CoordinatorRecord(offset_key(group, topic, partition), offset_value(om))


def offset_tombstone(group: str, topic: str, partition: int) -> CoordinatorRecord:
    return CoordinatorRecord(offset_key(group, topic, partition), None)


def group_metadata_record(group: str, value: Any) -> CoordinatorRecord:
    return CoordinatorRecord(group_key(group), group_value(value))


def group_tombstone(group: str) -> CoordinatorRecord:
    return CoordinatorRecord(group_key(group), None)
