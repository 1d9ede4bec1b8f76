"""KIP-890 part 1 on the wire: a transactional batch for a partition its transaction never added is refused
(INVALID_TXN_STATE, TRANSACTION_ABORTABLE from Produce v11) and nothing is appended; an added one is appended
after one verification per transaction and partition; AddPartitionsToTxn v4/v5 VerifyOnly; the feature."""

from __future__ import annotations

import uuid
from pathlib import Path

from test_produce_fetch import fetch, produce
from test_txn_apis import ADD_PARTITIONS, add, end, init, txn_batch

from kafkalite.cli.wire import WireClient
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.schema import APIS
from kafkalite.records.batch import iter_batches
from kafkalite.testing import Broker

E = ErrorCode
_Txn = ADD_PARTITIONS.AddPartitionsToTxnTransaction


def _records(client: WireClient, topic: str) -> list[bytes | None]:
    _resp, part = fetch(client, topic, 0)
    return [r.value for b in iter_batches(part.records or b"") for r in b.records]


def test_a_partition_never_added_is_refused_and_nothing_is_appended(
    client: WireClient, topic: str
) -> None:
    client.metadata([topic], auto_create=True)
    txn = f"tx-{uuid.uuid4().hex[:8]}"
    pid, epoch = init(client, txn)
    # Produce v3-10 know INVALID_TXN_STATE; v11 knows TRANSACTION_ABORTABLE (as Kafka maps it)
    old = produce(client, topic, txn_batch(pid, epoch, 0, b"a"), acks=-1, txn_id=txn, version=9)
    assert old.error_code == E.INVALID_TXN_STATE
    new = produce(client, topic, txn_batch(pid, epoch, 0, b"a"), acks=-1, txn_id=txn, version=11)
    assert new.error_code == E.TRANSACTION_ABORTABLE
    # no transactional id in the request: nothing can vouch for the batch
    anon = produce(client, topic, txn_batch(pid, epoch, 0, b"a"), acks=-1)
    assert anon.error_code == E.INVALID_TXN_STATE
    assert _records(client, topic) == []


def test_an_added_partition_is_verified_once_per_transaction(
    broker: Broker, client: WireClient, topic: str
) -> None:
    client.metadata([topic], auto_create=True)
    txn = f"tx-{uuid.uuid4().hex[:8]}"
    pid, epoch = init(client, txn)
    verifier = broker.server.transactions.verifier
    for round_ in range(2):  # two transactions: each verifies its first batch, once
        seq0 = round_ * 3
        assert add(client, txn, pid, epoch, topic, 0) == {(topic, 0): 0}
        before = verifier.local_checks
        for i in range(3):
            batch = txn_batch(pid, epoch, seq0 + i, f"v{round_}{i}".encode())
            assert produce(client, topic, batch, acks=-1, txn_id=txn).error_code == 0
        # the coordinator is this broker: asked in process (no wire hop), once for three batches
        assert verifier.local_checks == before + 1
        for _ in range(100):
            code = end(client, txn, pid, epoch, round_ == 0)
            if code != E.CONCURRENT_TRANSACTIONS:
                break
        assert code == 0
    # after the commit, a batch of the next (never added) transaction is refused again
    late = produce(client, topic, txn_batch(pid, epoch, 6, b"late"), acks=-1, txn_id=txn, version=9)
    assert late.error_code == E.INVALID_TXN_STATE


def test_verify_only_answers_without_adding(client: WireClient, topic: str) -> None:
    client.metadata([topic], auto_create=True)
    txn = f"tx-{uuid.uuid4().hex[:8]}"
    pid, epoch = init(client, txn)
    assert add(client, txn, pid, epoch, topic, 0) == {(topic, 0): 0}

    def verify(version: int, *parts: int, producer_epoch: int = epoch) -> dict[int, int]:
        t = _Txn.AddPartitionsToTxnTopic(name=topic, partitions=list(parts))
        req = ADD_PARTITIONS(
            transactions=[
                _Txn(
                    transactional_id=txn,
                    producer_id=pid,
                    producer_epoch=producer_epoch,
                    verify_only=True,
                    topics=[t],
                )
            ]
        )
        r = client.send(req, version=version)
        assert r.error_code == 0
        [result] = r.results_by_transaction
        return {
            p.partition_index: p.partition_error_code
            for tr in result.topic_results
            for p in tr.results_by_partition
        }

    assert verify(5, 0, 1) == {0: 0, 1: E.TRANSACTION_ABORTABLE}
    assert verify(4, 0, 1) == {0: 0, 1: E.INVALID_TXN_STATE}
    assert verify(5, 1) == {1: E.TRANSACTION_ABORTABLE}  # asking did not add it
    assert verify(5, 0, producer_epoch=epoch + 1) == {0: E.PRODUCER_FENCED}


def test_api_versions_advertise_transaction_version_1(client: WireClient) -> None:
    r = client.send(APIS[18].request(client_software_name="t", client_software_version="1"))
    supported = {f.name: (f.min_version, f.max_version) for f in r.supported_features}
    finalized = {f.name: (f.min_version_level, f.max_version_level) for f in r.finalized_features}
    assert supported["transaction.version"] == (0, 1)
    assert finalized["transaction.version"] == (1, 1)


def test_verification_off_appends_as_before(tmp_path: Path, topic: str) -> None:
    props = {"transaction.partition.verification.enable": "false"}
    with Broker(tmp_path, config=props) as b, WireClient(b.bootstrap_servers, timeout=10) as c:
        c.metadata([topic], auto_create=True)
        txn = f"tx-{uuid.uuid4().hex[:8]}"
        pid, epoch = init(c, txn)
        r = produce(c, topic, txn_batch(pid, epoch, 0, b"unchecked"), acks=-1, txn_id=txn)
        assert r.error_code == 0
