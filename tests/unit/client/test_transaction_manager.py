"""The transactional producer's state table and TransactionManager decisions, driven without I/O:
valid transitions, which calls each state allows, abortable versus fatal batch failures."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kafkalite.client.accumulator import RecordAccumulator
from kafkalite.client.config import PRODUCER, make_config
from kafkalite.client.errors import (
    FatalProducerError,
    IllegalStateError,
    KafkaTimeoutError,
    ProducerFencedError,
    TransactionAbortableError,
    TransactionAbortedError,
    TransactionalIdAuthorizationError,
)
from kafkalite.client.transaction_manager import (
    VALID_PREVIOUS,
    TransactionManager,
    TxnState,
    fatal_error,
    is_transition_valid,
)
from kafkalite.protocol.errors import ErrorCode, KafkaError

S = TxnState


def _tm(state: TxnState = S.READY) -> TransactionManager:
    cfg = make_config(PRODUCER, {"transactional.id": "tx"}, {})
    tm = TransactionManager(cfg, SimpleNamespace(), RecordAccumulator(cfg, 0))  # type: ignore[arg-type]
    tm.state = state
    return tm


def test_table_covers_every_state_and_follows_kafka() -> None:
    assert set(VALID_PREVIOUS) == set(TxnState)
    assert is_transition_valid(S.UNINITIALIZED, S.INITIALIZING)
    assert is_transition_valid(S.INITIALIZING, S.READY)
    assert is_transition_valid(S.READY, S.IN_TRANSACTION)
    assert is_transition_valid(S.IN_TRANSACTION, S.COMMITTING_TRANSACTION)
    assert is_transition_valid(S.COMMITTING_TRANSACTION, S.READY)
    assert is_transition_valid(S.COMMITTING_TRANSACTION, S.ABORTABLE_ERROR)
    assert is_transition_valid(S.ABORTABLE_ERROR, S.ABORTING_TRANSACTION)
    assert is_transition_valid(S.ABORTING_TRANSACTION, S.READY)
    assert not is_transition_valid(S.UNINITIALIZED, S.IN_TRANSACTION)
    assert not is_transition_valid(S.READY, S.COMMITTING_TRANSACTION)
    assert not is_transition_valid(S.ABORTABLE_ERROR, S.COMMITTING_TRANSACTION)
    assert not is_transition_valid(S.READY, S.INITIALIZING)  # init_transactions() once
    assert all(is_transition_valid(s, S.FATAL_ERROR) for s in TxnState)
    assert not any(
        is_transition_valid(S.FATAL_ERROR, t) for t in TxnState if t is not S.FATAL_ERROR
    )


def test_begin_needs_init_and_only_one_open_transaction() -> None:
    tm = _tm(S.UNINITIALIZED)
    with pytest.raises(IllegalStateError, match="init_transactions"):
        tm.begin_transaction()
    tm.state = S.READY
    tm.begin_transaction()
    assert tm.state is S.IN_TRANSACTION
    with pytest.raises(IllegalStateError, match="already open"):
        tm.begin_transaction()


def test_send_outside_a_transaction_is_refused() -> None:
    tm = _tm(S.READY)
    with pytest.raises(IllegalStateError, match="begin_transaction"):
        tm.maybe_add_partition(("t", 0))
    for call in (tm.begin_commit, tm.begin_abort, tm.check_send_offsets):
        with pytest.raises(IllegalStateError):
            call()


def test_new_partitions_wait_for_add_partitions() -> None:
    tm = _tm(S.IN_TRANSACTION)
    tm.maybe_add_partition(("t", 0))
    tm.maybe_add_partition(("t", 0))
    assert tm.pending_partitions == {("t", 0)} and not tm.sendable_partitions()
    assert tm.wants_add_partitions()
    tm.adding = True
    assert not tm.wants_add_partitions()  # one AddPartitionsToTxn at a time


def test_batch_failure_makes_the_transaction_abortable() -> None:
    tm = _tm(S.IN_TRANSACTION)
    cause = KafkaError(ErrorCode.MESSAGE_TOO_LARGE, "Produce")
    tm.on_batch_failed(cause, sequenced=True)
    assert tm.state is S.ABORTABLE_ERROR and tm.epoch_bump_needed
    with pytest.raises(TransactionAbortableError) as ei:
        tm.begin_commit()
    assert ei.value.cause is cause
    with pytest.raises(TransactionAbortableError):
        tm.maybe_add_partition(("t", 1))
    err = tm.undrained_batch_error()
    assert isinstance(err, TransactionAbortedError) and err.__cause__ is cause
    tm.begin_abort()
    assert tm.state is S.ABORTING_TRANSACTION


def test_failure_while_committing_is_abortable_and_own_aborts_are_ignored() -> None:
    tm = _tm(S.IN_TRANSACTION)
    tm.begin_commit()
    tm.on_batch_failed(TransactionAbortedError("dropped"), sequenced=False)
    assert tm.state is S.COMMITTING_TRANSACTION
    tm.on_batch_failed(KafkaTimeoutError("delivery.timeout.ms"), sequenced=False)
    assert tm.state is S.ABORTABLE_ERROR and not tm.epoch_bump_needed


def test_failures_while_aborting_change_nothing() -> None:
    tm = _tm(S.IN_TRANSACTION)
    tm.begin_abort()
    tm.on_batch_failed(KafkaError(ErrorCode.NOT_ENOUGH_REPLICAS), sequenced=True)
    assert tm.state is S.ABORTING_TRANSACTION


@pytest.mark.parametrize(
    "code, exc",
    [
        (ErrorCode.PRODUCER_FENCED, ProducerFencedError),
        (ErrorCode.INVALID_PRODUCER_EPOCH, ProducerFencedError),
        (ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, TransactionalIdAuthorizationError),
    ],
)
def test_fatal_errors_are_raised_by_every_later_call(code: int, exc: type[Exception]) -> None:
    tm = _tm(S.IN_TRANSACTION)
    tm.on_batch_failed(KafkaError(code, "Produce"), sequenced=True)
    assert tm.is_fatal
    calls = (
        tm.begin_transaction,
        tm.begin_commit,
        tm.begin_abort,
        tm.check_send_offsets,
        lambda: tm.maybe_add_partition(("t", 0)),
    )
    for call in calls:
        with pytest.raises(exc):
            call()
    assert tm.undrained_batch_error() is tm.last_error


def test_fatal_error_classes() -> None:
    assert isinstance(fatal_error(ErrorCode.PRODUCER_FENCED, "x"), ProducerFencedError)
    other = fatal_error(ErrorCode.INVALID_TXN_STATE, "x")
    assert type(other) is FatalProducerError and other.code == ErrorCode.INVALID_TXN_STATE
    assert isinstance(other, KafkaError)  # `except KafkaError` still catches it
