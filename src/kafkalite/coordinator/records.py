"""The `__consumer_offsets` record formats (offset-commit and group-metadata keys and values) and placement.

Keys and values are an int16 version followed by the versioned struct, laid out as Kafka writes them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kafkalite.coordinator import consumer_group_records as cgr
from kafkalite.coordinator.types import CoordinatorRecord, OffsetAndMetadata
from kafkalite.protocol import primitives as p
from kafkalite.protocol.exceptions import DecodeError
from kafkalite.protocol.schema import F, data
from kafkalite.records import RecordBatchBuilder

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


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupKey:
    group: str


def _versioned(struct_obj: Any, version: int) -> bytes:
    out = bytearray()
    p.write_int16(out, version)
    out += struct_obj.encode(version)
    return bytes(out)


def _writer(struct_cls: Any, version: int) -> Callable[[Any], bytes]:
    """The declaration's compiled codec for one version, behind the int16 version prefix. It writes any
    object that has the struct's field names as attributes, so no struct instance is built per record."""
    codec = struct_cls._schema.codec(version)
    write = codec.write
    prefix = version.to_bytes(2, "big", signed=True)

    def encode(obj: Any) -> bytes:
        out = bytearray(prefix)
        write(out, obj)
        return bytes(out)

    return encode


@functools.lru_cache(maxsize=65536)
def _offset_key(group: str, topic: str, partition: int) -> tuple[bytes, OffsetKey]:
    """An offset-commit key, encoded and decoded (cached: a group commits the same partitions over
    and over)."""
    key = OffsetCommitKey(group=group, topic=topic, partition=partition)
    return _versioned(key, OFFSET_COMMIT_KEY_VERSION), OffsetKey(group, topic, partition)


def offset_key(group: str, topic: str, partition: int) -> bytes:
    return _offset_key(group, topic, partition)[0]


def group_key(group: str) -> bytes:
    return _versioned(GroupMetadataKey(group=group), GROUP_METADATA_KEY_VERSION)


def parse_key(buf: bytes) -> OffsetKey | GroupKey | cgr.ConsumerGroupKey:
    """Decode a record key; DecodeError for a malformed key or a record type we do not know."""
    version, pos = p.read_int16(buf, 0)
    if version in cgr.CONSUMER_GROUP_RECORD_TYPES:
        return cgr.parse_key(version, buf, pos)
    if version in (0, 1):
        k = OffsetCommitKey.decode(buf, version, pos)
        return OffsetKey(k.group, k.topic, k.partition)
    if version == GROUP_METADATA_KEY_VERSION:
        g = GroupMetadataKey.decode(buf, version, pos)
        return GroupKey(g.group)
    raise DecodeError(f"unknown __consumer_offsets key version {version}")


# ---------------------------------------------------------------------------
# values

# OffsetAndMetadata carries the value's field names (expire_timestamp None only at v3, which omits it)
_write_offset_value = _writer(OffsetCommitValue, OFFSET_COMMIT_VALUE_VERSION)
_write_offset_value_with_expiry = _writer(
    OffsetCommitValue, OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY
)


def stored_offset(om: OffsetAndMetadata) -> OffsetAndMetadata:
    """`om` as its record reads back: the version with an expiry (v1) has no leader epoch, and a
    negative expiry reads as none."""
    expire = om.expire_timestamp
    if expire is None or (expire >= 0 and om.leader_epoch == -1):
        return om
    return om._replace(leader_epoch=-1, expire_timestamp=expire if expire >= 0 else None)


def offset_value(om: OffsetAndMetadata) -> bytes:
    if om.expire_timestamp is not None:
        return _write_offset_value_with_expiry(om)
    return _write_offset_value(om)


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


# ---------------------------------------------------------------------------
# records: the bytes to append plus the decoded key and value they hold, which the live path replays


def offset_commit_record(
    group: str, topic: str, partition: int, om: OffsetAndMetadata
) -> CoordinatorRecord:
    key, parsed_key = _offset_key(group, topic, partition)
    return CoordinatorRecord(key, offset_value(om), parsed_key, stored_offset(om))


def offset_tombstone(group: str, topic: str, partition: int) -> CoordinatorRecord:
    key, parsed_key = _offset_key(group, topic, partition)
    return CoordinatorRecord(key, None, parsed_key, None)


def group_metadata_record(group: str, value: Any) -> CoordinatorRecord:
    return CoordinatorRecord(group_key(group), group_value(value), GroupKey(group), value)


def group_tombstone(group: str) -> CoordinatorRecord:
    return CoordinatorRecord(group_key(group), None, GroupKey(group), None)


def encode_batch(
    records: Sequence[CoordinatorRecord], timestamp: int, producer: tuple[int, int] | None = None
) -> bytes:
    """One v2 batch of the records' keys and values, all stamped `timestamp`, built in one pass;
    with `producer` (id, epoch) a transactional batch (no sequence: the coordinator wrote it)."""
    if producer is None:
        builder = RecordBatchBuilder()
    else:
        builder = RecordBatchBuilder(
            producer_id=producer[0], producer_epoch=producer[1], is_transactional=True
        )
    append = builder.append
    for r in records:
        append(r.key, r.value, (), timestamp)
    return builder.build()
