"""The transaction coordinator: InitProducerId, AddPartitions/AddOffsets, EndTxn and its markers, timeouts;
pure logic over a TransactionStateManager (the broker supplies appends, pids, markers and the clock).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from kafkalite.coordinator.deferred import Deferred
from kafkalite.coordinator.txn_completion import COMPLETION_RETRY_BACKOFF_MS, TxnCompletion
from kafkalite.coordinator.txn_records import txn_record
from kafkalite.coordinator.txn_state import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
    is_epoch_exhausted,
)
from kafkalite.coordinator.txn_state_manager import (
    AppendFn,
    TransactionStateManager,
    completer,
    txn_store_error,
)
from kafkalite.coordinator.txn_types import (
    InitProducerIdResult,
    ListTransactionsResult,
    TransactionDescription,
    TxnConfig,
    TxnMarkerRequest,
)
from kafkalite.coordinator.types import TopicPartition
from kafkalite.protocol.errors import ErrorCode

__all__ = [
    "COMPLETION_RETRY_BACKOFF_MS",
    "PRODUCER_ID_UNAVAILABLE",
    "AppendFn",
    "TransactionCoordinator",
    "txn_store_error",
]

log = logging.getLogger("kafkalite.coordinator.txn")

E = ErrorCode
_S = TransactionState
T = TypeVar("T")

# answered when the producer-id allocator gives a negative id (Kafka's id manager is still fetching a block)
PRODUCER_ID_UNAVAILABLE = E.COORDINATOR_LOAD_IN_PROGRESS


def _completed(value: T) -> Deferred[T]:
    return Deferred.completed(value)


class TransactionCoordinator:
    """Sans-IO transaction coordinator.

    The broker supplies `append(partition, records)` (to `__transaction_state`), a millisecond `clock`,
    `new_producer_id()` and `send_markers(request)`; it calls `begin_loading`/`replay`/`finish_loading`
    and `unload` as it gains and loses leadership, `markers_written(request)` once a request's markers
    are all written, and `tick()` when `next_deadline()` is reached.

    Transactional ids, their partitions and their records are the `TransactionStateManager`'s
    (`state_manager`); the coordinator decides the transitions and drives markers and timers.
    """

    def __init__(
        self,
        append: AppendFn,
        *,
        config: TxnConfig,
        clock: Callable[[], int],
        new_producer_id: Callable[[], Deferred[int]],
        send_markers: Callable[[TxnMarkerRequest], None],
        offsets_partition_for: Callable[[str], TopicPartition],
    ) -> None:
        self.config = config
        self._state = TransactionStateManager(append, config=config, clock=clock)
        self._new_producer_id = new_producer_id
        self._offsets_partition_for = offsets_partition_for
        self._completion = TxnCompletion(self._state, send_markers)
        now = clock()
        self._next_abort_check = now + config.abort_timed_out_check_interval_ms
        self._next_expiration_check = now + config.remove_expired_check_interval_ms

    # ------------------------------------------------------------------ the state manager's, delegated

    @property
    def state_manager(self) -> TransactionStateManager:
        return self._state

    @property
    def coordinator_epochs(self) -> dict[int, int]:
        """`__transaction_state` partitions we lead -> their leader epoch (the coordinator epoch)."""
        return self._state.coordinator_epochs

    @property
    def loading_partitions(self) -> set[int]:
        return self._state.loading_partitions

    @property
    def transactions(self) -> dict[int, dict[str, TransactionMetadata]]:
        return self._state.transactions

    @property
    def active(self) -> bool:
        return self._state.active

    @active.setter
    def active(self, value: bool) -> None:
        self._state.active = value

    def now(self) -> int:
        return self._state.now()

    def partition_for(self, transactional_id: str) -> int:
        return self._state.partition_for(transactional_id)

    def metadata(self, transactional_id: str) -> TransactionMetadata | None:
        """The cached metadata of a transactional id (any partition we hold), for inspection."""
        return self._state.metadata(transactional_id)

    def begin_loading(self, partition: int, coordinator_epoch: int) -> None:
        """We lead this partition at `coordinator_epoch`: its ids answer LOAD_IN_PROGRESS until loaded."""
        self._state.begin_loading(partition, coordinator_epoch)
        self._completion.drop_retries(partition)

    def replay(self, partition: int, key: bytes | None, value: bytes | None) -> None:
        """Feed one record of the partition's log, oldest first, while it loads."""
        self._state.replay(partition, key, value)

    def finish_loading(self, partition: int) -> None:
        """Every record is replayed: serve the partition, and finish transactions left in Prepare*."""
        unfinished = self._state.finish_loading(partition)
        if unfinished:
            epoch = self._state.coordinator_epochs[partition]
            for metadata in unfinished:
                self._completion.begin(partition, epoch, metadata)

    def load_partition(
        self,
        partition: int,
        coordinator_epoch: int,
        records: Iterable[tuple[bytes | None, bytes | None]],
    ) -> None:
        """begin_loading + replay every (key, value) + finish_loading, in one call."""
        self.begin_loading(partition, coordinator_epoch)
        for key, value in records:
            self.replay(partition, key, value)
        self.finish_loading(partition)

    def unload(self, partition: int) -> None:
        """We no longer lead this partition: forget its ids; waiting callers get NOT_COORDINATOR."""
        self._state.unload(partition)
        self._completion.drop_retries(partition)

    def shutdown(self) -> None:
        self._state.shutdown()
        self._completion.shutdown()

    def remove_expired_transactional_ids(self) -> None:
        """Tombstone transactional ids idle (and not in a transaction) for transactional.id.expiration.ms."""
        self._state.remove_expired_transactional_ids()

    def describe_transactions(
        self, transactional_ids: Sequence[str]
    ) -> list[TransactionDescription]:
        return self._state.describe_transactions(transactional_ids)

    def list_transactions(
        self,
        state_filters: Sequence[str] = (),
        producer_id_filters: Sequence[int] = (),
        duration_filter_ms: int = -1,
    ) -> ListTransactionsResult:
        """ListTransactions (KIP-664; `duration_filter_ms` >= 0 keeps those running longer, KIP-994)."""
        return self._state.list_transactions(state_filters, producer_id_filters, duration_filter_ms)

    def _allocate(self, on_allocated: Callable[[int], None]) -> None:
        try:
            pending = self._new_producer_id()
        except Exception:
            log.exception("producer id allocation raised")
            pending = Deferred.completed(-1)
        pending.on_done(on_allocated)

    # ------------------------------------------------------------------ InitProducerId

    def init_producer_id(
        self,
        transactional_id: str | None,
        transaction_timeout_ms: int,
        expected_producer_id: int = NO_PRODUCER_ID,
        expected_epoch: int = NO_PRODUCER_EPOCH,
    ) -> Deferred[InitProducerIdResult]:
        """A producer id and epoch for a (transactional) producer; fences the previous one (KIP-360
        `expected_*` lets a producer bump its own epoch after an error)."""
        if transactional_id is None:  # an idempotent producer: a fresh id, epoch 0
            result: Deferred[InitProducerIdResult] = Deferred()
            complete = completer(result)
            self._allocate(
                lambda pid: complete(
                    InitProducerIdResult(E.NO_ERROR, pid, 0)
                    if pid >= 0
                    else InitProducerIdResult(PRODUCER_ID_UNAVAILABLE)
                )
            )
            return result
        expected: tuple[int, int] | None = None
        if expected_producer_id != NO_PRODUCER_ID or expected_epoch != NO_PRODUCER_EPOCH:
            if expected_producer_id == NO_PRODUCER_ID or expected_epoch == NO_PRODUCER_EPOCH:
                return _completed(InitProducerIdResult(E.INVALID_REQUEST))
            expected = (expected_producer_id, expected_epoch)
        if transactional_id == "":
            return _completed(InitProducerIdResult(E.INVALID_REQUEST))
        if not 0 < transaction_timeout_ms <= self.config.transaction_max_timeout_ms:
            return _completed(InitProducerIdResult(E.INVALID_TRANSACTION_TIMEOUT))
        located = self._state.locate(transactional_id)
        if isinstance(located, ErrorCode):
            return _completed(InitProducerIdResult(located))
        partition, epoch, txns = located
        result = Deferred()
        self._state.track(partition, result, InitProducerIdResult(E.NOT_COORDINATOR))
        metadata = txns.get(transactional_id)
        if metadata is not None:
            self._init_existing(
                partition, epoch, metadata, transaction_timeout_ms, expected, result
            )
            return result
        # a new id: hold its place (concurrent calls answer CONCURRENT_TRANSACTIONS) while a pid comes
        placeholder = TransactionMetadata(
            transactional_id,
            NO_PRODUCER_ID,
            txn_timeout_ms=transaction_timeout_ms,
            txn_last_update_timestamp=self.now(),
            pending_state=_S.EMPTY,
        )
        txns[transactional_id] = placeholder

        def allocated(producer_id: int) -> None:
            if self._state.current(partition, epoch, transactional_id) is not placeholder:
                result.complete(InitProducerIdResult(E.NOT_COORDINATOR))
                return
            current = self._state.transactions[partition]
            if producer_id < 0:
                del current[transactional_id]
                result.complete(InitProducerIdResult(PRODUCER_ID_UNAVAILABLE))
                return
            created = TransactionMetadata(
                transactional_id,
                producer_id,
                txn_timeout_ms=transaction_timeout_ms,
                txn_last_update_timestamp=self.now(),
            )
            current[transactional_id] = created
            self._init_existing(partition, epoch, created, transaction_timeout_ms, expected, result)

        self._allocate(allocated)
        return result

    def _init_existing(
        self,
        partition: int,
        coordinator_epoch: int,
        metadata: TransactionMetadata,
        timeout_ms: int,
        expected: tuple[int, int] | None,
        result: Deferred[InitProducerIdResult],
    ) -> None:
        def fail(code: ErrorCode) -> None:
            result.complete(InitProducerIdResult(code))

        if metadata.pending_transition_in_progress:
            return fail(E.CONCURRENT_TRANSACTIONS)
        if expected is not None and not (
            metadata.producer_epoch == NO_PRODUCER_EPOCH
            or expected[0] == metadata.producer_id
            or (expected[0] == metadata.previous_producer_id and is_epoch_exhausted(expected[1]))
        ):
            return fail(E.PRODUCER_FENCED)
        state = metadata.state
        if state in (_S.PREPARE_ABORT, _S.PREPARE_COMMIT):
            return fail(E.CONCURRENT_TRANSACTIONS)
        if state is _S.ONGOING:
            # abort with a bumped epoch (fencing the old producer); the client retries and gets a new one
            self._fence_and_abort(
                partition,
                coordinator_epoch,
                metadata,
                lambda code: fail(E.CONCURRENT_TRANSACTIONS if code == E.NO_ERROR else code),
            )
            return None
        if state not in (_S.EMPTY, _S.COMPLETE_ABORT, _S.COMPLETE_COMMIT):
            log.error("InitProducerId for %r in state %s", metadata.transactional_id, state)
            return fail(E.UNKNOWN_SERVER_ERROR)
        if metadata.is_producer_epoch_exhausted and (
            expected is None or expected[1] == metadata.producer_epoch
        ):
            metadata.pending_state = _S.EMPTY  # reserved while a new producer id is allocated

            def rotated(producer_id: int) -> None:
                if (
                    self._state.current(partition, coordinator_epoch, metadata.transactional_id)
                    is not metadata
                ):
                    return fail(E.NOT_COORDINATOR)
                metadata.pending_state = None
                if producer_id < 0:
                    return fail(PRODUCER_ID_UNAVAILABLE)
                transit = metadata.prepare_producer_id_rotation(
                    producer_id, timeout_ms, self.now(), expected is not None
                )
                self._write_init(partition, coordinator_epoch, metadata, transit, result)
                return None

            self._allocate(rotated)
            return None
        outcome = metadata.prepare_increment_producer_epoch(
            timeout_ms, None if expected is None else expected[1], self.now()
        )
        if isinstance(outcome, ErrorCode):
            return fail(outcome)
        self._write_init(partition, coordinator_epoch, metadata, outcome, result)
        return None

    def _write_init(
        self,
        partition: int,
        coordinator_epoch: int,
        metadata: TransactionMetadata,
        transit: TxnTransitMetadata,
        result: Deferred[InitProducerIdResult],
    ) -> None:
        metadata.pending_state = transit.txn_state

        def done(code: ErrorCode) -> None:
            if code == E.NO_ERROR:
                log.info(
                    "initialized %r with producer id %d epoch %d",
                    metadata.transactional_id,
                    transit.producer_id,
                    transit.producer_epoch,
                )
                result.complete(
                    InitProducerIdResult(E.NO_ERROR, transit.producer_id, transit.producer_epoch)
                )
            else:
                result.complete(InitProducerIdResult(code))

        record = txn_record(metadata.transactional_id, transit)
        self._state.write(partition, coordinator_epoch, [record], done)

    # ------------------------------------------------------------------ AddPartitions / AddOffsets

    def _producer_of(
        self, transactional_id: str, producer_id: int, producer_epoch: int
    ) -> tuple[int, int, TransactionMetadata] | ErrorCode:
        """(partition, coordinator epoch, metadata) of a transactional id whose current producer is
        `producer_id` at `producer_epoch`, or the error Kafka answers (INVALID_REQUEST, NOT_COORDINATOR,
        COORDINATOR_LOAD_IN_PROGRESS, INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED)."""
        if not transactional_id:
            return E.INVALID_REQUEST
        located = self._state.locate(transactional_id)
        if isinstance(located, ErrorCode):
            return located
        partition, epoch, txns = located
        metadata = txns.get(transactional_id)
        if metadata is None or metadata.producer_id != producer_id:
            return E.INVALID_PRODUCER_ID_MAPPING
        if metadata.producer_epoch != producer_epoch:
            return E.PRODUCER_FENCED
        return partition, epoch, metadata

    def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Sequence[TopicPartition],
    ) -> Deferred[ErrorCode]:
        """Add partitions to the producer's transaction (starting it if none is ongoing)."""
        checked = self._producer_of(transactional_id, producer_id, producer_epoch)
        if isinstance(checked, ErrorCode):
            return _completed(checked)
        partition, epoch, metadata = checked
        if metadata.pending_transition_in_progress or metadata.state in (
            _S.PREPARE_COMMIT,
            _S.PREPARE_ABORT,
        ):
            return _completed(E.CONCURRENT_TRANSACTIONS)
        wanted = set(partitions)
        if metadata.state is _S.ONGOING and wanted <= metadata.topic_partitions:
            return _completed(E.NO_ERROR)
        if metadata.state in (_S.DEAD, _S.PREPARE_EPOCH_FENCE):
            log.error("AddPartitions for %r in state %s", transactional_id, metadata.state)
            return _completed(E.UNKNOWN_SERVER_ERROR)
        transit = metadata.prepare_add_partitions(wanted, self.now())
        metadata.pending_state = transit.txn_state
        result: Deferred[ErrorCode] = Deferred()
        self._state.track(partition, result, E.NOT_COORDINATOR)
        self._state.write(
            partition, epoch, [txn_record(transactional_id, transit)], completer(result)
        )
        return result

    def verify_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Sequence[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        """KIP-890, AddPartitionsToTxn with VerifyOnly (a partition leader asks before appending a
        transaction's first batch): NONE for each partition in the producer's transaction,
        TRANSACTION_ABORTABLE for one that is not; the producer's errors, or CONCURRENT_TRANSACTIONS
        while the transaction is being completed, for all. Nothing is written: a marker racing the
        answer is caught by the leader's verification guard."""
        checked = self._producer_of(transactional_id, producer_id, producer_epoch)
        if isinstance(checked, ErrorCode):
            return dict.fromkeys(partitions, checked)
        metadata = checked[2]
        if metadata.state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
            return dict.fromkeys(partitions, E.CONCURRENT_TRANSACTIONS)
        inside = metadata.topic_partitions
        return {tp: E.NO_ERROR if tp in inside else E.TRANSACTION_ABORTABLE for tp in partitions}

    def add_offsets(
        self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str
    ) -> Deferred[ErrorCode]:
        """Add the group's `__consumer_offsets` partition, so TxnOffsetCommit may follow."""
        return self.add_partitions(
            transactional_id, producer_id, producer_epoch, [self._offsets_partition_for(group_id)]
        )

    # ------------------------------------------------------------------ EndTxn and markers

    def end_txn(
        self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool
    ) -> Deferred[ErrorCode]:
        """Commit or abort: answered once the Prepare record is appended; markers follow."""
        checked = self._producer_of(transactional_id, producer_id, producer_epoch)
        if isinstance(checked, ErrorCode):
            return _completed(checked)
        partition, epoch, metadata = checked
        if metadata.pending_transition_in_progress:
            return _completed(E.CONCURRENT_TRANSACTIONS)
        state = metadata.state
        if state is _S.ONGOING:
            result: Deferred[ErrorCode] = Deferred()
            self._state.track(partition, result, E.NOT_COORDINATOR)
            target = _S.PREPARE_COMMIT if commit else _S.PREPARE_ABORT
            transit = metadata.prepare_abort_or_commit(target, self.now())
            self._write_prepare(partition, epoch, metadata, transit, completer(result))
            return result
        if state in (_S.COMPLETE_COMMIT, _S.COMPLETE_ABORT):
            # a retry of an EndTxn that already completed is answered OK; the other outcome is not
            same = (state is _S.COMPLETE_COMMIT) == commit
            return _completed(E.NO_ERROR if same else E.INVALID_TXN_STATE)
        if state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
            same = (state is _S.PREPARE_COMMIT) == commit
            return _completed(E.CONCURRENT_TRANSACTIONS if same else E.INVALID_TXN_STATE)
        if state is _S.EMPTY:
            return _completed(E.INVALID_TXN_STATE)
        log.error("EndTxn for %r in state %s", transactional_id, state)
        return _completed(E.UNKNOWN_SERVER_ERROR)

    def abort_transaction(self, transactional_id: str) -> Deferred[ErrorCode]:
        """Abort an ongoing transaction from the coordinator's side (as the timeout does): the epoch is
        bumped so its producer is fenced."""
        located = self._state.locate(transactional_id)
        if isinstance(located, ErrorCode):
            return _completed(located)
        partition, epoch, txns = located
        metadata = txns.get(transactional_id)
        if metadata is None:
            return _completed(E.TRANSACTIONAL_ID_NOT_FOUND)
        if metadata.pending_transition_in_progress:
            return _completed(E.CONCURRENT_TRANSACTIONS)
        if metadata.state is not _S.ONGOING:
            return _completed(E.INVALID_TXN_STATE)
        result: Deferred[ErrorCode] = Deferred()
        self._state.track(partition, result, E.NOT_COORDINATOR)
        self._fence_and_abort(partition, epoch, metadata, completer(result))
        return result

    def _fence_and_abort(
        self,
        partition: int,
        coordinator_epoch: int,
        metadata: TransactionMetadata,
        respond: Callable[[ErrorCode], None],
    ) -> None:
        transit = metadata.prepare_epoch_fence_abort(self.now())
        log.info(
            "aborting the transaction of %r, fencing producer id %d at epoch %d",
            metadata.transactional_id,
            transit.producer_id,
            transit.producer_epoch,
        )
        self._write_prepare(partition, coordinator_epoch, metadata, transit, respond)

    def _write_prepare(
        self,
        partition: int,
        coordinator_epoch: int,
        metadata: TransactionMetadata,
        transit: TxnTransitMetadata,
        respond: Callable[[ErrorCode], None],
    ) -> None:
        metadata.pending_state = transit.txn_state

        def done(code: ErrorCode) -> None:
            respond(code)
            if code == E.NO_ERROR:
                self._completion.begin(partition, coordinator_epoch, metadata)

        self._state.write(
            partition,
            coordinator_epoch,
            [txn_record(metadata.transactional_id, transit)],
            done,
        )

    def markers_written(self, request: TxnMarkerRequest) -> None:
        """Every partition of `request` has its marker (or is gone): write CompleteCommit/CompleteAbort."""
        self._completion.markers_written(request)

    # ------------------------------------------------------------------ timers

    def tick(self) -> None:
        """Run whatever is due: completion retries, the timed-out abort check, the expiration check."""
        if not self.active:
            return
        now = self.now()
        self._completion.retry_due(now)
        if now >= self._next_abort_check:
            self._next_abort_check = now + self.config.abort_timed_out_check_interval_ms
            self.abort_timed_out_transactions()
        if now >= self._next_expiration_check:
            self._next_expiration_check = now + self.config.remove_expired_check_interval_ms
            self.remove_expired_transactional_ids()

    def next_deadline(self) -> int | None:
        """The earliest time `tick` has something to do, or None once shut down."""
        if not self.active:
            return None
        deadlines = [self._next_abort_check, self._next_expiration_check]
        deadlines.extend(self._completion.retry_deadlines())
        return min(deadlines)

    def abort_timed_out_transactions(self) -> None:
        """Abort (with an epoch fence) every Ongoing transaction open longer than its timeout."""
        for partition, epoch, metadata in self._state.timed_out_transactions():
            txn_id = metadata.transactional_id

            def logged(code: ErrorCode, txn_id: str = txn_id) -> None:
                log.info("timed-out transaction of %r: %s", txn_id, ErrorCode.name_of(code))

            self._fence_and_abort(partition, epoch, metadata, logged)
