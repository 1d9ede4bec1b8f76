"""The KIP-848 consumer group's vocabulary: the records it replays (the in-memory form of Kafka's
`__consumer_offsets` types 3, 5-8), members, ConsumerGroupHeartbeat request and result, config, assignment sets.
"""

from __future__ import annotations

import enum
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from kafkalite.protocol.errors import ErrorCode

Assignment = dict[uuid.UUID, frozenset[int]]
EMPTY: Assignment = {}

JOIN_EPOCH = 0
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2


class MemberState(enum.Enum):
    """Where a member is in its reconciliation toward the target assignment."""

    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"  # it must give some partitions up first
    UNRELEASED_PARTITIONS = "unreleased_partitions"  # others still hold partitions meant for it


# -- records (the in-memory form of Kafka's types; None values are tombstones) ----------------------
@dataclass(frozen=True, slots=True)
class GroupEpochRecord:
    """ConsumerGroupMetadata (type 3): the group epoch."""

    group_id: str
    epoch: int | None
    metadata_hash: int = 0  # of the subscribed topics (KIP-1101): a change means a new assignment


@dataclass(frozen=True, slots=True)
class MemberSubscription:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None


@dataclass(frozen=True, slots=True)
class MemberSubscriptionRecord:
    """ConsumerGroupMemberMetadata (type 5)."""

    group_id: str
    member_id: str
    subscription: MemberSubscription | None


@dataclass(frozen=True, slots=True)
class TargetAssignmentEpochRecord:
    """ConsumerGroupTargetAssignmentMetadata (type 6)."""

    group_id: str
    assignment_epoch: int | None


@dataclass(frozen=True, slots=True)
class TargetAssignmentMemberRecord:
    """ConsumerGroupTargetAssignmentMember (type 7)."""

    group_id: str
    member_id: str
    partitions: Assignment | None


@dataclass(frozen=True, slots=True)
class CurrentAssignmentRecord:
    """ConsumerGroupCurrentMemberAssignment (type 8)."""

    group_id: str
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    tombstone: bool = False


ConsumerGroupRecord = (
    GroupEpochRecord
    | MemberSubscriptionRecord
    | TargetAssignmentEpochRecord
    | TargetAssignmentMemberRecord
    | CurrentAssignmentRecord
)


# -- state ----------------------------------------------------------------------------------------
@dataclass(slots=True)
class ConsumerGroupMember:
    member_id: str
    subscription: MemberSubscription
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    # runtime only (not persisted): liveness, the revocation deadline, a removal on its way
    session_deadline_ms: int = 0
    revocation_deadline_ms: int | None = None
    expiring: bool = False

    def is_expired(self, now_ms: int) -> bool:
        """Past its session timeout, or still holding partitions to revoke past its rebalance timeout."""
        return bool(self.session_deadline_ms and now_ms >= self.session_deadline_ms) or (
            self.revocation_deadline_ms is not None and now_ms >= self.revocation_deadline_ms
        )


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    """ConsumerGroupHeartbeat's fields (None: unchanged since the last heartbeat)."""

    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Assignment | None = None  # the partitions the member says it owns
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    error: ErrorCode
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    assignment: Assignment | None = None  # None: unchanged, not sent


# -- assignment arithmetic (topic id -> partitions; empty entries dropped) -----------------------------
def assignment_union(
    a: Mapping[uuid.UUID, frozenset[int]], b: Mapping[uuid.UUID, frozenset[int]]
) -> Assignment:
    out = dict(a)
    for t, ps in b.items():
        out[t] = out.get(t, frozenset()) | ps
    return {t: ps for t, ps in out.items() if ps}


def assignment_minus(
    a: Mapping[uuid.UUID, frozenset[int]], b: Mapping[uuid.UUID, frozenset[int]]
) -> Assignment:
    out = {t: ps - b.get(t, frozenset()) for t, ps in a.items()}
    return {t: ps for t, ps in out.items() if ps}


def assignment_intersect(
    a: Mapping[uuid.UUID, frozenset[int]], b: Mapping[uuid.UUID, frozenset[int]]
) -> Assignment:
    out = {t: ps & b.get(t, frozenset()) for t, ps in a.items()}
    return {t: ps for t, ps in out.items() if ps}


def assignment_contains(
    outer: Mapping[uuid.UUID, frozenset[int]], inner: Mapping[uuid.UUID, frozenset[int]]
) -> bool:
    return all(ps <= outer.get(t, frozenset()) for t, ps in inner.items())


# what Python's `re` takes and RE2 (the syntax Kafka validates subscribedTopicRegex with) refuses:
# lookaround, backreferences, conditionals, possessive quantifiers and atomic groups
_NOT_RE2 = re.compile(r"\(\?<?[=!]|\\[1-9]|\(\?P=|\(\?\(|\(\?>|[*+?}]\+")


def re2_error(pattern: str) -> str | None:
    """Why `pattern` is not an RE2 expression kafkalite can match with `re`, or None."""
    found = _NOT_RE2.search(pattern)
    if found is not None:
        return f"`{found.group(0)}` at {found.start()} is not RE2 syntax"
    try:
        re.compile(pattern)
    except re.error as exc:
        return str(exc)
    return None


@dataclass(frozen=True, slots=True)
class GroupConfig:
    session_timeout_ms: int = 45000  # group.consumer.session.timeout.ms
    heartbeat_interval_ms: int = 5000  # group.consumer.heartbeat.interval.ms
    assignors: tuple[str, ...] = ("uniform", "range")  # group.consumer.assignors
    max_size: int = 2**31 - 1  # group.consumer.max.size
