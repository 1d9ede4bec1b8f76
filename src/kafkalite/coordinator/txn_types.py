"""Value types of the transaction coordinator: its configuration, the marker requests it emits, results.

Results mirror the response fields of the transaction APIs so broker handlers only translate names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from kafkalite.coordinator.types import TopicPartition
from kafkalite.protocol.errors import ErrorCode


@dataclass(frozen=True)
class TxnConfig:
    """Broker settings the transaction coordinator obeys (Kafka's property names, same defaults)."""

    transaction_state_log_num_partitions: int = 50
    transaction_max_timeout_ms: int = 900_000
    transactional_id_expiration_ms: int = 604_800_000
    # transaction.abort.timed.out.transaction.cleanup.interval.ms
    abort_timed_out_check_interval_ms: int = 10_000
    # transaction.remove.expired.transaction.cleanup.interval.ms
    remove_expired_check_interval_ms: int = 3_600_000


class TxnMarkerRequest(NamedTuple):
    """Markers the broker must write to the leaders of `partitions` (one WriteTxnMarkers entry)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool
    partitions: frozenset[TopicPartition]


class InitProducerIdResult(NamedTuple):
    error: ErrorCode
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass
class TransactionDescription:
    """One entry of a DescribeTransactions response (`topics`: topic -> partitions)."""

    transactional_id: str
    error_code: ErrorCode
    transaction_state: str = ""
    transaction_timeout_ms: int = 0
    transaction_start_time_ms: int = 0
    producer_id: int = 0
    producer_epoch: int = 0
    topics: dict[str, list[int]] = field(default_factory=dict)


class TransactionListing(NamedTuple):
    transactional_id: str
    producer_id: int
    transaction_state: str


@dataclass
class ListTransactionsResult:
    error_code: ErrorCode
    unknown_state_filters: list[str] = field(default_factory=list)
    transaction_states: list[TransactionListing] = field(default_factory=list)
