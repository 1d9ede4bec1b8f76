"""The transactional producer's TransactionManager: the transaction state table (Kafka's client states),
the partitions and offsets of the open transaction, and the coordinator requests that move it along.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import enum
import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any

from kafkalite.client.accumulator import RecordAccumulator
from kafkalite.client.errors import (
    CommitFailedError,
    FatalProducerError,
    IllegalStateError,
    KafkaConnectionError,
    KafkaTimeoutError,
    NoBrokersAvailable,
    ProducerFencedError,
    TransactionAbortableError,
    TransactionAbortedError,
    TransactionalIdAuthorizationError,
)
from kafkalite.client.find_coordinator import GROUP_KEY, TRANSACTION_KEY, find_coordinator
from kafkalite.client.network import NetworkClient
from kafkalite.client.structs import ConsumerGroupMetadata, OffsetAndMetadata, TopicPartition
from kafkalite.protocol.errors import ErrorCode as E
from kafkalite.protocol.errors import KafkaError
from kafkalite.protocol.messages.txn import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    TxnOffsetCommitRequest,
)

log = logging.getLogger("kafkalite.client.producer")
INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT = (
    22,
    24,
    25,
    26,
    28,
)
CONCURRENT_TXN_BACKOFF = (
    0.02  # seconds: the previous transaction's markers are usually written by then
)
# AddPartitionsToTxn v4+ is the brokers' form (KIP-890): a client speaks v3 at most, as Kafka's does
_CLIENT_VERSION_CAP = {ADD_PARTITIONS_TO_TXN: 3}


class TxnState(enum.Enum):
    UNINITIALIZED = "Uninitialized"
    INITIALIZING = "Initializing"
    READY = "Ready"
    IN_TRANSACTION = "InTransaction"
    COMMITTING_TRANSACTION = "CommittingTransaction"
    ABORTING_TRANSACTION = "AbortingTransaction"
    ABORTABLE_ERROR = "AbortableError"
    FATAL_ERROR = "FatalError"


S = TxnState

# target state -> the states it may be entered from (checked only in TransactionManager._transition)
VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    S.UNINITIALIZED: frozenset(),
    S.INITIALIZING: frozenset({S.UNINITIALIZED}),
    S.READY: frozenset({S.INITIALIZING, S.COMMITTING_TRANSACTION, S.ABORTING_TRANSACTION}),
    S.IN_TRANSACTION: frozenset({S.READY}),
    S.COMMITTING_TRANSACTION: frozenset({S.IN_TRANSACTION}),
    S.ABORTING_TRANSACTION: frozenset({S.IN_TRANSACTION, S.ABORTABLE_ERROR}),
    S.ABORTABLE_ERROR: frozenset({S.IN_TRANSACTION, S.COMMITTING_TRANSACTION, S.ABORTABLE_ERROR}),
    S.FATAL_ERROR: frozenset(TxnState),
}


def is_transition_valid(source: TxnState, target: TxnState) -> bool:
    return source in VALID_PREVIOUS[target]


# codes after which the producer can only be closed (Kafka's fatal transactional errors)
FATAL_CODES = frozenset(
    {
        E.PRODUCER_FENCED,
        E.INVALID_PRODUCER_EPOCH,
        E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        E.TRANSACTION_COORDINATOR_FENCED,
        E.CLUSTER_AUTHORIZATION_FAILED,
        E.INVALID_TXN_STATE,
        E.UNSUPPORTED_VERSION,
        E.UNSUPPORTED_FOR_MESSAGE_FORMAT,
    }
)
_COORDINATOR_MOVED = frozenset({E.NOT_COORDINATOR, E.COORDINATOR_NOT_AVAILABLE})
_RETRY = frozenset({E.CONCURRENT_TRANSACTIONS, E.COORDINATOR_LOAD_IN_PROGRESS})
_RETRY_PARTITIONS = _RETRY | {E.UNKNOWN_TOPIC_OR_PARTITION, E.REQUEST_TIMED_OUT}
_GROUP_MEMBER_ERRORS = frozenset({E.UNKNOWN_MEMBER_ID, E.ILLEGAL_GENERATION, E.FENCED_INSTANCE_ID})


def fatal_error(code: int, what: str) -> FatalProducerError:
    """The exception a fatal code is raised as (and raised again by every later call)."""
    if code in (E.PRODUCER_FENCED, E.INVALID_PRODUCER_EPOCH):
        return ProducerFencedError(
            code, f"{what}: another producer with the same transactional.id took over"
        )
    if code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
        return TransactionalIdAuthorizationError(code, what)
    return FatalProducerError(code, what)


def _worst_code(codes: Iterable[int]) -> int:
    """One code standing for a response's partition codes: a real error before OPERATION_NOT_ATTEMPTED."""
    seen = [c for c in codes if c]
    real = [c for c in seen if c != E.OPERATION_NOT_ATTEMPTED]
    return real[0] if real else (seen[0] if seen else 0)


