"""Transaction states with their table of valid previous states, and one transactional id's metadata.

Prepare methods compute the next `TxnTransitMetadata` without mutating; only replay calls `complete_transition`.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NoReturn

from kafkalite.coordinator.types import TopicPartition
from kafkalite.protocol.errors import ErrorCode

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
SHORT_MAX = 32767


class TransactionState(enum.Enum):
    """The states of a transactional id; `.value` is the name Kafka shows (DescribeTransactions)."""

    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"
    DEAD = "Dead"
    PREPARE_EPOCH_FENCE = "PrepareEpochFence"

    def __str__(self) -> str:
        return self.value

    @property
    def id(self) -> int:
        """The status byte written in a `__transaction_state` value."""
        return _STATUS_IDS[self]

    @property
    def is_expiration_allowed(self) -> bool:
        """Whether an idle transactional id in this state may be expired (tombstoned)."""
        return self in (_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT)

    @classmethod
    def from_id(cls, status: int) -> TransactionState | None:
        return _BY_ID.get(status)

    @classmethod
    def from_name(cls, name: str) -> TransactionState | None:
        """The state with exactly this wire name (Kafka matches case-sensitively), or None."""
        for state in cls:
            if state.value == name:
                return state
        return None


_S = TransactionState

_STATUS_IDS: dict[TransactionState, int] = {
    _S.EMPTY: 0,
    _S.ONGOING: 1,
    _S.PREPARE_COMMIT: 2,
    _S.PREPARE_ABORT: 3,
    _S.COMPLETE_COMMIT: 4,
    _S.COMPLETE_ABORT: 5,
    _S.DEAD: 6,
    _S.PREPARE_EPOCH_FENCE: 7,
}
_BY_ID = {v: k for k, v in _STATUS_IDS.items()}

# state -> the states a transactional id may be in just before entering it
VALID_PREVIOUS_STATES: dict[TransactionState, frozenset[TransactionState]] = {
    # InitProducerId: a new id, or one whose last transaction finished
    _S.EMPTY: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    # AddPartitions / AddOffsets: the first starts the transaction, later ones extend it
    _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    # EndTxn(commit)
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    # EndTxn(abort), or the abort that follows an epoch fence
    _S.PREPARE_ABORT: frozenset({_S.ONGOING, _S.PREPARE_EPOCH_FENCE}),
    # every marker of the transaction is written
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    # the transactional id expired and is being removed
    _S.DEAD: frozenset({_S.EMPTY, _S.COMPLETE_ABORT, _S.COMPLETE_COMMIT}),
    # a new producer or the timeout fences the producer of an ongoing transaction (never written)
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}


class IllegalTxnTransition(RuntimeError):
    """A transition the table (or the transit checks) does not allow: a coordinator bug, never a client error."""

    def __init__(self, transactional_id: str, message: str) -> None:
        super().__init__(f"transactional id {transactional_id!r}: {message}")
        self.transactional_id = transactional_id


def is_valid_transition(current: TransactionState, target: TransactionState) -> bool:
    return current in VALID_PREVIOUS_STATES[target]


def transition(
    transactional_id: str, current: TransactionState, target: TransactionState
) -> TransactionState:
    """Check `current -> target` against the table; return the target."""
    if not is_valid_transition(current, target):
        allowed = sorted(s.value for s in VALID_PREVIOUS_STATES[target])
        raise IllegalTxnTransition(
            transactional_id,
            f"cannot go from {current} to {target}; {target} may only follow {allowed}",
        )
    return target


def is_epoch_exhausted(producer_epoch: int) -> bool:
    """Epochs stop one short of Short.MAX_VALUE so the coordinator can always fence once more."""
    return producer_epoch >= SHORT_MAX - 1


@dataclass(frozen=True, slots=True)
class TxnTransitMetadata:
    """The metadata a transactional id will have once the record describing it is appended."""

    producer_id: int
    prev_producer_id: int
    next_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    txn_state: TransactionState
    topic_partitions: frozenset[TopicPartition]
    txn_start_timestamp: int
    txn_last_update_timestamp: int
    client_transaction_version: int = 0


@dataclass(eq=False)
class TransactionMetadata:
    """One transactional id as the coordinator holds it. Persisted fields change only in
    `complete_transition` (replay of a live append) or by building a new object from a loaded record;
    `pending_state` is in-memory only: the state an in-flight write (or marker round) leads to."""

    transactional_id: str
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    txn_timeout_ms: int = 60_000
    state: TransactionState = TransactionState.EMPTY
    topic_partitions: set[TopicPartition] = field(default_factory=set)
    txn_start_timestamp: int = -1
    txn_last_update_timestamp: int = -1
    previous_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    client_transaction_version: int = 0
    pending_state: TransactionState | None = None

    @classmethod
    def from_transit(
        cls, transactional_id: str, transit: TxnTransitMetadata
    ) -> TransactionMetadata:
        """The metadata a loaded record describes (what Kafka builds when it reads a value)."""
        return cls(
            transactional_id=transactional_id,
            producer_id=transit.producer_id,
            producer_epoch=transit.producer_epoch,
            txn_timeout_ms=transit.txn_timeout_ms,
            state=transit.txn_state,
            topic_partitions=set()
            if transit.txn_state is TransactionState.EMPTY
            else set(transit.topic_partitions),
            txn_start_timestamp=transit.txn_start_timestamp,
            txn_last_update_timestamp=transit.txn_last_update_timestamp,
            previous_producer_id=transit.prev_producer_id,
            next_producer_id=transit.next_producer_id,
            last_producer_epoch=transit.last_producer_epoch,
            client_transaction_version=transit.client_transaction_version,
        )

    # ------------------------------------------------------------------ queries

    @property
    def is_producer_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    @property
    def pending_transition_in_progress(self) -> bool:
        return self.pending_state is not None

    def snapshot(self) -> TxnTransitMetadata:
        """The current persisted fields, as a transit (no state change)."""
        return TxnTransitMetadata(
            self.producer_id,
            self.previous_producer_id,
            self.next_producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.txn_timeout_ms,
            self.state,
            frozenset(self.topic_partitions),
            self.txn_start_timestamp,
            self.txn_last_update_timestamp,
            self.client_transaction_version,
        )

    # ------------------------------------------------------------------ prepare (pure)

    def _prepare(
        self,
        state: TransactionState,
        producer_id: int,
        producer_epoch: int,
        last_producer_epoch: int,
        txn_timeout_ms: int,
        topic_partitions: Iterable[TopicPartition],
        txn_start_timestamp: int,
        update_timestamp: int,
    ) -> TxnTransitMetadata:
        if producer_id < 0:
            raise IllegalTxnTransition(
                self.transactional_id, f"illegal new producer id {producer_id}"
            )
        if state is not TransactionState.DEAD and producer_epoch < 0:
            raise IllegalTxnTransition(
                self.transactional_id, f"illegal new producer epoch {producer_epoch}"
            )
        transition(self.transactional_id, self.state, state)
        return TxnTransitMetadata(
            producer_id=producer_id,
            prev_producer_id=self.producer_id,
            next_producer_id=NO_PRODUCER_ID,
            producer_epoch=producer_epoch,
            last_producer_epoch=last_producer_epoch,
            txn_timeout_ms=txn_timeout_ms,
            txn_state=state,
            topic_partitions=frozenset(topic_partitions),
            txn_start_timestamp=txn_start_timestamp,
            txn_last_update_timestamp=update_timestamp,
        )

    def prepare_increment_producer_epoch(
        self, new_txn_timeout_ms: int, expected_producer_epoch: int | None, now: int
    ) -> TxnTransitMetadata | ErrorCode:
        """InitProducerId on a finished (or new) transactional id: bump the epoch (KIP-360 retries keep
        it); PRODUCER_FENCED when the expected epoch is neither the current nor the last one."""
        if self.is_producer_epoch_exhausted:
            raise IllegalTxnTransition(
                self.transactional_id, f"no more epochs for producer id {self.producer_id}"
            )
        bumped = self.producer_epoch + 1
        if expected_producer_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif (
            self.producer_epoch == NO_PRODUCER_EPOCH
            or expected_producer_epoch == self.producer_epoch
        ):
            epoch, last = bumped, self.producer_epoch
        elif expected_producer_epoch == self.last_producer_epoch:
            # a retry of a bump that succeeded: answer the current epoch again
            epoch, last = self.producer_epoch, self.last_producer_epoch
        else:
            return ErrorCode.PRODUCER_FENCED
        return self._prepare(
            TransactionState.EMPTY, self.producer_id, epoch, last, new_txn_timeout_ms, (), -1, now
        )

    def prepare_producer_id_rotation(
        self, new_producer_id: int, new_txn_timeout_ms: int, now: int, record_last_epoch: bool
    ) -> TxnTransitMetadata:
        """InitProducerId when the epoch is exhausted: a new producer id at epoch 0."""
        if self.state in (
            TransactionState.ONGOING,
            TransactionState.PREPARE_ABORT,
            TransactionState.PREPARE_COMMIT,
        ):
            raise IllegalTxnTransition(
                self.transactional_id, "cannot rotate producer ids while a transaction is pending"
            )
        last = self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH
        return self._prepare(
            TransactionState.EMPTY, new_producer_id, 0, last, new_txn_timeout_ms, (), -1, now
        )

    def prepare_fence_producer_epoch(self) -> TxnTransitMetadata:
        """The epoch bump that fences the producer of an ongoing transaction (PrepareEpochFence)."""
        if self.producer_epoch >= SHORT_MAX:
            raise IllegalTxnTransition(
                self.transactional_id, "cannot fence a producer whose epoch is Short.MAX_VALUE"
            )
        return self._prepare(
            TransactionState.PREPARE_EPOCH_FENCE,
            self.producer_id,
            self.producer_epoch + 1,
            NO_PRODUCER_EPOCH,
            self.txn_timeout_ms,
            self.topic_partitions,
            self.txn_start_timestamp,
            self.txn_last_update_timestamp,
        )

    def prepare_epoch_fence_abort(self, now: int) -> TxnTransitMetadata:
        """Fence then abort, as Kafka chains them: the PrepareAbort transit at the fenced epoch.

        Kafka never writes PrepareEpochFence; it bumps the epoch in memory and writes PrepareAbort. Here
        the bump is applied to a copy, so nothing changes until the PrepareAbort record is replayed."""
        fence = self.prepare_fence_producer_epoch()
        fenced = dataclasses.replace(
            self,
            producer_epoch=fence.producer_epoch,
            last_producer_epoch=NO_PRODUCER_EPOCH,
            topic_partitions=set(self.topic_partitions),
            pending_state=None,
        )
        # PrepareEpochFence -> PrepareAbort is in the table; check it on the fenced view's behalf
        transition(self.transactional_id, fence.txn_state, TransactionState.PREPARE_ABORT)
        return fenced.prepare_abort_or_commit(TransactionState.PREPARE_ABORT, now)

    def prepare_add_partitions(
        self, added: Iterable[TopicPartition], now: int
    ) -> TxnTransitMetadata:
        """AddPartitions / AddOffsets: Ongoing with the union of partitions; a new transaction starts now."""
        if self.state in (
            TransactionState.EMPTY,
            TransactionState.COMPLETE_ABORT,
            TransactionState.COMPLETE_COMMIT,
        ):
            start = now
        else:
            start = self.txn_start_timestamp
        return self._prepare(
            TransactionState.ONGOING,
            self.producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.txn_timeout_ms,
            self.topic_partitions.union(added),
            start,
            now,
        )

    def prepare_abort_or_commit(self, new_state: TransactionState, now: int) -> TxnTransitMetadata:
        """EndTxn: PrepareCommit or PrepareAbort with the transaction's partitions (no epoch bump: the
        pre-KIP-890 protocol)."""
        return self._prepare(
            new_state,
            self.producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.txn_timeout_ms,
            self.topic_partitions,
            self.txn_start_timestamp,
            now,
        )

    def prepare_complete(self, now: int) -> TxnTransitMetadata:
        """Every marker is written: CompleteCommit / CompleteAbort, no partitions left."""
        new_state = (
            TransactionState.COMPLETE_COMMIT
            if self.state is TransactionState.PREPARE_COMMIT
            else TransactionState.COMPLETE_ABORT
        )
        return self._prepare(
            new_state,
            self.producer_id,
            self.producer_epoch,
            self.producer_epoch,
            self.txn_timeout_ms,
            (),
            self.txn_start_timestamp,
            now,
        )

    def prepare_dead(self) -> TxnTransitMetadata:
        """Expiration: the transactional id is about to be tombstoned."""
        return self._prepare(
            TransactionState.DEAD,
            self.producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.txn_timeout_ms,
            (),
            self.txn_start_timestamp,
            self.txn_last_update_timestamp,
        )

    # ------------------------------------------------------------------ complete (replay only)

    def complete_transition(self, transit: TxnTransitMetadata) -> None:
        """Apply a transit whose record was appended (Kafka's completeTransitionTo, with its checks)."""
        to = self.pending_state
        if to is None or to is not transit.txn_state:
            self._fail(transit, f"pending state is {to}")
        transition(self.transactional_id, self.state, to)
        same_epoch = (
            transit.producer_epoch == self.producer_epoch
            and transit.producer_id == self.producer_id
        )
        if to is TransactionState.EMPTY:
            bumped = transit.producer_epoch == self.producer_epoch + 1 or (
                transit.producer_epoch == 0 and transit.producer_id != self.producer_id
            )
            if (
                (self.producer_epoch != transit.producer_epoch and not bumped)
                or transit.topic_partitions
                or transit.txn_start_timestamp != -1
            ):
                self._fail(transit, "not an epoch bump")
            self.txn_timeout_ms = transit.txn_timeout_ms
            self.producer_epoch = transit.producer_epoch
            self.last_producer_epoch = transit.last_producer_epoch
            self.producer_id = transit.producer_id
            self.previous_producer_id = transit.prev_producer_id
        elif to is TransactionState.ONGOING:
            if (
                not same_epoch
                or not self.topic_partitions <= transit.topic_partitions
                or self.txn_timeout_ms != transit.txn_timeout_ms
            ):
                self._fail(transit, "partitions may only grow, at the same epoch and timeout")
            self.txn_start_timestamp = transit.txn_start_timestamp
            self.topic_partitions |= transit.topic_partitions
        elif to in (TransactionState.PREPARE_ABORT, TransactionState.PREPARE_COMMIT):
            fenced = (
                to is TransactionState.PREPARE_ABORT
                and transit.producer_id == self.producer_id
                and transit.producer_epoch == self.producer_epoch + 1
                and transit.last_producer_epoch == NO_PRODUCER_EPOCH
            )
            if (
                not (same_epoch or fenced)
                or self.topic_partitions != transit.topic_partitions
                or self.txn_timeout_ms != transit.txn_timeout_ms
                or self.txn_start_timestamp != transit.txn_start_timestamp
            ):
                self._fail(transit, "prepare must keep the transaction's partitions and epoch")
            # the epoch fence (Kafka bumps it in memory before writing PrepareAbort) lands here
            self.producer_epoch = transit.producer_epoch
            self.last_producer_epoch = transit.last_producer_epoch
        elif to in (TransactionState.COMPLETE_ABORT, TransactionState.COMPLETE_COMMIT):
            if (
                not same_epoch
                or self.txn_timeout_ms != transit.txn_timeout_ms
                or transit.txn_start_timestamp == -1
            ):
                self._fail(transit, "complete must keep the epoch and timeout")
            self.txn_start_timestamp = transit.txn_start_timestamp
            self.topic_partitions.clear()
        else:
            # PrepareEpochFence is never written; Dead ends in a tombstone that removes the metadata
            self._fail(transit, f"{to} is never completed")
        self.client_transaction_version = transit.client_transaction_version
        self.txn_last_update_timestamp = transit.txn_last_update_timestamp
        self.pending_state = None
        self.state = to

    def _fail(self, transit: TxnTransitMetadata, why: str) -> NoReturn:
        raise IllegalTxnTransition(
            self.transactional_id, f"cannot complete transition of {self} to {transit}: {why}"
        )
