"""Value types of the group coordinator: configuration, committed offsets, records to append, results.

Results mirror the response fields of the group APIs so broker handlers only translate names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from kafkalite.protocol.errors import ErrorCode

UNKNOWN_MEMBER_ID = ""
NO_GENERATION = -1
CONSUMER_PROTOCOL_TYPE = "consumer"
OFFSETS_TOPIC = "__consumer_offsets"


@dataclass(frozen=True)
class CoordinatorConfig:
    """Broker settings the coordinator obeys (Kafka's property names in snake_case, same defaults)."""

    offsets_topic_num_partitions: int = 50
    group_min_session_timeout_ms: int = 6_000
    group_max_session_timeout_ms: int = 1_800_000
    group_initial_rebalance_delay_ms: int = 3_000
    group_max_size: int = 2**31 - 1
    offsets_retention_minutes: int = 7 * 24 * 60
    offsets_retention_check_interval_ms: int = 600_000
    offset_metadata_max_bytes: int = 4096
    # a new member's JoinGroup may wait this long before the member is dropped (it has no id to heartbeat)
    new_member_join_timeout_ms: int = 300_000

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60_000


class TopicPartition(NamedTuple):
    topic: str
    partition: int


class OffsetAndMetadata(NamedTuple):
    """A committed offset as stored in an offset-commit record (immutable; a tuple, cheap to build)."""

    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = 0
    expire_timestamp: int | None = None


class CoordinatorRecord(NamedTuple):
    """One keyed record for a `__consumer_offsets` partition; `value` None is a tombstone.

    `parsed_key`/`parsed_value` are what the bytes decode to (records.OffsetKey or GroupKey;
    OffsetAndMetadata or a GroupMetadataValue): a live append replays those, a load parses the bytes.
    """

    key: bytes
    value: bytes | None
    parsed_key: Any = None
    parsed_value: Any = None


# ---------------------------------------------------------------------------
# results


@dataclass
class JoinGroupMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass
class JoinGroupResult:
    error: ErrorCode
    member_id: str = UNKNOWN_MEMBER_ID
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    members: list[JoinGroupMember] = field(default_factory=list)


@dataclass
class SyncGroupResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass
class LeavingMember:
    member_id: str
    group_instance_id: str | None = None
    reason: str | None = None


@dataclass
class MemberLeaveResult:
    member_id: str
    group_instance_id: str | None
    error: ErrorCode


@dataclass
class LeaveGroupResult:
    error: ErrorCode
    members: list[MemberLeaveResult] = field(default_factory=list)


@dataclass
class OffsetCommitPartition:
    """One partition of an OffsetCommit request."""

    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""
    commit_timestamp: int = -1  # OffsetCommit v1 only; -1 = now
    retention_ms: int = -1  # OffsetCommit v2-4 retention_time_ms; -1 = broker default


@dataclass
class OffsetFetchPartition:
    topic: str
    partition: int
    offset: int = -1
    leader_epoch: int = -1
    metadata: str = ""
    error: ErrorCode = ErrorCode.NO_ERROR


@dataclass
class OffsetFetchResult:
    error: ErrorCode
    partitions: list[OffsetFetchPartition] = field(default_factory=list)


@dataclass
class OffsetDeleteResult:
    error: ErrorCode
    partitions: dict[TopicPartition, ErrorCode] = field(default_factory=dict)


@dataclass
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass
class GroupDescription:
    group_id: str
    error: ErrorCode
    state: str = "Dead"
    protocol_type: str = ""
    protocol_data: str = ""
    members: list[MemberDescription] = field(default_factory=list)


@dataclass
class GroupOverview:
    group_id: str
    protocol_type: str
    state: str
    group_type: str = "classic"  # or "consumer" (KIP-848)


@dataclass
class ListGroupsResult:
    error: ErrorCode
    groups: list[GroupOverview] = field(default_factory=list)
