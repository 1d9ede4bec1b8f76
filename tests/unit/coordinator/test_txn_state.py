"""The transaction state table matches Kafka's, prepare methods are pure, and complete_transition checks
what Kafka's completeTransitionTo checks."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalite.coordinator.txn_state import (
    VALID_PREVIOUS_STATES,
    IllegalTxnTransition,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
    is_epoch_exhausted,
    transition,
)
from kafkalite.coordinator.types import TopicPartition
from kafkalite.protocol.errors import ErrorCode

S = TransactionState
TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)


def test_status_ids_and_names_are_kafkas() -> None:
    expected = {
        "Empty": 0,
        "Ongoing": 1,
        "PrepareCommit": 2,
        "PrepareAbort": 3,
        "CompleteCommit": 4,
        "CompleteAbort": 5,
        "Dead": 6,
        "PrepareEpochFence": 7,
    }
    assert {s.value: s.id for s in S} == expected
    for name, status in expected.items():
        assert S.from_id(status) is S.from_name(name)
    assert S.from_id(8) is None
    assert S.from_name("ongoing") is None  # Kafka's fromName is case-sensitive


def test_table_is_kafkas() -> None:
    kafka = {
        S.EMPTY: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
        S.ONGOING: {S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
        S.PREPARE_COMMIT: {S.ONGOING},
        S.PREPARE_ABORT: {S.ONGOING, S.PREPARE_EPOCH_FENCE},
        S.COMPLETE_COMMIT: {S.PREPARE_COMMIT},
        S.COMPLETE_ABORT: {S.PREPARE_ABORT},
        S.DEAD: {S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT},
        S.PREPARE_EPOCH_FENCE: {S.ONGOING},
    }
    assert kafka == VALID_PREVIOUS_STATES
    assert {s for s in S if s.is_expiration_allowed} == {
        S.EMPTY,
        S.COMPLETE_COMMIT,
        S.COMPLETE_ABORT,
    }


@given(st.sampled_from(list(S)), st.sampled_from(list(S)))
def test_transition_follows_the_table(current: S, target: S) -> None:
    if current in VALID_PREVIOUS_STATES[target]:
        assert transition("t", current, target) is target
    else:
        with pytest.raises(IllegalTxnTransition):
            transition("t", current, target)


def test_epoch_exhaustion_stops_one_short_of_short_max() -> None:
    assert not is_epoch_exhausted(32765)
    assert is_epoch_exhausted(32766)
    assert is_epoch_exhausted(32767)


def _ongoing(epoch: int = 3) -> TransactionMetadata:
    return TransactionMetadata(
        "tx",
        100,
        producer_epoch=epoch,
        state=S.ONGOING,
        topic_partitions={TP0},
        txn_start_timestamp=10,
        txn_last_update_timestamp=10,
    )


def _apply(m: TransactionMetadata, transit: TxnTransitMetadata) -> None:
    m.pending_state = transit.txn_state
    m.complete_transition(transit)


def test_prepare_methods_do_not_mutate() -> None:
    m = _ongoing()
    before = (m.snapshot(), m.pending_state)
    m.prepare_add_partitions({TP1}, 20)
    m.prepare_abort_or_commit(S.PREPARE_COMMIT, 20)
    m.prepare_epoch_fence_abort(20)
    m.prepare_fence_producer_epoch()
    assert (m.snapshot(), m.pending_state) == before


def test_full_transaction_through_complete_transition() -> None:
    m = TransactionMetadata("tx", 100, txn_timeout_ms=1000, txn_last_update_timestamp=0)
    init = m.prepare_increment_producer_epoch(1000, None, 1)
    assert isinstance(init, TxnTransitMetadata)
    _apply(m, init)
    assert (m.state, m.producer_epoch, m.last_producer_epoch) == (S.EMPTY, 0, -1)
    _apply(m, m.prepare_add_partitions({TP0}, 5))
    _apply(m, m.prepare_add_partitions({TP1}, 6))
    assert m.state is S.ONGOING and m.topic_partitions == {TP0, TP1}
    assert m.txn_start_timestamp == 5  # the first partition starts the transaction
    _apply(m, m.prepare_abort_or_commit(S.PREPARE_COMMIT, 7))
    _apply(m, m.prepare_complete(8))
    assert m.state is S.COMPLETE_COMMIT and not m.topic_partitions
    assert m.txn_last_update_timestamp == 8 and m.pending_state is None


def test_epoch_fence_abort_bumps_the_epoch_and_clears_the_last_one() -> None:
    m = _ongoing(epoch=3)
    m.last_producer_epoch = 2
    transit = m.prepare_epoch_fence_abort(50)
    assert transit.txn_state is S.PREPARE_ABORT
    assert (transit.producer_epoch, transit.last_producer_epoch) == (4, -1)
    assert m.prepare_fence_producer_epoch().txn_state is S.PREPARE_EPOCH_FENCE
    _apply(m, transit)
    assert (m.state, m.producer_epoch) == (S.PREPARE_ABORT, 4)


def test_kip360_epoch_bump_rules() -> None:
    m = TransactionMetadata(
        "tx", 100, producer_epoch=5, last_producer_epoch=4, state=S.COMPLETE_COMMIT
    )
    bump = m.prepare_increment_producer_epoch(1000, 5, 0)
    assert isinstance(bump, TxnTransitMetadata)
    assert (bump.producer_epoch, bump.last_producer_epoch) == (6, 5)
    retry = m.prepare_increment_producer_epoch(1000, 4, 0)  # a retry of the last bump
    assert isinstance(retry, TxnTransitMetadata) and retry.producer_epoch == 5
    assert m.prepare_increment_producer_epoch(1000, 2, 0) is ErrorCode.PRODUCER_FENCED


def test_producer_id_rotation_starts_at_epoch_zero() -> None:
    m = TransactionMetadata("tx", 100, producer_epoch=32766, state=S.COMPLETE_ABORT)
    with pytest.raises(IllegalTxnTransition):
        m.prepare_increment_producer_epoch(1000, None, 0)
    transit = m.prepare_producer_id_rotation(200, 1000, 0, record_last_epoch=True)
    assert (transit.producer_id, transit.producer_epoch, transit.last_producer_epoch) == (
        200,
        0,
        32766,
    )
    _apply(m, transit)
    assert (m.producer_id, m.previous_producer_id, m.producer_epoch) == (200, 100, 0)


def test_invalid_prepares_raise() -> None:
    empty = TransactionMetadata("tx", 100, producer_epoch=0)
    with pytest.raises(IllegalTxnTransition):
        empty.prepare_abort_or_commit(S.PREPARE_COMMIT, 0)
    with pytest.raises(IllegalTxnTransition):
        empty.prepare_complete(0)
    with pytest.raises(IllegalTxnTransition):
        _ongoing().prepare_dead()


def test_complete_transition_requires_the_pending_state() -> None:
    m = _ongoing()
    transit = m.prepare_abort_or_commit(S.PREPARE_COMMIT, 5)
    with pytest.raises(IllegalTxnTransition):
        m.complete_transition(transit)  # nothing pending
    m.pending_state = S.PREPARE_ABORT
    with pytest.raises(IllegalTxnTransition):
        m.complete_transition(transit)  # a different transition is pending


def test_complete_transition_rejects_shrinking_partitions() -> None:
    m = _ongoing()
    m.topic_partitions = {TP0, TP1}
    bad = TxnTransitMetadata(100, 100, -1, 3, -1, 60_000, S.ONGOING, frozenset({TP0}), 10, 11)
    m.pending_state = S.ONGOING
    with pytest.raises(IllegalTxnTransition):
        m.complete_transition(bad)


def test_from_transit_of_empty_ignores_partitions() -> None:
    t = TxnTransitMetadata(7, -1, -1, 1, -1, 100, S.EMPTY, frozenset({TP0}), -1, 5)
    m = TransactionMetadata.from_transit("tx", t)
    assert m.state is S.EMPTY and not m.topic_partitions and m.pending_state is None
