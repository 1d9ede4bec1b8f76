"""What ReplicaManager.append_records takes and gives: the append origin, the per-partition entries, the
named per-partition results (PartitionAppendResult) and the delayed produce (flush, then acks=all wait).

The delayed produce is the one acks=all wait of the broker: one timeout rule, one set of error codes.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from kafkalite.cluster.delayed_operations import DelayedOperations
from kafkalite.cluster.partition import Partition
from kafkalite.protocol.errors import ErrorCode
from kafkalite.storage.producer_state import VerificationGuard


class AppendOrigin(enum.Enum):
    """Who writes (Kafka's AppendOrigin): a client's records are validated and counted in the topic
    stats; the broker's own writes (coordinators' records, dead letters, transaction markers) are
    trusted; replication is the follower's byte path (Partition.append_records_as_follower)."""

    CLIENT = "client"
    COORDINATOR = "coordinator"
    REPLICATION = "replication"


@dataclass(frozen=True, slots=True)
class EndTxnMarker:
    """A COMMIT / ABORT control batch to write (WriteTxnMarkers)."""

    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool


Records = bytes | bytearray | memoryview


class PartitionRecords(Protocol):
    """One partition's entry: its index and the records to append (a Produce request's partition
    data is one as it is decoded)."""

    @property
    def index(self) -> int: ...

    @property
    def records(self) -> Records | EndTxnMarker | None: ...


@dataclass(frozen=True, slots=True)
class AppendEntry:
    """A PartitionRecords for the broker's own writes."""

    index: int
    records: Records | EndTxnMarker


@dataclass(slots=True)
class TransactionVerification:
    """KIP-890, what a transactional produce learnt before its append: per (topic, partition), the
    guard its batch was verified with, or the error (and message) that refuses it unappended."""

    guards: dict[tuple[str, int], VerificationGuard] = field(default_factory=dict)
    errors: dict[tuple[str, int], tuple[ErrorCode, str]] = field(default_factory=dict)


class PartitionAppendResult:
    """The named result of one partition's append (field names as the Produce answer has them, so
    the handler sends it as it is): error, base offset, log append time, log start, record errors."""

    __slots__ = (
        "base_offset",
        "error_code",
        "error_message",
        "index",
        "last_offset",
        "log_append_time_ms",
        "log_start_offset",
        "record_errors",
    )

    def __init__(self, index: int, error_code: ErrorCode = ErrorCode.NO_ERROR) -> None:
        self.index = index
        self.error_code = error_code
        self.base_offset = -1
        self.last_offset = -1
        self.log_append_time_ms = -1
        self.log_start_offset = -1
        self.record_errors: list[tuple[int, str | None]] = []
        self.error_message: str | None = None


class TopicCounters(Protocol):
    """One topic's produce counters (the broker's TopicStats)."""

    produce_requests: int
    messages_in: int
    bytes_in: int


class ProduceStats(Protocol):
    """The per-topic counters a client append bumps (the broker's stats, read by the metrics)."""

    @property
    def topics(self) -> Mapping[str, TopicCounters]: ...

    def topic(self, name: str) -> TopicCounters: ...

    def failed_produce(self, name: str) -> None: ...


class DelayedProduce:
    """What an append still owes its answer: the fsyncs the flush policy asks for, then (acks=all)
    the wait until every partition's high watermark passes its batch, or the timeout
    (REQUEST_TIMED_OUT). The results' error codes are set when `complete()` returns."""

    __slots__ = ("_delayed", "_flushes", "_timeout_ms", "waiting")

    def __init__(
        self,
        delayed: DelayedOperations,
        flushes: list[Partition],
        waiting: list[tuple[PartitionAppendResult, Partition, int]],
        timeout_ms: int,
    ) -> None:
        self._delayed = delayed
        self._flushes = flushes
        self.waiting = waiting  # (result, partition, offset the high watermark must reach)
        self._timeout_ms = timeout_ms

    async def complete(self) -> None:
        if self._flushes:
            await asyncio.gather(*(asyncio.to_thread(p.flush) for p in self._flushes))
        waiting = self.waiting
        if not waiting:
            return

        def all_done() -> bool:
            return all(p.acks_all_done(required)[0] for _, p, required in waiting)

        await self._delayed.wait_until(
            [p.key for _, p, _ in waiting], all_done, max(self._timeout_ms, 0) / 1000
        )
        for pr, p, required in waiting:
            done, code = p.acks_all_done(required)
            if not done:
                pr.error_code = ErrorCode.REQUEST_TIMED_OUT
                pr.error_message = "the in-sync replicas did not acknowledge in time"
            elif code:
                pr.error_code = ErrorCode(code)


@dataclass(slots=True)
class AppendRecordsResult:
    """Per entry topic, its partitions' results in entry order; `delayed` is None when the answer
    is complete now (nothing to flush, nothing to wait for)."""

    results: list[list[PartitionAppendResult]]
    delayed: DelayedProduce | None
