"""The admin client's transaction calls: DescribeTransactions and ListTransactions to the transaction
coordinators, DescribeProducers and an abort (WriteTxnMarkers) to partition leaders, with their result types.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kafkalite.client.errors import KafkaConnectionError, KafkaTimeoutError
from kafkalite.client.find_coordinator import TRANSACTION_KEY, find_coordinator
from kafkalite.client.network import NetworkClient
from kafkalite.client.structs import TopicPartition
from kafkalite.protocol.errors import KafkaError
from kafkalite.protocol.messages.txn import (
    DescribeProducersRequest,
    DescribeTransactionsRequest,
    ListTransactionsRequest,
    WriteTxnMarkersRequest,
)

WRITE_TXN_MARKERS, DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 27, 61, 65, 66


@dataclass
class TransactionDescription:
    transactional_id: str
    state: str  # the coordinator's name for it: Ongoing, PrepareCommit, CompleteAbort, ...
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_start_time_ms: int  # -1 when no transaction is open
    topic_partitions: list[TopicPartition] = field(default_factory=list)
    coordinator_id: int = -1


@dataclass
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str
    coordinator_id: int = -1  # the broker that listed it (its transaction coordinator)


@dataclass
class ProducerState:
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_transaction_start_offset: int  # -1 when the producer has no open transaction here


@dataclass
class AbortTransactionSpec:
    """A hanging transaction to abort on one partition, as DescribeProducers shows it."""

    topic_partition: TopicPartition
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int


async def _transaction_coordinator(client: NetworkClient, tid: str, deadline: float) -> int:
    while True:
        try:
            return await find_coordinator(client, tid, TRANSACTION_KEY)
        except (KafkaError, KafkaConnectionError) as exc:
            if isinstance(exc, KafkaError) and not exc.retriable:
                raise
            if time.monotonic() > deadline:
                raise KafkaTimeoutError(f"no transaction coordinator for {tid!r}") from exc
            await asyncio.sleep(0.1)


async def _send(client: NetworkClient, node: int, request: Any) -> Any:
    conn = await client.connection(node)
    return await conn.send(request, version=conn.version(request.API_KEY))


async def describe_transactions(
    client: NetworkClient, transactional_ids: Iterable[str], timeout: float
) -> dict[str, TransactionDescription]:
    """Each id's state from its coordinator; KafkaError for an unknown id (TRANSACTIONAL_ID_NOT_FOUND)."""
    deadline = time.monotonic() + timeout
    by_node: dict[int, list[str]] = {}
    for tid in dict.fromkeys(transactional_ids):
        by_node.setdefault(await _transaction_coordinator(client, tid, deadline), []).append(tid)
    req_cls = DescribeTransactionsRequest
    out: dict[str, TransactionDescription] = {}
    for node, ids in by_node.items():
        resp = await _send(client, node, req_cls(transactional_ids=ids))
        for s in resp.transaction_states:
            if s.error_code:
                raise KafkaError(s.error_code, f"DescribeTransactions({s.transactional_id!r})")
            out[s.transactional_id] = TransactionDescription(
                s.transactional_id,
                s.transaction_state,
                s.producer_id,
                s.producer_epoch,
                s.transaction_timeout_ms,
                s.transaction_start_time_ms,
                [TopicPartition(t.topic, p) for t in s.topics for p in t.partitions],
                node - (1 << 30),
            )
    return out


async def list_transactions(
    client: NetworkClient, states: Iterable[str] | None, producer_ids: Iterable[int] | None
) -> list[TransactionListing]:
    """Every broker's transactions (each coordinates a share of them), optionally filtered."""
    await client.refresh_metadata(None)
    req_cls = ListTransactionsRequest
    req = req_cls(state_filters=list(states or []), producer_id_filters=list(producer_ids or []))
    nodes = sorted(client.metadata.brokers)
    answers = await asyncio.gather(*(_send(client, n, req) for n in nodes))
    out: list[TransactionListing] = []
    for node, resp in zip(nodes, answers, strict=True):
        if resp.error_code:
            raise KafkaError(resp.error_code, "ListTransactions")
        out += [
            TransactionListing(s.transactional_id, s.producer_id, s.transaction_state, node)
            for s in resp.transaction_states
        ]
    return sorted(out, key=lambda t: t.transactional_id)


async def _leaders(
    client: NetworkClient, partitions: list[TopicPartition]
) -> dict[int, list[TopicPartition]]:
    md = client.metadata
    if any(md.leader_for(tp.topic, tp.partition) < 0 for tp in partitions):
        await client.refresh_metadata(None)
    by_node: dict[int, list[TopicPartition]] = {}
    for tp in partitions:
        leader = md.leader_for(tp.topic, tp.partition)
        if leader < 0:
            raise KafkaError(md.topic_error(tp.topic) or 3, f"no leader for {tp}")
        by_node.setdefault(leader, []).append(tp)
    return by_node


async def describe_producers(
    client: NetworkClient, partitions: Iterable[Any]
) -> dict[TopicPartition, list[ProducerState]]:
    """The active producers of each partition, from its leader (open transactions show a start offset)."""
    parts = [TopicPartition(*tp) for tp in partitions]
    req_cls = DescribeProducersRequest
    out: dict[TopicPartition, list[ProducerState]] = {}
    for node, tps in (await _leaders(client, parts)).items():
        by_topic: dict[str, list[int]] = {}
        for tp in tps:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        req = req_cls(
            topics=[
                req_cls.TopicRequest(name=t, partition_indexes=ps) for t, ps in by_topic.items()
            ]
        )
        resp = await _send(client, node, req)
        for t in resp.topics:
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition_index)
                if p.error_code:
                    raise KafkaError(p.error_code, f"DescribeProducers {tp}: {p.error_message}")
                out[tp] = [
                    ProducerState(
                        s.producer_id,
                        s.producer_epoch,
                        s.last_sequence,
                        s.last_timestamp,
                        s.coordinator_epoch,
                        s.current_txn_start_offset,
                    )
                    for s in p.active_producers
                ]
    return out


async def abort_transaction(client: NetworkClient, spec: AbortTransactionSpec) -> None:
    """Write an ABORT marker for a hanging transaction on one partition (WriteTxnMarkers to its
    leader, as Kafka's admin client does); the broker may require cluster authorization for this."""
    tp = spec.topic_partition
    (node, _), *_ = (await _leaders(client, [tp])).items()
    req_cls = WriteTxnMarkersRequest
    marker = req_cls.WritableTxnMarker(
        producer_id=spec.producer_id,
        producer_epoch=spec.producer_epoch,
        transaction_result=False,
        topics=[
            req_cls.WritableTxnMarker.WritableTxnMarkerTopic(
                name=tp.topic, partition_indexes=[tp.partition]
            )
        ],
        coordinator_epoch=spec.coordinator_epoch,
    )
    resp = await _send(client, node, req_cls(markers=[marker]))
    for m in resp.markers:
        for t in m.topics:
            for p in t.partitions:
                if p.error_code:
                    raise KafkaError(p.error_code, f"WriteTxnMarkers {tp}")
