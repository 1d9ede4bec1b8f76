"""The transaction state manager: the cache of transactional ids per `__transaction_state` partition, its
ownership and loading (coordinator epochs), write-then-replay of its records, expiration, describe/list.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TypeVar

from kafkalite.coordinator.deferred import Deferred
from kafkalite.coordinator.runtime import group_store_error
from kafkalite.coordinator.txn_records import parse_key, parse_value, partition_for, txn_tombstone
from kafkalite.coordinator.txn_state import (
    NO_PRODUCER_EPOCH,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
)
from kafkalite.coordinator.txn_types import (
    ListTransactionsResult,
    TransactionDescription,
    TransactionListing,
    TxnConfig,
)
from kafkalite.coordinator.types import CoordinatorRecord
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.exceptions import DecodeError

log = logging.getLogger("kafkalite.coordinator.txn")

E = ErrorCode
_S = TransactionState
T = TypeVar("T")

AppendFn = Callable[[int, list[CoordinatorRecord]], Deferred[ErrorCode]]
# (partition, coordinator epoch, its transactional ids)
Located = tuple[int, int, dict[str, TransactionMetadata]]


def txn_store_error(code: ErrorCode) -> ErrorCode:
    """The error a client sees when appending to `__transaction_state` failed: Kafka maps it as it
    maps a failed group write."""
    return group_store_error(code)


def completer(result: Deferred[T]) -> Callable[[T], None]:
    """`result.complete` as a plain callback (a second completion is ignored)."""

    def complete(value: T) -> None:
        result.complete(value)

    return complete


class TransactionStateManager:
    """Which `__transaction_state` partitions we serve, and the metadata of their transactional ids.

    State changes only by replaying records: `write` appends through `append` and replays once it is
    appended; loading replays the partition's log. Callers waiting on a partition (`track`) are answered
    NOT_COORDINATOR when it is unloaded.
    """

    def __init__(self, append: AppendFn, *, config: TxnConfig, clock: Callable[[], int]) -> None:
        self.config = config
        self._append = append
        self._clock = clock
        # __transaction_state partitions we lead -> their leader epoch (the coordinator epoch)
        self.coordinator_epochs: dict[int, int] = {}
        self.loading_partitions: set[int] = set()
        self.transactions: dict[int, dict[str, TransactionMetadata]] = {}
        self.active = True
        # callers waiting on a write or an allocation, per partition: answered NOT_COORDINATOR on unload
        self._waiting: dict[int, dict[int, Callable[[], None]]] = {}

    # ------------------------------------------------------------------ placement / lookup

    def now(self) -> int:
        return self._clock()

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.config.transaction_state_log_num_partitions)

    def metadata(self, transactional_id: str) -> TransactionMetadata | None:
        """The cached metadata of a transactional id (any partition we hold), for inspection."""
        return self.transactions.get(self.partition_for(transactional_id), {}).get(transactional_id)

    def owns(self, partition: int, coordinator_epoch: int) -> bool:
        """Whether we still serve `partition` at `coordinator_epoch` (loaded, not since reloaded)."""
        return (
            self.active
            and self.coordinator_epochs.get(partition) == coordinator_epoch
            and partition not in self.loading_partitions
        )

    def locate(self, transactional_id: str) -> Located | ErrorCode:
        """(partition, coordinator epoch, its transactions), or LOAD_IN_PROGRESS / NOT_COORDINATOR."""
        partition = self.partition_for(transactional_id)
        if partition in self.loading_partitions:
            return E.COORDINATOR_LOAD_IN_PROGRESS
        epoch = self.coordinator_epochs.get(partition)
        if epoch is None or not self.active:
            return E.NOT_COORDINATOR
        return partition, epoch, self.transactions.setdefault(partition, {})

    def current(
        self, partition: int, coordinator_epoch: int, transactional_id: str
    ) -> TransactionMetadata | None:
        """The cached metadata, if we still serve its partition at `coordinator_epoch`."""
        if not self.owns(partition, coordinator_epoch):
            return None
        return self.transactions.get(partition, {}).get(transactional_id)

    def serving(self) -> list[Located]:
        """Every loaded partition we serve, in partition order."""
        return [
            (p, epoch, self.transactions.get(p, {}))
            for p, epoch in sorted(self.coordinator_epochs.items())
            if p not in self.loading_partitions
        ]

    def track(self, partition: int, result: Deferred[T], not_coordinator: T) -> None:
        """Answer `result` with `not_coordinator` if the partition is unloaded before it completes."""
        waiters = self._waiting.setdefault(partition, {})
        key = id(result)
        complete = completer(result)

        def forget(_: T) -> None:
            waiters.pop(key, None)

        waiters[key] = lambda: complete(not_coordinator)
        result.on_done(forget)

    # ------------------------------------------------------------------ writing and replay

    def write(
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
            owned = self.owns(partition, coordinator_epoch)
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

    def replay(self, partition: int, key: bytes | None, value: bytes | None) -> None:
        """Feed one record of the partition's log, oldest first, while it loads."""
        if partition not in self.loading_partitions:
            log.warning("__transaction_state-%d is not loading; record ignored", partition)
            return
        self._replay(partition, key, value)

    def finish_loading(self, partition: int) -> list[TransactionMetadata]:
        """Every record is replayed: serve the partition. Returns the transactions left in Prepare*,
        whose markers the coordinator must (re)send."""
        if partition not in self.loading_partitions:
            return []
        self.loading_partitions.discard(partition)
        epoch = self.coordinator_epochs[partition]
        unfinished: list[TransactionMetadata] = []
        for metadata in self.transactions.get(partition, {}).values():
            if metadata.state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
                unfinished.append(metadata)
            elif metadata.state in (_S.PREPARE_EPOCH_FENCE, _S.DEAD):
                # Kafka never writes these; like Kafka, leave the id as loaded (its requests will fail)
                log.error("loaded %r in state %s", metadata.transactional_id, metadata.state)
        # one line per partition at DEBUG: the broker says at INFO what a whole start loaded
        log.debug("__transaction_state-%d loaded at coordinator epoch %d", partition, epoch)
        return unfinished

    def unload(self, partition: int) -> None:
        """We no longer lead this partition: forget its ids; waiting callers get NOT_COORDINATOR."""
        self.coordinator_epochs.pop(partition, None)
        self.loading_partitions.discard(partition)
        self.transactions.pop(partition, None)
        self._fail_waiting(partition)

    def shutdown(self) -> None:
        self.active = False
        for partition in list(self.coordinator_epochs):
            self.unload(partition)

    def _fail_waiting(self, partition: int) -> None:
        for fail in list(self._waiting.pop(partition, {}).values()):
            fail()

    # ------------------------------------------------------------------ expiration

    def timed_out_transactions(self) -> list[tuple[int, int, TransactionMetadata]]:
        """(partition, coordinator epoch, metadata) of every Ongoing transaction past its timeout."""
        now = self.now()
        return [
            (partition, epoch, metadata)
            for partition, epoch, txns in self.serving()
            for metadata in txns.values()
            if metadata.pending_state is None
            and metadata.state is _S.ONGOING
            and metadata.txn_start_timestamp + metadata.txn_timeout_ms < now
        ]

    def remove_expired_transactional_ids(self) -> None:
        """Tombstone transactional ids idle (and not in a transaction) for transactional.id.expiration.ms."""
        now = self.now()
        horizon = now - self.config.transactional_id_expiration_ms
        for partition, epoch, txns in self.serving():
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
                self.write(partition, epoch, records, lambda code: None)

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
        located = self.locate(transactional_id)
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
        for _, _, txns in self.serving():
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
