"""AddPartitionsToTxn (key 24) v0-3: a transactional producer names the partitions it will write before
it writes them; the transaction coordinator records them (Ongoing) in `__transaction_state`. v4-5 are the
brokers' form (KIP-890, CLUSTER_ACTION): several transactions, VerifyOnly asks whether partitions are in them.

An unknown partition answers UNKNOWN_TOPIC_OR_PARTITION and the others OPERATION_NOT_ATTEMPTED, nothing added.
"""

from __future__ import annotations

from kafkalite.broker.apis.txn._txn_common import (
    coordinator_or_error,
    old_fenced_code,
)
from kafkalite.broker.context import RequestContext
from kafkalite.coordinator import TopicPartition
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.txn import (
    ADD_PARTITIONS_TO_TXN,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
)
from kafkalite.security.acl import AclOperation, ResourceType

API = ADD_PARTITIONS_TO_TXN
_Topic = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
_Part = _Topic.AddPartitionsToTxnPartitionResult


async def handle(
    ctx: RequestContext, request: AddPartitionsToTxnRequest
) -> AddPartitionsToTxnResponse:
    if ctx.api_version >= 4:
        return await _handle_batched(ctx, request)
    wanted = [TopicPartition(t.name, p) for t in request.v3_and_below_topics for p in t.partitions]
    cache = ctx.broker.metadata_cache
    unknown = {tp for tp in wanted if cache.partition(tp.topic, tp.partition) is None}
    codes: dict[TopicPartition, ErrorCode]
    txn_ok = ctx.authorize(
        AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.v3_and_below_transactional_id
    )
    denied_topics = {
        tp.topic
        for tp in wanted
        if not ctx.authorize(AclOperation.WRITE, ResourceType.TOPIC, tp.topic)
    }
    if not txn_ok:
        codes = dict.fromkeys(wanted, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    elif denied_topics:
        codes = {
            tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED
            if tp.topic in denied_topics
            else ErrorCode.OPERATION_NOT_ATTEMPTED
            for tp in wanted
        }
    elif unknown:
        codes = {
            tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            if tp in unknown
            else ErrorCode.OPERATION_NOT_ATTEMPTED
            for tp in wanted
        }
    else:
        coord, err = coordinator_or_error(ctx)
        if coord is None:
            code = err
        else:
            code = await coord.add_partitions(
                request.v3_and_below_transactional_id,
                request.v3_and_below_producer_id,
                request.v3_and_below_producer_epoch,
                wanted,
            )
        code = old_fenced_code(code, ctx.api_version, 2)
        codes = dict.fromkeys(wanted, code)
    by_topic: dict[str, list[_Part]] = {}
    for tp, code in codes.items():
        by_topic.setdefault(tp.topic, []).append(
            _Part(partition_index=tp.partition, partition_error_code=code)
        )
    return AddPartitionsToTxnResponse(
        throttle_time_ms=0,
        results_by_topic_v3_and_below=[
            _Topic(name=name, results_by_partition=parts) for name, parts in by_topic.items()
        ],
    )


_Result = AddPartitionsToTxnResponse.AddPartitionsToTxnResult
_RTopic = _Result.AddPartitionsToTxnTopicResult
_RPart = _RTopic.AddPartitionsToTxnPartitionResult


async def _handle_batched(
    ctx: RequestContext, request: AddPartitionsToTxnRequest
) -> AddPartitionsToTxnResponse:
    """v4+: from a broker only (CLUSTER_ACTION, else a top-level CLUSTER_AUTHORIZATION_FAILED); each
    transaction verified (VerifyOnly) or added; TRANSACTION_ABORTABLE is INVALID_TXN_STATE below v5."""
    if not ctx.authorize_cluster(AclOperation.CLUSTER_ACTION):
        return AddPartitionsToTxnResponse(
            throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        )
    results: list[_Result] = []
    for txn in request.transactions:
        wanted = [TopicPartition(t.name, p) for t in txn.topics for p in t.partitions]
        coord, err = coordinator_or_error(ctx)
        codes: dict[TopicPartition, ErrorCode]
        if coord is None:
            codes = dict.fromkeys(wanted, err)
        elif txn.verify_only:
            codes = coord.verify_partitions(
                txn.transactional_id, txn.producer_id, txn.producer_epoch, wanted
            )
        else:
            code = await coord.add_partitions(
                txn.transactional_id, txn.producer_id, txn.producer_epoch, wanted
            )
            codes = dict.fromkeys(wanted, code)
        if ctx.api_version < 5:
            codes = {
                tp: ErrorCode.INVALID_TXN_STATE if c == ErrorCode.TRANSACTION_ABORTABLE else c
                for tp, c in codes.items()
            }
        by_topic: dict[str, list[_RPart]] = {}
        for tp, code in codes.items():
            by_topic.setdefault(tp.topic, []).append(
                _RPart(partition_index=tp.partition, partition_error_code=code)
            )
        results.append(
            _Result(
                transactional_id=txn.transactional_id,
                topic_results=[
                    _RTopic(name=name, results_by_partition=parts)
                    for name, parts in by_topic.items()
                ],
            )
        )
    return AddPartitionsToTxnResponse(
        throttle_time_ms=0, error_code=ErrorCode.NO_ERROR, results_by_transaction=results
    )
