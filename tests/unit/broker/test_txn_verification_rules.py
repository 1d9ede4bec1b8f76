"""The leader's pure KIP-890 decisions: which batch asks the coordinator, and how the coordinator's answer
reaches the producer (Kafka's mapping: fenced -> INVALID_PRODUCER_EPOCH, 'not yet' -> NOT_ENOUGH_REPLICAS)."""

from __future__ import annotations

import asyncio

from kafkalite.broker.coordinators.txn_verification import (
    AddPartitionsToTxnManager,
    needs_round_trip,
    produce_error,
    response_codes,
    transactional_producer,
)
from kafkalite.coordinator import TopicPartition
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.txn import AddPartitionsToTxnResponse
from kafkalite.records.builder import build_batch
from kafkalite.storage.producer_state import SENTINEL_GUARD, VerificationGuard

E = ErrorCode


def test_only_a_transactional_data_batch_names_its_producer() -> None:
    txn = build_batch([(None, b"v")], producer_id=5, producer_epoch=3, base_sequence=0,
                      is_transactional=True)  # fmt: skip
    idem = build_batch([(None, b"v")], producer_id=5, producer_epoch=3, base_sequence=0)
    plain = build_batch([(None, b"v")])
    assert transactional_producer(txn) == (5, 3)
    assert transactional_producer(memoryview(txn)) == (5, 3)
    assert transactional_producer(idem) is None
    assert transactional_producer(plain) is None
    assert transactional_producer(b"") is None and transactional_producer(None) is None


def test_only_an_unverified_guard_asks() -> None:
    g = VerificationGuard()
    assert not needs_round_trip(SENTINEL_GUARD, SENTINEL_GUARD)
    assert needs_round_trip(g, SENTINEL_GUARD)
    g.verified = True
    assert not needs_round_trip(g, SENTINEL_GUARD)


def test_coordinator_answers_become_kafkas_produce_errors() -> None:
    assert produce_error(E.NO_ERROR, 9) is None
    assert produce_error(E.TRANSACTION_ABORTABLE, 10)[0] == E.INVALID_TXN_STATE  # type: ignore[index]
    assert produce_error(E.TRANSACTION_ABORTABLE, 11)[0] == E.TRANSACTION_ABORTABLE  # type: ignore[index]
    assert produce_error(E.INVALID_TXN_STATE, 11)[0] == E.INVALID_TXN_STATE  # type: ignore[index]
    assert produce_error(E.PRODUCER_FENCED, 9)[0] == E.INVALID_PRODUCER_EPOCH  # type: ignore[index]
    for code in (E.CONCURRENT_TRANSACTIONS, E.COORDINATOR_LOAD_IN_PROGRESS,
                 E.COORDINATOR_NOT_AVAILABLE, E.NOT_COORDINATOR):  # fmt: skip
        err, msg = produce_error(code, 9)  # type: ignore[misc]
        assert err == E.NOT_ENOUGH_REPLICAS and code.name in msg
    assert produce_error(E.NETWORK_EXCEPTION, 9)[0] == E.NETWORK_EXCEPTION  # type: ignore[index]


def test_a_top_level_authorization_failure_is_not_the_clients_to_see() -> None:
    tps = [TopicPartition("t", 0)]
    denied = AddPartitionsToTxnResponse(error_code=E.CLUSTER_AUTHORIZATION_FAILED)
    assert response_codes(denied, tps) == {tps[0]: E.INVALID_TXN_STATE}
    missing = AddPartitionsToTxnResponse(error_code=0, results_by_transaction=[])
    assert response_codes(missing, tps) == {tps[0]: E.UNKNOWN_SERVER_ERROR}


class _Counting(AddPartitionsToTxnManager):
    """A verifier whose coordinator answers NO_ERROR after `release` is set."""

    def __init__(self) -> None:
        super().__init__(None, lambda: None)  # type: ignore[arg-type]
        self.asked = 0
        self.release = asyncio.Event()

    async def _ask(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        tps: list[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        self.asked += 1
        await self.release.wait()
        return dict.fromkeys(tps, E.NO_ERROR)


def test_concurrent_batches_share_one_question_and_a_cancelled_one_frees_the_guard() -> None:
    async def scenario() -> None:
        tp = TopicPartition("t", 0)
        v = _Counting()
        g = VerificationGuard()
        first = asyncio.ensure_future(v.verify("tx", 1, 0, {tp: g}))
        second = asyncio.ensure_future(v.verify("tx", 1, 0, {tp: g}))
        await asyncio.sleep(0)
        first.cancel()  # the asking request's connection went away
        assert await second == {tp: E.NETWORK_EXCEPTION} and v.asked == 1
        v.release.set()
        assert await v.verify("tx", 1, 0, {tp: g}) == {tp: E.NO_ERROR}
        assert v.asked == 2 and g.verified

    asyncio.run(scenario())
