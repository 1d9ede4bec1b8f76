"""The transaction APIs on the wire with bad input: a wrong epoch or producer id, an unknown partition, a
commit for another group generation, an old request version — Kafka's error codes, and nothing changed."""

from __future__ import annotations

import uuid
from typing import Any

from test_produce_fetch import fetch, produce

from kafkalite.cli.wire import WireClient
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.schema import APIS
from kafkalite.records.batch import build_batch, iter_batches

INIT_PID = APIS[22].request
ADD_PARTITIONS = APIS[24].request
ADD_OFFSETS = APIS[25].request
END_TXN = APIS[26].request
WRITE_MARKERS = APIS[27].request
TXN_COMMIT = APIS[28].request
DESCRIBE_PRODUCERS = APIS[61].request
DESCRIBE_TXNS = APIS[65].request
LIST_TXNS = APIS[66].request
FIND_COORDINATOR = APIS[10].request
OFFSET_FETCH = APIS[9].request


def init(c: WireClient, txn_id: str, timeout_ms: int = 60000) -> tuple[int, int]:
    r = c.send(INIT_PID(transactional_id=txn_id, transaction_timeout_ms=timeout_ms))
    assert r.error_code == 0, ErrorCode.name_of(r.error_code)
    return r.producer_id, r.producer_epoch


def add(
    c: WireClient,
    txn_id: str,
    pid: int,
    epoch: int,
    topic: str,
    *parts: int,
    version: int | None = None,
) -> Any:
    t = ADD_PARTITIONS.AddPartitionsToTxnTopic(name=topic, partitions=list(parts))
    r = c.send(
        ADD_PARTITIONS(
            v3_and_below_transactional_id=txn_id,
            v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=[t],
        ),
        version=3 if version is None else version,  # v4+ is the brokers' form (KIP-890)
    )
    return {
        (t.name, p.partition_index): p.partition_error_code
        for t in r.results_by_topic_v3_and_below
        for p in t.results_by_partition
    }


def end(
    c: WireClient, txn_id: str, pid: int, epoch: int, commit: bool, version: int | None = None
) -> int:
    r = c.send(
        END_TXN(transactional_id=txn_id, producer_id=pid, producer_epoch=epoch, committed=commit),
        version=version,
    )
    return int(r.error_code)


def describe(c: WireClient, txn_id: str) -> Any:
    return c.send(DESCRIBE_TXNS(transactional_ids=[txn_id])).transaction_states[0]


def txn_batch(pid: int, epoch: int, seq: int, *values: bytes) -> bytes:
    return build_batch(
        [(None, v) for v in values],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=True,
    )


def test_find_coordinator_names_this_broker_for_a_transactional_id(client: WireClient) -> None:
    r = client.send(FIND_COORDINATOR(key="some-txn", key_type=1), version=3)
    assert r.error_code == 0 and r.node_id >= 0


def test_end_txn_with_a_wrong_epoch_or_producer_id_changes_nothing(
    client: WireClient, topic: str
) -> None:
    client.metadata([topic], auto_create=True)
    txn = f"tx-{uuid.uuid4().hex[:8]}"
    pid, epoch = init(client, txn)
    assert add(client, txn, pid, epoch, topic, 0) == {(topic, 0): 0}
    assert end(client, txn, pid, epoch + 1, True) == ErrorCode.PRODUCER_FENCED
    assert end(client, txn, pid, epoch - 1 if epoch else 5, True, version=1) == (
        ErrorCode.INVALID_PRODUCER_EPOCH  # v0-1 clients know no PRODUCER_FENCED
    )
    assert end(client, txn, pid + 1, epoch, True) == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert (
        end(client, "never-initialised", pid, epoch, True) == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    )
    assert describe(client, txn).transaction_state == "Ongoing"
    assert end(client, txn, pid, epoch, False) == 0


