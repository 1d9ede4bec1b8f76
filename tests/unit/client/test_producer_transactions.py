"""The transactional producer against a scripted coordinator: commit and abort, AddPartitionsToTxn
before batches, retries (CONCURRENT_TRANSACTIONS, NOT_COORDINATOR), fencing, abortable failures,
offsets in a transaction, a timed-out commit called again, and the epoch bump after a failed batch."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fake_broker import FakeBroker

from kafkalite.client import (
    ConsumerGroupMetadata,
    KafkaError,
    KafkaProducer,
    OffsetAndMetadata,
    ProducerFencedError,
    TopicPartition,
    TransactionAbortableError,
    TransactionAbortedError,
)
from kafkalite.client.errors import CommitFailedError, IllegalStateError, KafkaTimeoutError
from kafkalite.protocol.errors import ErrorCode

FIND_COORDINATOR, PRODUCE, INIT, ADD_PARTITIONS, ADD_OFFSETS, END_TXN, TXN_COMMIT = (
    10,
    0,
    22,
    24,
    25,
    26,
    28,
)


@pytest.fixture
def fake() -> Iterator[FakeBroker]:
    b = FakeBroker(transactions=True)
    yield b
    b.close()


def _producer(fake: FakeBroker, tid: str = "tx-1", **kw: object) -> KafkaProducer:
    kw.setdefault("linger_ms", 0)
    kw.setdefault("retry_backoff_ms", 10)
    return KafkaProducer(bootstrap_servers=fake.bootstrap_servers, transactional_id=tid, **kw)


def test_commit_adds_partitions_before_their_batches(fake: FakeBroker) -> None:
    with _producer(fake) as p:
        p.init_transactions(10)
        p.begin_transaction()
        futs = [p.send("t", b"v%d" % i, partition=i % 2) for i in range(6)]
        p.commit_transaction(10)
        assert all(f.get(1).offset >= 0 for f in futs)
    assert fake.violations == []
    assert fake.end_txns == [True]
    assert sorted(v for entries in fake.txn_log.values() for v, done in entries if done) == [
        b"v%d" % i for i in range(6)
    ]
    reqs = fake.requests
    assert reqs.index(ADD_PARTITIONS) < reqs.index(PRODUCE) < reqs.index(END_TXN)
    for _, b in fake.batches:
        assert b.is_transactional and b.producer_id == 5000 and b.producer_epoch == 0


def test_abort_discards_the_transaction_and_the_next_one_commits(fake: FakeBroker) -> None:
    with _producer(fake) as p:
        p.init_transactions(10)
        p.begin_transaction()
        p.send("t", b"gone", partition=0)
        p.flush(10)
        p.abort_transaction(10)
        p.begin_transaction()
        p.send("t", b"kept", partition=0)
        p.commit_transaction(10)
    assert fake.end_txns == [False, True]
    assert fake.txn_log[0] == [(b"kept", True)]
    assert fake.violations == []


def test_abort_fails_records_not_yet_sent(fake: FakeBroker) -> None:
    with _producer(fake, linger_ms=60000) as p:
        p.init_transactions(10)
        p.begin_transaction()
        fut = p.send("t", b"never", partition=1)
        p.abort_transaction(10)
        with pytest.raises(TransactionAbortedError):
            fut.get(5)
    assert PRODUCE not in fake.requests


def test_empty_transaction_needs_no_end_txn(fake: FakeBroker) -> None:
    with _producer(fake) as p:
        p.init_transactions(10)
        p.begin_transaction()
        p.commit_transaction(10)
    assert END_TXN not in fake.requests


def test_calls_out_of_order_are_refused(fake: FakeBroker) -> None:
    with _producer(fake) as p:
        with pytest.raises(IllegalStateError):
            p.begin_transaction()
        with pytest.raises(IllegalStateError):
            p.send("t", b"v", partition=0)
        p.init_transactions(10)
        with pytest.raises(IllegalStateError):
            p.init_transactions(10)
        with pytest.raises(IllegalStateError):
            p.send("t", b"v", partition=0)
        with pytest.raises(IllegalStateError):
            p.commit_transaction(10)
        p.begin_transaction()
        p.send("t", b"v", partition=0)
        p.commit_transaction(10)
        with pytest.raises(IllegalStateError):  # the fast path checks the state too
            p.send("t", b"v", partition=0)


def test_coordinator_errors_are_retried(fake: FakeBroker) -> None:
    fake.api_errors = {
        INIT: [ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS],
        ADD_PARTITIONS: [ErrorCode.NOT_COORDINATOR, ErrorCode.CONCURRENT_TRANSACTIONS],
        END_TXN: [ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.CONCURRENT_TRANSACTIONS],
    }
    with _producer(fake) as p:
        p.init_transactions(10)
        p.begin_transaction()
        p.send("t", b"v", partition=0).get(10)
        p.commit_transaction(10)
    assert fake.requests.count(INIT) == 3
    assert fake.requests.count(ADD_PARTITIONS) == 3
    assert fake.requests.count(END_TXN) == 3
    assert (
        fake.requests.count(FIND_COORDINATOR) == 3
    )  # first lookup, then once per moved coordinator
    assert fake.end_txns == [True]


def test_find_coordinator_before_v4(fake: FakeBroker) -> None:
    old = FakeBroker(transactions=True, find_coordinator_version=3)
    try:
        with _producer(old) as p:
            p.init_transactions(10)
            p.begin_transaction()
            p.send("t", b"v", partition=0)
            p.commit_transaction(10)
        assert old.end_txns == [True]
    finally:
        old.close()


def test_second_producer_fences_the_first(fake: FakeBroker) -> None:
    with _producer(fake) as old, _producer(fake) as new:
        old.init_transactions(10)
        old.begin_transaction()
        fut = old.send("t", b"old", partition=0)
        fut.get(10)
        new.init_transactions(10)  # new epoch: the old producer's open transaction is aborted
        with pytest.raises(ProducerFencedError):
            old.commit_transaction(10)
        for call in (old.begin_transaction, old.abort_transaction):
            with pytest.raises(ProducerFencedError):
                call()
        with pytest.raises(ProducerFencedError):
            old.send("t", b"late", partition=0)
        new.begin_transaction()
        new.send("t", b"new", partition=0)
        new.commit_transaction(10)
    assert fake.txn_log[0] == [(b"new", True)]


def test_fenced_produce_is_fatal(fake: FakeBroker) -> None:
    with _producer(fake) as old:
        old.init_transactions(10)
        old.begin_transaction()
        old.send("t", b"a", partition=0).get(10)
        fake.txn_ids["tx-1"] = (5000, 1)  # a newer epoch, the partition still in the transaction
        fake.txn_partitions.add(("t", 0))
        with pytest.raises(ProducerFencedError):
            old.send("t", b"b", partition=0).get(10)
        with pytest.raises(ProducerFencedError):
            old.begin_transaction()


def test_failed_add_partitions_makes_the_transaction_abortable(fake: FakeBroker) -> None:
    fake.api_errors = {ADD_PARTITIONS: [ErrorCode.TOPIC_AUTHORIZATION_FAILED]}
    with _producer(fake) as p:
        p.init_transactions(10)
        p.begin_transaction()
        fut = p.send("t", b"v", partition=0)
        with pytest.raises(TransactionAbortedError):
            fut.get(10)
        with pytest.raises(TransactionAbortableError) as ei:
            p.commit_transaction(10)
        assert ei.value.cause.code == ErrorCode.TOPIC_AUTHORIZATION_FAILED  # type: ignore[union-attr]
        with pytest.raises(TransactionAbortableError):
            p.send("t", b"w", partition=0)
        p.abort_transaction(10)
        p.begin_transaction()
        p.send("t", b"next", partition=0)
        p.commit_transaction(10)
    assert fake.txn_log[0] == [(b"next", True)]
    assert fake.violations == []


def test_failed_batch_aborts_then_a_new_epoch_restarts_sequences(fake: FakeBroker) -> None:
    with _producer(fake) as p:
        p.init_transactions(10)
        p.begin_transaction()
        p.send("t", b"ok", partition=0).get(10)
        fake.produce_errors = [ErrorCode.MESSAGE_TOO_LARGE]
        with pytest.raises(KafkaError):
            p.send("t", b"bad", partition=0).get(10)
        with pytest.raises(TransactionAbortableError):
            p.commit_transaction(10)
        p.abort_transaction(10)
        assert fake.txn_ids["tx-1"] == (5000, 1)  # bumped: the failed batch's sequence is void
        p.begin_transaction()
        p.send("t", b"after", partition=0).get(10)
        p.commit_transaction(10)
    assert fake.txn_log[0] == [(b"after", True)]


def test_offsets_commit_only_with_the_transaction(fake: FakeBroker) -> None:
    group = ConsumerGroupMetadata("g", 7, "member-1", None)
    tp = TopicPartition("in", 0)
    with _producer(fake) as p:
        p.init_transactions(10)
        p.begin_transaction()
        p.send("t", b"v", partition=0)
        p.send_offsets_to_transaction({tp: OffsetAndMetadata(42, "m")}, group, 10)
        p.abort_transaction(10)
        assert fake.committed_offsets == {}
        p.begin_transaction()
        p.send_offsets_to_transaction({("in", 0): 43}, group, 10)
        p.commit_transaction(10)
    assert fake.committed_offsets == {("g", "in", 0): 43}
    req = fake.txn_offset_commits[-1]
    assert (req.generation_id, req.member_id, req.group_instance_id) == (7, "member-1", None)
    assert fake.requests.index(ADD_OFFSETS) < fake.requests.index(TXN_COMMIT)
    assert fake.violations == [] and fake.end_txns == [False, True]


def test_offsets_from_a_stale_member_abort_the_transaction(fake: FakeBroker) -> None:
    fake.api_errors = {
        TXN_COMMIT: [ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.ILLEGAL_GENERATION]
    }
    with _producer(fake) as p:
        p.init_transactions(10)
        p.begin_transaction()
        with pytest.raises(CommitFailedError):
            p.send_offsets_to_transaction({("in", 0): 5}, ConsumerGroupMetadata("g", 1, "m"), 10)
        with pytest.raises(TransactionAbortableError):
            p.commit_transaction(10)
        p.abort_transaction(10)
    assert fake.committed_offsets == {} and fake.end_txns == [False]


def test_timed_out_commit_is_called_again(fake: FakeBroker) -> None:
    with _producer(fake) as p:
        p.init_transactions(10)
        p.begin_transaction()
        p.send("t", b"slow", partition=0)
        fake.produce_delay = 0.5
        with pytest.raises(KafkaTimeoutError):
            p.commit_transaction(0.05)
        with pytest.raises(IllegalStateError, match="commit_transaction"):
            p.abort_transaction(1)
        p.commit_transaction(10)
    assert fake.end_txns == [True]


def test_transactional_id_implies_idempotence(fake: FakeBroker) -> None:
    with pytest.raises(ValueError, match="idempotence"):
        _producer(fake, enable_idempotence=False)
    with pytest.raises(ValueError, match="acks"):
        _producer(fake, acks=1)
    with _producer(fake) as p:
        assert p.config["enable.idempotence"] is True
    with (
        KafkaProducer(bootstrap_servers=fake.bootstrap_servers) as plain,
        pytest.raises(IllegalStateError, match=r"transactional\.id"),
    ):
        plain.begin_transaction()