class TransactionManager:
    """Holds one transactional producer's state; the user thread moves it with begin_* and the I/O
    thread with the coroutines (init, add partitions, send offsets, end the transaction) and with batch
    outcomes. A transition not in VALID_PREVIOUS raises IllegalStateError."""

    def __init__(
        self, config: dict[str, Any], client: NetworkClient, accumulator: RecordAccumulator
    ) -> None:
        self.transactional_id: str = str(config["transactional.id"])
        self.transaction_timeout_ms = int(config["transaction.timeout.ms"])
        self.retry_backoff = int(config["retry.backoff.ms"]) / 1000
        self.client = client
        self.acc = accumulator
        self.lock = threading.RLock()
        self.state = S.UNINITIALIZED
        self.last_error: BaseException | None = None
        self.producer_id = -1
        self.producer_epoch = -1
        self.partitions_in_txn: set[tuple[str, int]] = set()  # added at the coordinator
        self.pending_partitions: set[tuple[str, int]] = set()  # to add before their batches go
        self.adding = False  # an AddPartitionsToTxn is under way
        self.transaction_started = False  # the coordinator knows of this transaction
        self.epoch_bump_needed = False  # a sent batch failed: its sequence numbers are in doubt
        self.coordinators: dict[tuple[int, str], int] = {}
        # the user-facing call whose result is still due (retrying it after a timeout waits on it)
        self.pending: tuple[str, concurrent.futures.Future[None]] | None = None
        self.wakeup: Callable[[], None] = lambda: None
        self.on_producer_id: Callable[[int, int], None] = lambda pid, epoch: None

    # -- the table
    def _transition(self, target: TxnState, error: BaseException | None = None) -> None:
        with self.lock:
            source = self.state
            if source is S.FATAL_ERROR and target is not S.FATAL_ERROR:
                assert self.last_error is not None
                raise self.last_error
            if not is_transition_valid(source, target):
                raise IllegalStateError(
                    f"transactional.id {self.transactional_id!r}: cannot move from {source.value} "
                    f"to {target.value}"
                )
            log.debug("transaction %s: %s -> %s", self.transactional_id, source.value, target.value)
            self.state = target
            if error is not None:
                self.last_error = error
            elif target in (S.READY, S.IN_TRANSACTION):
                self.last_error = None

    def _raise_if_failed(self, operation: str) -> None:
        """Fatal: the fatal error again. Abortable: only abort_transaction may go on."""
        with self.lock:
            if self.state is S.FATAL_ERROR:
                assert self.last_error is not None
                raise self.last_error
            if self.state is S.ABORTABLE_ERROR:
                raise TransactionAbortableError(
                    f"cannot {operation}: the transaction must be aborted ({self.last_error})",
                    self.last_error,
                )

    def fail_fatal(self, error: BaseException) -> BaseException:
        with self.lock:
            if self.state is not S.FATAL_ERROR:
                log.error("transactional.id %s: fatal error %s", self.transactional_id, error)
                self._transition(S.FATAL_ERROR, error)
            assert self.last_error is not None
            self.wakeup()
            return self.last_error

    def fail_abortable(self, error: BaseException) -> BaseException:
        """The open transaction cannot commit any more; returns the error to raise."""
        if isinstance(error, FatalProducerError):
            return self.fail_fatal(error)
        with self.lock:
            if self.state in (S.IN_TRANSACTION, S.COMMITTING_TRANSACTION, S.ABORTABLE_ERROR):
                if self.state is not S.ABORTABLE_ERROR:
                    log.warning(
                        "transactional.id %s: the transaction must be aborted: %s",
                        self.transactional_id,
                        error,
                    )
                    self._transition(S.ABORTABLE_ERROR, error)
            elif self.state is S.FATAL_ERROR:
                assert self.last_error is not None
                return self.last_error
        self.wakeup()
        return error

    def _fail_code(self, code: int, what: str) -> BaseException:
        if code in FATAL_CODES:
            return self.fail_fatal(fatal_error(code, what))
        return self.fail_abortable(KafkaError(code, what))

    @property
    def is_fatal(self) -> bool:
        return self.state is S.FATAL_ERROR

    # -- the user thread
    def begin_init(self) -> None:
        self._transition(S.INITIALIZING)

    def begin_transaction(self) -> None:
        self._raise_if_failed("begin a transaction")
        with self.lock:
            if self.state is S.UNINITIALIZED:
                raise IllegalStateError("call init_transactions() before begin_transaction()")
            if self.state is S.IN_TRANSACTION:
                raise IllegalStateError("a transaction is already open")
            self._transition(S.IN_TRANSACTION)

    def begin_commit(self) -> None:
        self._raise_if_failed("commit the transaction")
        self._require_open("commit_transaction")
        self._transition(S.COMMITTING_TRANSACTION)
        self.wakeup()

    def begin_abort(self) -> None:
        with self.lock:
            if self.state is S.FATAL_ERROR:
                assert self.last_error is not None
                raise self.last_error
            if self.state is not S.ABORTABLE_ERROR:
                self._require_open("abort_transaction")
            self._transition(S.ABORTING_TRANSACTION)
        self.wakeup()

    def check_send_offsets(self) -> None:
        self._raise_if_failed("send offsets to the transaction")
        self._require_open("send_offsets_to_transaction")

    def _require_open(self, operation: str) -> None:
        if self.state is not S.IN_TRANSACTION:
            raise IllegalStateError(
                f"{operation}() needs an open transaction (begin_transaction()); "
                f"the producer is {self.state.value}"
            )

    def maybe_add_partition(self, tp: tuple[str, int]) -> None:
        """send(): the record's partition joins the transaction (AddPartitionsToTxn before its batch)."""
        with self.lock:
            if self.state is not S.IN_TRANSACTION:
                self._raise_if_failed("send")
                raise IllegalStateError(
                    "send() on a transactional producer needs an open transaction "
                    f"(begin_transaction()); the producer is {self.state.value}"
                )
            if tp not in self.partitions_in_txn and tp not in self.pending_partitions:
                self.pending_partitions.add(tp)

    # -- the I/O thread: the Sender's questions
    def sendable_partitions(self) -> set[tuple[str, int]]:
        """Partitions whose batches may be drained now (added to the transaction)."""
        return self.partitions_in_txn

    def undrained_batch_error(self) -> BaseException | None:
        """When queued batches must be failed instead of sent (aborting, or the transaction is lost)."""
        state = self.state
        if state is S.FATAL_ERROR:
            return self.last_error
        if state in (S.ABORTING_TRANSACTION, S.ABORTABLE_ERROR):
            err = TransactionAbortedError("the transaction was aborted before this record was sent")
            err.__cause__ = self.last_error
            return err
        return None

    def wants_add_partitions(self) -> bool:
        return (
            bool(self.pending_partitions)
            and not self.adding
            and self.state in (S.IN_TRANSACTION, S.COMMITTING_TRANSACTION)
        )

    def on_batch_failed(self, error: BaseException, sequenced: bool) -> BaseException:
        """A batch of this transaction failed for good: the transaction can only be aborted (or, for
        a fatal code, nothing more can be done). Returns the error its records fail with."""
        if isinstance(error, TransactionAbortedError):
            return error
        if sequenced:
            self.epoch_bump_needed = True
        if isinstance(error, KafkaError) and error.code in FATAL_CODES:
            return self.fail_fatal(fatal_error(int(error.code), "Produce"))
        if self.state is not S.ABORTING_TRANSACTION:
            self.fail_abortable(error)
        return error

    # -- the async API (on the I/O loop): each user-facing step as one coroutine
    async def init_transactions(self) -> None:
        self.begin_init()
        await self.initialize()

    async def send_offsets_to_transaction(
        self, offsets: dict[TopicPartition, OffsetAndMetadata], group: ConsumerGroupMetadata
    ) -> None:
        self.check_send_offsets()
        await self.send_offsets(offsets, group)

    async def commit_transaction(self) -> None:
        self.begin_commit()
        await self.end_transaction(True)

    async def abort_transaction(self) -> None:
        self.begin_abort()
        await self.end_transaction(False)

    # -- requests
    async def _coordinator(self, key_type: int, key: str) -> int:
        node = self.coordinators.get((key_type, key))
        while node is None:
            try:
                node = await find_coordinator(self.client, key, key_type)
            except KafkaError as exc:
                if exc.code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
                    raise self.fail_fatal(fatal_error(int(exc.code), "FindCoordinator")) from None
                if exc.code == E.GROUP_AUTHORIZATION_FAILED:
                    raise self.fail_abortable(exc) from None
                if not exc.retriable:
                    raise
                await asyncio.sleep(self.retry_backoff)
            except (KafkaConnectionError, KafkaTimeoutError, NoBrokersAvailable):
                await asyncio.sleep(self.retry_backoff)
            else:
                self.coordinators[(key_type, key)] = node
        return node

    async def _call(
        self,
        make: Callable[[int], Any],
        code_of: Callable[[Any], int],
        retry: frozenset[int] = _RETRY,
        key_type: int = TRANSACTION_KEY,
        key: str | None = None,
    ) -> Any:
        """Send to the coordinator of `key` (the transactional id by default) until the answer is not a
        retriable one: finds the coordinator again on NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE or a
        lost connection, backs off on `retry` codes. Returns the response; KafkaError for other codes."""
        key = self.transactional_id if key is None else key
        while True:
            node = await self._coordinator(key_type, key)
            try:
                conn = await self.client.connection(node)
                api_key = make(0).API_KEY
                version = conn.version(api_key, _CLIENT_VERSION_CAP.get(api_key))
                resp = await conn.send(make(version), version=version)
            except (KafkaConnectionError, KafkaTimeoutError, NoBrokersAvailable) as exc:
                log.debug("transaction request to node %s failed: %s", node, exc)
                self.coordinators.pop((key_type, key), None)
                await asyncio.sleep(self.retry_backoff)
                continue
            code = code_of(resp)
            if not code:
                return resp
            if code in _COORDINATOR_MOVED:
                self.coordinators.pop((key_type, key), None)
                await asyncio.sleep(self.retry_backoff)
            elif code == E.CONCURRENT_TRANSACTIONS and code in retry:
                await asyncio.sleep(min(self.retry_backoff, CONCURRENT_TXN_BACKOFF))
            elif code in retry:
                await asyncio.sleep(self.retry_backoff)
            else:
                raise KafkaError(code, type(make(0)).__name__)

    async def initialize(self) -> None:
        """InitProducerId with the transactional id: a producer id and a new epoch (fencing older
        producers with this id, and finishing their open transaction)."""
        try:
            await self._init_producer_id(bump=False)
        except KafkaError as exc:
            raise self.fail_fatal(
                exc
                if isinstance(exc, FatalProducerError)
                else fatal_error(int(exc.code), "InitProducerId")
            ) from None
        self._transition(S.READY)

    async def _init_producer_id(self, bump: bool) -> None:
        req_cls = InitProducerIdRequest

        def make(version: int) -> Any:
            keep = bump and version >= 3
            return req_cls(
                transactional_id=self.transactional_id,
                transaction_timeout_ms=self.transaction_timeout_ms,
                producer_id=self.producer_id if keep else -1,
                producer_epoch=self.producer_epoch if keep else -1,
            )

        resp = await self._call(make, lambda r: r.error_code)
        self.producer_id = resp.producer_id
        self.producer_epoch = resp.producer_epoch
        self.epoch_bump_needed = False
        self.on_producer_id(self.producer_id, self.producer_epoch)
        log.info(
            "transactional.id %s: producer id %d epoch %d",
            self.transactional_id,
            self.producer_id,
            self.producer_epoch,
        )

    async def add_partitions(self) -> None:
        """AddPartitionsToTxn for the partitions send() met first in this transaction (the Sender
        spawns this; their batches wait until it succeeds)."""
        req_cls = AddPartitionsToTxnRequest
        self.adding = True
        try:
            while True:
                with self.lock:
                    todo = sorted(self.pending_partitions)
                    if not todo or self.state not in (S.IN_TRANSACTION, S.COMMITTING_TRANSACTION):
                        return
                by_topic: dict[str, list[int]] = {}
                for t, p in todo:
                    by_topic.setdefault(t, []).append(p)
                topics = [
                    req_cls.AddPartitionsToTxnTopic(name=t, partitions=ps)
                    for t, ps in by_topic.items()
                ]

                def make(version: int, topics: list[Any] = topics) -> Any:
                    return req_cls(
                        v3_and_below_transactional_id=self.transactional_id,
                        v3_and_below_producer_id=self.producer_id,
                        v3_and_below_producer_epoch=self.producer_epoch,
                        v3_and_below_topics=topics,
                    )

                def code_of(resp: Any) -> int:
                    return _worst_code(
                        p.partition_error_code
                        for t in resp.results_by_topic_v3_and_below
                        for p in t.results_by_partition
                    )

                try:
                    await self._call(make, code_of, _RETRY_PARTITIONS | {E.OPERATION_NOT_ATTEMPTED})
                except KafkaError as exc:
                    self._fail_code(int(exc.code), f"AddPartitionsToTxn {todo}")
                    return
                with self.lock:
                    self.partitions_in_txn.update(todo)
                    self.pending_partitions.difference_update(todo)
                    self.transaction_started = True
                self.wakeup()
        finally:
            self.adding = False
            self.wakeup()

    async def send_offsets(
        self, offsets: dict[TopicPartition, OffsetAndMetadata], group: ConsumerGroupMetadata
    ) -> None:
        """AddOffsetsToTxn to the transaction coordinator, then TxnOffsetCommit to the group's: the
        offsets become the group's committed offsets only if the transaction commits."""
        add_cls = AddOffsetsToTxnRequest
        try:
            await self._call(
                lambda v: add_cls(
                    transactional_id=self.transactional_id,
                    producer_id=self.producer_id,
                    producer_epoch=self.producer_epoch,
                    group_id=group.group_id,
                ),
                lambda r: r.error_code,
            )
        except KafkaError as exc:
            raise self._fail_code(int(exc.code), f"AddOffsetsToTxn({group.group_id})") from None
        self.transaction_started = True
        commit_cls = TxnOffsetCommitRequest
        by_topic: dict[str, list[Any]] = {}
        for tp, om in offsets.items():
            by_topic.setdefault(tp.topic, []).append(
                commit_cls.TxnOffsetCommitRequestTopic.TxnOffsetCommitRequestPartition(
                    partition_index=tp.partition,
                    committed_offset=om.offset,
                    committed_leader_epoch=om.leader_epoch,
                    committed_metadata=om.metadata,
                )
            )
        topics = [
            commit_cls.TxnOffsetCommitRequestTopic(name=t, partitions=ps)
            for t, ps in by_topic.items()
        ]

        def make(version: int) -> Any:
            return commit_cls(
                transactional_id=self.transactional_id,
                group_id=group.group_id,
                producer_id=self.producer_id,
                producer_epoch=self.producer_epoch,
                generation_id=group.generation_id,
                member_id=group.member_id,
                group_instance_id=group.group_instance_id,
                topics=topics,
            )

        def code_of(resp: Any) -> int:
            return _worst_code(p.error_code for t in resp.topics for p in t.partitions)

        try:
            await self._call(make, code_of, _RETRY_PARTITIONS, GROUP_KEY, group.group_id)
        except KafkaError as exc:
            if exc.code in _GROUP_MEMBER_ERRORS:
                err = CommitFailedError(
                    f"TxnOffsetCommit for group {group.group_id}: {E.name_of(exc.code)}; the "
                    "consumer is no longer the group member that owned these partitions"
                )
                raise self.fail_abortable(err) from exc
            raise self._fail_code(int(exc.code), f"TxnOffsetCommit({group.group_id})") from None

    async def _wait_batches(self) -> None:
        """Until every queued and in-flight batch is done and no AddPartitionsToTxn is under way."""
        acc = self.acc
        with acc.lock:
            acc.flushing += 1
        try:
            self.wakeup()
            while acc.has_incomplete() or self.adding:
                await asyncio.sleep(0.002)
        finally:
            with acc.lock:
                acc.flushing -= 1

    async def end_transaction(self, commit: bool) -> None:
        """After begin_commit / begin_abort: wait for the batches, then EndTxn (skipped when the
        coordinator never heard of this transaction) and back to Ready."""
        await self._wait_batches()
        if commit:
            self._raise_if_failed("commit the transaction")
        elif self.state is S.FATAL_ERROR:
            assert self.last_error is not None
            raise self.last_error
        if self.transaction_started:
            end_cls = EndTxnRequest
            try:
                await self._call(
                    lambda v: end_cls(
                        transactional_id=self.transactional_id,
                        producer_id=self.producer_id,
                        producer_epoch=self.producer_epoch,
                        committed=commit,
                    ),
                    lambda r: r.error_code,
                )
            except KafkaError as exc:
                raise self.fail_fatal(fatal_error(int(exc.code), "EndTxn")) from None
        if not commit and self.epoch_bump_needed:
            # a batch failed after it took sequence numbers: a new epoch restarts them (KIP-360)
            try:
                await self._init_producer_id(bump=True)
            except KafkaError as exc:
                raise self.fail_fatal(fatal_error(int(exc.code), "InitProducerId")) from None
        with self.lock:
            self.partitions_in_txn = set()
            self.pending_partitions = set()
            self.transaction_started = False
            self._transition(S.READY)
