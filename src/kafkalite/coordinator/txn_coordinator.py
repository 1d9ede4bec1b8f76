"""The transaction coordinator: producer ids and epochs, transactions and their markers, timeouts and
expiration, kept in `__transaction_state` as pure logic (the broker supplies appends, pids and markers).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from kafkalite.coordinator.deferred import Deferred
from kafkalite.coordinator.txn_records import (
    parse_key,
    parse_value,
    partition_for,
    txn_record,
    txn_tombstone,
)
from kafkalite.coordinator.txn_state import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
    is_epoch_exhausted,
)
from kafkalite.coordinator.txn_types import (
    InitProducerIdResult,
    ListTransactionsResult,
    TransactionDescription,
    TransactionListing,
    TxnConfig,
    TxnMarkerRequest,
)
from kafkalite.coordinator.types import CoordinatorRecord, TopicPartition
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.exceptions import DecodeError

log = logging.getLogger("kafkalite.coordinator.txn")

E = ErrorCode
_S = TransactionState
T = TypeVar("T")

AppendFn = Callable[[int, list[CoordinatorRecord]], Deferred[ErrorCode]]
# a completion write that failed is tried again this long after
COMPLETION_RETRY_BACKOFF_MS = 100
# answered when the producer-id allocator gives a negative id (Kafka's id manager is still fetching a block)
PRODUCER_ID_UNAVAILABLE = E.COORDINATOR_LOAD_IN_PROGRESS


def txn_store_error(code: ErrorCode) -> ErrorCode:
    """The error a client sees when appending to `__transaction_state` failed (as Kafka maps it)."""
    if code in (
        E.UNKNOWN_TOPIC_OR_PARTITION,
        E.NOT_ENOUGH_REPLICAS,
        E.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        E.REQUEST_TIMED_OUT,
    ):
        return E.COORDINATOR_NOT_AVAILABLE
    if code in (E.NOT_LEADER_OR_FOLLOWER, E.KAFKA_STORAGE_ERROR):
        return E.NOT_COORDINATOR
    if code in (E.MESSAGE_TOO_LARGE, E.RECORD_LIST_TOO_LARGE):
        return E.UNKNOWN_SERVER_ERROR
    return code


def _completed(value: T) -> Deferred[T]:
    return Deferred.completed(value)


def _completer(result: Deferred[T]) -> Callable[[T], None]:
    """`result.complete` as a plain callback (a second completion is ignored)."""

    def complete(value: T) -> None:
        result.complete(value)

    return complete


class TransactionCoordinator:
    """Sans-IO transaction coordinator.

    The broker supplies `append(partition, records)` (to `__transaction_state`), a millisecond `clock`,
    `new_producer_id()` and `send_markers(request)`; it calls `begin_loading`/`replay`/`finish_loading`
    and `unload` as it gains and loses leadership, `markers_written(request)` once a request's markers
    are all written, and `tick()` when `next_deadline()` is reached.
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
        self._append = append
        self._clock = clock
        self._new_producer_id = new_producer_id
        self._send_markers = send_markers
        self._offsets_partition_for = offsets_partition_for
        # __transaction_state partitions we lead -> their leader epoch (the coordinator epoch)
        self.coordinator_epochs: dict[int, int] = {}
        self.loading_partitions: set[int] = set()
        self.transactions: dict[int, dict[str, TransactionMetadata]] = {}
        self.active = True
        # callers waiting on a write or an allocation, per partition: answered NOT_COORDINATOR on unload
        self._waiting: dict[int, dict[int, Callable[[], None]]] = {}
        self._completion_retries: list[tuple[int, TxnMarkerRequest]] = []
        now = clock()
        self._next_abort_check = now + config.abort_timed_out_check_interval_ms
        self._next_expiration_check = now + config.remove_expired_check_interval_ms

    # ------------------------------------------------------------------ placement / lookup

    def now(self) -> int:
        return self._clock()

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.config.transaction_state_log_num_partitions)

    def metadata(self, transactional_id: str) -> TransactionMetadata | None:
        """The cached metadata of a transactional id (any partition we hold), for inspection."""
        return self.transactions.get(self.partition_for(transactional_id), {}).get(transactional_id)

    def _owns(self, partition: int, coordinator_epoch: int) -> bool:
        return (
            self.active
            and self.coordinator_epochs.get(partition) == coordinator_epoch
            and partition not in self.loading_partitions
        )

    def _locate(
        self, transactional_id: str
    ) -> tuple[int, int, dict[str, TransactionMetadata]] | ErrorCode:
        """(partition, coordinator epoch, its transactions), or LOAD_IN_PROGRESS / NOT_COORDINATOR."""
        partition = self.partition_for(transactional_id)
        if partition in self.loading_partitions:
            return E.COORDINATOR_LOAD_IN_PROGRESS
        epoch = self.coordinator_epochs.get(partition)
        if epoch is None or not self.active:
            return E.NOT_COORDINATOR
        return partition, epoch, self.transactions.setdefault(partition, {})

    def _current(
        self, partition: int, coordinator_epoch: int, transactional_id: str
    ) -> TransactionMetadata | None:
        if not self._owns(partition, coordinator_epoch):
            return None
        return self.transactions.get(partition, {}).get(transactional_id)

    def _track(self, partition: int, result: Deferred[T], not_coordinator: T) -> None:
        """Answer `result` with `not_coordinator` if the partition is unloaded before it completes."""
        waiters = self._waiting.setdefault(partition, {})
        key = id(result)
        complete = _completer(result)

        def forget(_: T) -> None:
            waiters.pop(key, None)

        waiters[key] = lambda: complete(not_coordinator)
        result.on_done(forget)

    def _allocate(self, on_allocated: Callable[[int], None]) -> None:
        try:
            pending = self._new_producer_id()
        except Exception:
            log.exception("producer id allocation raised")
            pending = Deferred.completed(-1)
        pending.on_done(on_allocated)

    # ------------------------------------------------------------------ writing and replay

    def _write(
        self,
        partition: int,
        coordinator_epoch: int,
        records: list[CoordinatorRecord],
        on_done: Callable[[ErrorCode], None],
        *,
        reset_pending_on_error: bool = True,
    ) -> None:
        """Append records; replay them once appended (the only way state changes), then `on_done`.

        A failed append changes nothing: the pending state is cleared (unless the caller retries) and a
        transactional id that was never persisted is forgotten."""
        try:
            pending = self._append(partition, records)
        except (
            Exception
        ):  # the sink must answer with a code; never let it take the coordinator down
            log.exception("append to __transaction_state-%d raised", partition)
            pending = Deferred.completed(E.UNKNOWN_SERVER_ERROR)

        def appended(code: ErrorCode) -> None:
            owned = self._owns(partition, coordinator_epoch)
            if code == E.NO_ERROR:
                if (
                    not owned
                ):  # unloaded (or reloaded at a newer epoch) meanwhile: the load replays it
                    on_done(E.NOT_COORDINATOR)
                    return
                for r in records:
                    self._apply(partition, r.parsed_key, r.parsed_value, live=True)
                on_done(E.NO_ERROR)
                return
            error = txn_store_error(code)
            log.info(
                "append of %d record(s) to __transaction_state-%d failed: %s",
                len(records),
                partition,
                ErrorCode.name_of(code),
            )
            if owned and reset_pending_on_error:
                txns = self.transactions.get(partition, {})
                for r in records:
                    metadata = txns.get(r.parsed_key)
                    if metadata is None:
                        continue
                    metadata.pending_state = None
                    if metadata.producer_epoch == NO_PRODUCER_EPOCH:
                        del txns[r.parsed_key]  # a new transactional id that never reached the log
            on_done(error)

        pending.on_done(appended)

    def _replay(self, partition: int, key: bytes | None, value: bytes | None) -> None:
        if key is None:
            log.warning("__transaction_state-%d: skipping a record without a key", partition)
            return
        try:
            transactional_id = parse_key(key)
            transit = None if value is None else parse_value(value)
        except DecodeError as exc:
            log.warning("__transaction_state-%d: skipping an unreadable record: %s", partition, exc)
            return
        self._apply(partition, transactional_id, transit, live=False)

    def _apply(
        self,
        partition: int,
        transactional_id: str,
        transit: TxnTransitMetadata | None,
        *,
        live: bool,
    ) -> None:
        """Apply one record (None = tombstone). Live appends and loading both end here."""
        txns = self.transactions.setdefault(partition, {})
        if not live:
            if transit is None:
                txns.pop(transactional_id, None)
            else:
                txns[transactional_id] = TransactionMetadata.from_transit(transactional_id, transit)
            return
        metadata = txns.get(transactional_id)
        if metadata is None:
            log.error("appended a record for %r, which is not cached", transactional_id)
        elif transit is None:
            if metadata.pending_state is _S.DEAD:
                del txns[transactional_id]
            else:
                log.warning("tombstone for %r, which is no longer expiring", transactional_id)
        else:
            metadata.complete_transition(transit)

    # ------------------------------------------------------------------ ownership

    def begin_loading(self, partition: int, coordinator_epoch: int) -> None:
        """We lead this partition at `coordinator_epoch`: its ids answer LOAD_IN_PROGRESS until loaded."""
        self._fail_waiting(partition)
        self.coordinator_epochs[partition] = coordinator_epoch
        self.loading_partitions.add(partition)
        self.transactions[partition] = {}
        self._drop_retries(partition)

    def replay(self, partition: int, key: bytes | None, value: bytes | None) -> None:
        """Feed one record of the partition's log, oldest first, while it loads."""
        if partition not in self.loading_partitions:
            log.warning("__transaction_state-%d is not loading; record ignored", partition)
            return
        self._replay(partition, key, value)

    def finish_loading(self, partition: int) -> None:
        """Every record is replayed: serve the partition, and finish transactions left in Prepare*."""
        if partition not in self.loading_partitions:
            return
        self.loading_partitions.discard(partition)
        epoch = self.coordinator_epochs[partition]
        for metadata in list(self.transactions.get(partition, {}).values()):
            if metadata.state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
                self._begin_completion(partition, epoch, metadata)
            elif metadata.state in (_S.PREPARE_EPOCH_FENCE, _S.DEAD):
                # Kafka never writes these; like Kafka, leave the id as loaded (its requests will fail)
                log.error("loaded %r in state %s", metadata.transactional_id, metadata.state)
        log.info("__transaction_state-%d loaded at coordinator epoch %d", partition, epoch)

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
        self.coordinator_epochs.pop(partition, None)
        self.loading_partitions.discard(partition)
        self.transactions.pop(partition, None)
        self._drop_retries(partition)
        self._fail_waiting(partition)

    def shutdown(self) -> None:
        self.active = False
        for partition in list(self.coordinator_epochs):
            self.unload(partition)

    def _fail_waiting(self, partition: int) -> None:
        for fail in list(self._waiting.pop(partition, {}).values()):
            fail()

    def _drop_retries(self, partition: int) -> None:
        self._completion_retries = [
            (due, r)
            for due, r in self._completion_retries
            if self.partition_for(r.transactional_id) != partition
        ]

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
            complete = _completer(result)
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
        located = self._locate(transactional_id)
        if isinstance(located, ErrorCode):
            return _completed(InitProducerIdResult(located))
        partition, epoch, txns = located
        result = Deferred()
        self._track(partition, result, InitProducerIdResult(E.NOT_COORDINATOR))
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
            if self._current(partition, epoch, transactional_id) is not placeholder:
                result.complete(InitProducerIdResult(E.NOT_COORDINATOR))
                return
            current = self.transactions[partition]
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
                    self._current(partition, coordinator_epoch, metadata.transactional_id)
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
        self._write(partition, coordinator_epoch, [record], done)

    # ------------------------------------------------------------------ AddPartitions / AddOffsets

    def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Sequence[TopicPartition],
    ) -> Deferred[ErrorCode]:
        """Add partitions to the producer's transaction (starting it if none is ongoing)."""
        if not transactional_id:
            return _completed(E.INVALID_REQUEST)
        located = self._locate(transactional_id)
        if isinstance(located, ErrorCode):
            return _completed(located)
        partition, epoch, txns = located
        metadata = txns.get(transactional_id)
        if metadata is None or metadata.producer_id != producer_id:
            return _completed(E.INVALID_PRODUCER_ID_MAPPING)
        if metadata.producer_epoch != producer_epoch:
            return _completed(E.PRODUCER_FENCED)
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
        self._track(partition, result, E.NOT_COORDINATOR)
        self._write(partition, epoch, [txn_record(transactional_id, transit)], _completer(result))
        return result

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
        if not transactional_id:
            return _completed(E.INVALID_REQUEST)
        located = self._locate(transactional_id)
        if isinstance(located, ErrorCode):
            return _completed(located)
        partition, epoch, txns = located
        metadata = txns.get(transactional_id)
        if metadata is None or metadata.producer_id != producer_id:
            return _completed(E.INVALID_PRODUCER_ID_MAPPING)
        if metadata.producer_epoch != producer_epoch:
            return _completed(E.PRODUCER_FENCED)
        if metadata.pending_transition_in_progress:
            return _completed(E.CONCURRENT_TRANSACTIONS)
        state = metadata.state
        if state is _S.ONGOING:
            result: Deferred[ErrorCode] = Deferred()
            self._track(partition, result, E.NOT_COORDINATOR)
            target = _S.PREPARE_COMMIT if commit else _S.PREPARE_ABORT
            transit = metadata.prepare_abort_or_commit(target, self.now())
            self._write_prepare(partition, epoch, metadata, transit, _completer(result))
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
        located = self._locate(transactional_id)
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
        self._track(partition, result, E.NOT_COORDINATOR)
        self._fence_and_abort(partition, epoch, metadata, _completer(result))
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
                self._begin_completion(partition, coordinator_epoch, metadata)

        self._write(
            partition,
            coordinator_epoch,
            [txn_record(metadata.transactional_id, transit)],
            done,
        )

    def _begin_completion(
        self, partition: int, coordinator_epoch: int, metadata: TransactionMetadata
    ) -> None:
        """A Prepare record is in the log: send the markers (or, with no partitions, complete now)."""
        current = self._current(partition, coordinator_epoch, metadata.transactional_id)
        if current is not metadata or metadata.pending_transition_in_progress:
            return
        if metadata.state not in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
            return
        commit = metadata.state is _S.PREPARE_COMMIT
        metadata.pending_state = _S.COMPLETE_COMMIT if commit else _S.COMPLETE_ABORT
        request = TxnMarkerRequest(
            metadata.transactional_id,
            metadata.producer_id,
            metadata.producer_epoch,
            coordinator_epoch,
            commit,
            frozenset(metadata.topic_partitions),
        )
        if not request.partitions:
            self._write_completion(partition, metadata, request)
            return
        try:
            self._send_markers(request)
        except Exception:
            log.exception("send_markers raised for %r", metadata.transactional_id)

    def _awaiting_completion(self, request: TxnMarkerRequest) -> TransactionMetadata | None:
        """The metadata whose markers `request` carried, if it is still waiting for them."""
        partition = self.partition_for(request.transactional_id)
        metadata = self._current(partition, request.coordinator_epoch, request.transactional_id)
        prepare, complete = (
            (_S.PREPARE_COMMIT, _S.COMPLETE_COMMIT)
            if request.commit
            else (_S.PREPARE_ABORT, _S.COMPLETE_ABORT)
        )
        if (
            metadata is None
            or metadata.producer_id != request.producer_id
            or metadata.producer_epoch != request.producer_epoch
            or metadata.state is not prepare
            or metadata.pending_state is not complete
        ):
            return None
        return metadata

    def markers_written(self, request: TxnMarkerRequest) -> None:
        """Every partition of `request` has its marker (or is gone): write CompleteCommit/CompleteAbort."""
        metadata = self._awaiting_completion(request)
        if metadata is None:
            log.info("markers of %r are no longer awaited; ignored", request.transactional_id)
            return
        self._write_completion(self.partition_for(request.transactional_id), metadata, request)

    def _write_completion(
        self, partition: int, metadata: TransactionMetadata, request: TxnMarkerRequest
    ) -> None:
        transit = metadata.prepare_complete(self.now())

        def done(code: ErrorCode) -> None:
            if code == E.NO_ERROR or code in (E.NOT_COORDINATOR, E.COORDINATOR_LOAD_IN_PROGRESS):
                return  # done, or the partition moved: its next leader completes it on load
            self._completion_retries.append((self.now() + COMPLETION_RETRY_BACKOFF_MS, request))

        self._write(
            partition,
            request.coordinator_epoch,
            [txn_record(metadata.transactional_id, transit)],
            done,
            reset_pending_on_error=False,
        )

    # ------------------------------------------------------------------ timers

    def tick(self) -> None:
        """Run whatever is due: completion retries, the timed-out abort check, the expiration check."""
        if not self.active:
            return
        now = self.now()
        due = [r for t, r in self._completion_retries if t <= now]
        self._completion_retries = [(t, r) for t, r in self._completion_retries if t > now]
        for request in due:
            metadata = self._awaiting_completion(request)
            if metadata is not None:
                self._write_completion(
                    self.partition_for(request.transactional_id), metadata, request
                )
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
        deadlines.extend(t for t, _ in self._completion_retries)
        return min(deadlines)

    def _serving(self) -> list[tuple[int, int, dict[str, TransactionMetadata]]]:
        return [
            (p, epoch, self.transactions.get(p, {}))
            for p, epoch in sorted(self.coordinator_epochs.items())
            if p not in self.loading_partitions
        ]

    def abort_timed_out_transactions(self) -> None:
        """Abort (with an epoch fence) every Ongoing transaction open longer than its timeout."""
        now = self.now()
        for partition, epoch, txns in self._serving():
            for metadata in list(txns.values()):
                if (
                    metadata.pending_state is None
                    and metadata.state is _S.ONGOING
                    and metadata.txn_start_timestamp + metadata.txn_timeout_ms < now
                ):
                    txn_id = metadata.transactional_id

                    def logged(code: ErrorCode, txn_id: str = txn_id) -> None:
                        log.info("timed-out transaction of %r: %s", txn_id, ErrorCode.name_of(code))

                    self._fence_and_abort(partition, epoch, metadata, logged)

    def remove_expired_transactional_ids(self) -> None:
        """Tombstone transactional ids idle (and not in a transaction) for transactional.id.expiration.ms."""
        now = self.now()
        horizon = now - self.config.transactional_id_expiration_ms
        for partition, epoch, txns in self._serving():
            records: list[CoordinatorRecord] = []
            for metadata in list(txns.values()):
                if (
                    metadata.pending_state is None
                    and metadata.state.is_expiration_allowed
                    and metadata.txn_last_update_timestamp <= horizon
                ):
                    metadata.prepare_dead()  # checks the table
                    metadata.pending_state = _S.DEAD
                    records.append(txn_tombstone(metadata.transactional_id))
            if records:
                log.info("expiring %d transactional id(s) of partition %d", len(records), partition)
                self._write(partition, epoch, records, lambda code: None)

    # ------------------------------------------------------------------ admin

    def describe_transactions(
        self, transactional_ids: Sequence[str]
    ) -> list[TransactionDescription]:
        return [self._describe(t) for t in transactional_ids]

    def _describe(self, transactional_id: str) -> TransactionDescription:
        if not self.active:
            return TransactionDescription(transactional_id, E.COORDINATOR_NOT_AVAILABLE)
        if transactional_id == "":
            return TransactionDescription(transactional_id, E.INVALID_REQUEST)
        located = self._locate(transactional_id)
        if isinstance(located, ErrorCode):
            return TransactionDescription(transactional_id, located)
        metadata = located[2].get(transactional_id)
        if metadata is None or metadata.state is _S.DEAD:
            return TransactionDescription(transactional_id, E.TRANSACTIONAL_ID_NOT_FOUND)
        topics: dict[str, list[int]] = {}
        for tp in sorted(metadata.topic_partitions):
            topics.setdefault(tp.topic, []).append(tp.partition)
        return TransactionDescription(
            transactional_id,
            E.NO_ERROR,
            transaction_state=metadata.state.value,
            transaction_timeout_ms=metadata.txn_timeout_ms,
            transaction_start_time_ms=metadata.txn_start_timestamp,
            producer_id=metadata.producer_id,
            producer_epoch=metadata.producer_epoch,
            topics=topics,
        )

    def list_transactions(
        self,
        state_filters: Sequence[str] = (),
        producer_id_filters: Sequence[int] = (),
        duration_filter_ms: int = -1,
    ) -> ListTransactionsResult:
        """ListTransactions (KIP-664; `duration_filter_ms` >= 0 keeps those running longer, KIP-994)."""
        if not self.active:
            return ListTransactionsResult(E.COORDINATOR_NOT_AVAILABLE)
        if self.loading_partitions:
            return ListTransactionsResult(E.COORDINATOR_LOAD_IN_PROGRESS)
        result = ListTransactionsResult(E.NO_ERROR)
        states: set[TransactionState] = set()
        for name in state_filters:
            state = TransactionState.from_name(name)
            if state is None:
                result.unknown_state_filters.append(name)
            else:
                states.add(state)
        pids = set(producer_id_filters)
        now = self.now()
        for _, _, txns in self._serving():
            for metadata in txns.values():
                if metadata.state is _S.DEAD:
                    continue
                if pids and metadata.producer_id not in pids:
                    continue
                if state_filters and metadata.state not in states:
                    continue
                if (
                    duration_filter_ms >= 0
                    and now - metadata.txn_start_timestamp <= duration_filter_ms
                ):
                    continue
                result.transaction_states.append(
                    TransactionListing(
                        metadata.transactional_id, metadata.producer_id, metadata.state.value
                    )
                )
        return result
