"""A share-partition's vocabulary (KIP-932): record states and acknowledgement types, its config, the
persisted state batches, acquired ranges, acknowledgements and their results, dead letters, in-flight runs.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from kafkalite.protocol.errors import ErrorCode

REASON_REJECTED = "REJECTED"
REASON_DELIVERY_COUNT_EXCEEDED = "DELIVERY_COUNT_EXCEEDED"


class RecordState(enum.IntEnum):
    """Kafka's RecordState ids, which are also the persisted ids."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AcknowledgeType(enum.IntEnum):
    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4  # KIP-1222: extend the acquisition lock, keep the record


@dataclass(frozen=True, slots=True)
class SharePartitionConfig:
    lock_duration_ms: int = 30_000
    delivery_count_limit: int = 5
    max_in_flight: int = 2000


@dataclass(frozen=True, slots=True)
class StateBatch:
    """A persisted run of offsets sharing one state and one delivery count."""

    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class AcquiredRange:
    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class AckBatch:
    """`types` holds one type for the whole range, or one per offset."""

    first_offset: int
    last_offset: int
    types: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class AckResult:
    error: ErrorCode
    message: str | None = None
    changed: bool = False


@dataclass(frozen=True, slots=True)
class DeadLetter:
    offset: int
    delivery_count: int
    reason: str


@dataclass(frozen=True, slots=True)
class InFlightRecord:
    """A read-only copy of one in-flight record."""

    state: RecordState
    delivery_count: int
    member_id: str | None
    lock_deadline_ms: int | None


class InFlightRun:
    """In-flight offsets `first`..`last` (no hole between them) that share a state, a delivery
    count and, while ACQUIRED, a member and a lock deadline."""

    __slots__ = ("count", "deadline", "first", "last", "member", "state")

    def __init__(
        self,
        first: int,
        last: int,
        state: RecordState,
        count: int,
        member: str | None = None,
        deadline: int | None = None,
    ) -> None:
        self.first = first
        self.last = last
        self.state = state
        self.count = count
        self.member = member
        self.deadline = deadline