def test_add_partitions_for_an_unknown_topic_adds_none(client: WireClient, topic: str) -> None:
    client.metadata([topic], auto_create=True)
    txn = f"tx-{uuid.uuid4().hex[:8]}"
    pid, epoch = init(client, txn)
    codes = add(client, txn, pid, epoch, topic, 0, 7)  # partition 7 does not exist
    assert codes == {
        (topic, 0): ErrorCode.OPERATION_NOT_ATTEMPTED,
        (topic, 7): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert describe(client, txn).transaction_state == "Empty"
    # ending a transaction that never began is an invalid state transition
    assert end(client, txn, pid, epoch, True) == ErrorCode.INVALID_TXN_STATE


def test_txn_offset_commit_for_another_generation_is_refused(
    client: WireClient, topic: str
) -> None:
    client.metadata([topic], auto_create=True)
    txn = f"tx-{uuid.uuid4().hex[:8]}"
    group = f"g-{uuid.uuid4().hex[:8]}"
    pid, epoch = init(client, txn)
    r = client.send(
        ADD_OFFSETS(transactional_id=txn, producer_id=pid, producer_epoch=epoch, group_id=group)
    )
    assert r.error_code == 0
    part = TXN_COMMIT.TxnOffsetCommitRequestTopic.TxnOffsetCommitRequestPartition(
        partition_index=0, committed_offset=5, committed_leader_epoch=-1, committed_metadata=""
    )
    r = client.send(
        TXN_COMMIT(
            transactional_id=txn,
            group_id=group,
            producer_id=pid,
            producer_epoch=epoch,
            generation_id=3,  # the group has no generation 3 (it does not exist yet)
            member_id="ghost",
            group_instance_id=None,
            topics=[TXN_COMMIT.TxnOffsetCommitRequestTopic(name=topic, partitions=[part])],
        )
    )
    assert r.topics[0].partitions[0].error_code == ErrorCode.ILLEGAL_GENERATION
    assert end(client, txn, pid, epoch, True) == 0
    t = OFFSET_FETCH.OffsetFetchRequestTopic(name=topic, partition_indexes=[0])
    fetched = client.send(OFFSET_FETCH(group_id=group, topics=[t], require_stable=True), version=7)
    assert fetched.topics[0].partitions[0].committed_offset == -1


def test_a_fenced_producer_cannot_write_and_its_open_transaction_is_aborted(
    client: WireClient, topic: str
) -> None:
    client.metadata([topic], auto_create=True)
    txn = f"tx-{uuid.uuid4().hex[:8]}"
    pid, epoch = init(client, txn)
    assert add(client, txn, pid, epoch, topic, 0) == {(topic, 0): 0}
    assert (
        produce(client, topic, txn_batch(pid, epoch, 0, b"zombie"), acks=-1, txn_id=txn).error_code
        == 0
    )
    # a second instance: the coordinator aborts the open transaction, then bumps the epoch
    for _ in range(50):
        r = client.send(INIT_PID(transactional_id=txn, transaction_timeout_ms=60000))
        if r.error_code != ErrorCode.CONCURRENT_TRANSACTIONS:
            break
    assert r.error_code == 0 and r.producer_id == pid and r.producer_epoch > epoch
    late = produce(client, topic, txn_batch(pid, epoch, 1, b"zombie-2"), acks=-1, txn_id=txn)
    assert late.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert add(client, txn, pid, epoch, topic, 0) == {(topic, 0): ErrorCode.PRODUCER_FENCED}
    # the log holds the zombie's record and an ABORT marker, nothing else
    _resp, part = fetch(client, topic, 0)
    batches = list(iter_batches(part.records or b""))
    assert [b.is_control for b in batches] == [False, True]
    producers = client.send(
        DESCRIBE_PRODUCERS(
            topics=[DESCRIBE_PRODUCERS.TopicRequest(name=topic, partition_indexes=[0])]
        )
    )
    state = producers.topics[0].partitions[0].active_producers[0]
    assert (state.producer_id, state.current_txn_start_offset) == (pid, -1)


def test_a_marker_from_an_older_coordinator_epoch_is_refused(
    client: WireClient, topic: str
) -> None:
    client.metadata([topic], auto_create=True)
    txn = f"tx-{uuid.uuid4().hex[:8]}"
    pid, epoch = init(client, txn)
    add(client, txn, pid, epoch, topic, 0)
    produce(client, topic, txn_batch(pid, epoch, 0, b"x"), acks=-1, txn_id=txn)

    def marker(coordinator_epoch: int) -> int:
        m = WRITE_MARKERS.WritableTxnMarker(
            producer_id=pid,
            producer_epoch=epoch,
            transaction_result=False,
            topics=[
                WRITE_MARKERS.WritableTxnMarker.WritableTxnMarkerTopic(
                    name=topic, partition_indexes=[0]
                )
            ],
            coordinator_epoch=coordinator_epoch,
        )
        r = client.send(WRITE_MARKERS(markers=[m]))
        return int(r.markers[0].topics[0].partitions[0].error_code)

    assert marker(100) == 0
    assert marker(99) == ErrorCode.TRANSACTION_COORDINATOR_FENCED


def test_list_transactions_filters_by_state(client: WireClient, topic: str) -> None:
    client.metadata([topic], auto_create=True)
    txn = f"tx-{uuid.uuid4().hex[:8]}"
    pid, epoch = init(client, txn)
    add(client, txn, pid, epoch, topic, 0)
    ongoing = client.send(LIST_TXNS(state_filters=["Ongoing"], producer_id_filters=[]))
    assert txn in [t.transactional_id for t in ongoing.transaction_states]
    bogus = client.send(LIST_TXNS(state_filters=["Sleeping"], producer_id_filters=[]))
    assert bogus.unknown_state_filters == ["Sleeping"]
    end(client, txn, pid, epoch, False)
