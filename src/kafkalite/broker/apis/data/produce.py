"""Produce (key 0): decode, authorize (transactional id, idempotence, WRITE per topic; internal topics and
auto-creation), one ReplicaManager.append_records call, encode.

The ReplicaManager validates the batches, appends, applies the flush policy and acks 0/1/-1 (a delayed
produce for -1, answered once the ISR has the batch); this module keeps the hot-path codecs.
"""

from __future__ import annotations

import logging

from kafkalite.broker.apis.data._schema_validation import refuse_invalid, validated_topics
from kafkalite.broker.apis.metadata.metadata import auto_create
from kafkalite.broker.context import DeferredResponse, RequestContext
from kafkalite.broker.coordinators.txn_verification import (
    needs_round_trip,
    produce_error,
    transactional_producer,
)
from kafkalite.broker.fastpath import (
    PartitionData,
    ProduceRequestView,
    can_encode_fast,
    decode_produce,
    encode_produce_response,
)
from kafkalite.cluster.append_records import (
    AppendOrigin,
    DelayedProduce,
    PartitionAppendResult,
    TransactionVerification,
)
from kafkalite.cluster.errors import ReplicaError
from kafkalite.cluster.metadata import topic_name_error
from kafkalite.cluster.metadata_cache import TopicMetadata
from kafkalite.coordinator import TopicPartition
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.produce import PRODUCE, ProduceRequest, ProduceResponse
from kafkalite.security.acl import AclOperation, ResourceType
from kafkalite.storage.errors import StorageError
from kafkalite.storage.producer_state import SENTINEL_GUARD, VerificationGuard

API = PRODUCE
log = logging.getLogger("kafkalite.broker.produce")

_SchemaTopic = ProduceResponse.TopicProduceResponse
_SchemaPart = _SchemaTopic.PartitionProduceResponse
_SchemaRecordError = _SchemaPart.BatchIndexAndErrorMessage

# v3+ arrives as the fast path's view, v0-2 as the decoded message: the handler reads what both have
Request = ProduceRequest | ProduceRequestView
_PartitionData = list[PartitionData] | list[ProduceRequest.TopicProduceData.PartitionProduceData]


# a partition's answer is the ReplicaManager's result itself (plain slots, named as the wire names
# them), turned into schema objects only when the fast codec cannot send it
_PartResp = PartitionAppendResult


class _TopicResp:
    __slots__ = ("name", "partition_responses")

    def __init__(self, name: str, partition_responses: list[PartitionAppendResult]) -> None:
        self.name = name
        self.partition_responses = partition_responses


class _Response:
    __slots__ = ("responses", "throttle_time_ms")

    def __init__(self, responses: list[_TopicResp]) -> None:
        self.responses = responses
        self.throttle_time_ms = 0

    def to_schema(self) -> ProduceResponse:
        return ProduceResponse(
            responses=[
                _SchemaTopic(
                    name=t.name,
                    partition_responses=[
                        _SchemaPart(
                            index=p.index,
                            error_code=int(p.error_code),
                            base_offset=p.base_offset,
                            log_append_time_ms=p.log_append_time_ms,
                            log_start_offset=p.log_start_offset,
                            record_errors=[
                                _SchemaRecordError(batch_index=i, batch_index_error_message=m)
                                for i, m in p.record_errors
                            ],
                            error_message=p.error_message,
                        )
                        for p in t.partition_responses
                    ],
                )
                for t in self.responses
            ],
            throttle_time_ms=self.throttle_time_ms,
        )


def decode_request(buf: bytes | bytearray, pos: int, version: int) -> ProduceRequestView | None:
    """Hot-path decoder for v3-11; older versions go through the schema."""
    return decode_produce(buf, pos, version) if version >= 3 else None


def encode_response(out: bytearray, response: _Response, version: int) -> None:
    if version >= 3 and can_encode_fast(response):
        encode_produce_response(out, response, version)
    else:
        response.to_schema().encode_into(out, version)


def _has_idempotent_records(request: Request) -> bool:
    """Does any partition's first batch carry a producer id (v2 batch, producerId at byte 43)?"""
    for tdata in request.topic_data:
        for pdata in tdata.partition_data:
            blob = pdata.records
            if (
                blob
                and len(blob) >= 51
                and blob[16] == 2
                and int.from_bytes(blob[43:51], "big", signed=True) >= 0
            ):
                return True
    return False


def _producer_denied(ctx: RequestContext, request: Request) -> ErrorCode:
    """Kafka's request-level produce checks: WRITE on the transactional id; for idempotent records
    without one, IDEMPOTENT_WRITE on the cluster or WRITE on some topic."""
    txn_id = request.transactional_id if ctx.api_version >= 3 else None
    if txn_id is not None:
        if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, txn_id):
            return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif _has_idempotent_records(request):
        authorizer = ctx.broker.authorizer
        assert authorizer is not None
        if not ctx.authorize_cluster(AclOperation.IDEMPOTENT_WRITE) and not (
            authorizer.authorize_any(
                ctx.principal, ctx.client_host, AclOperation.WRITE, ResourceType.TOPIC
            )
        ):
            return ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    return ErrorCode.NO_ERROR


async def handle(
    ctx: RequestContext, request: Request
) -> _Response | DeferredResponse[_Response] | None:
    broker = ctx.broker
    cache = broker.metadata_cache
    acks = request.acks
    # ACLs: one attribute check when no authorizer is configured
    checked = broker.authorizer is not None
    request_denied = _producer_denied(ctx, request) if checked else ErrorCode.NO_ERROR
    topics_out: list[_TopicResp] = []
    entries: list[
        tuple[str, _PartitionData]
    ] = []  # the topics that may be written, with their partition data
    slots: list[tuple[_TopicResp, TopicMetadata | None]] = []  # their answers, with their metadata
    bad_acks = acks not in (0, 1, -1)
    for tdata in request.topic_data:
        name = tdata.name
        info = cache.topic(name)
        topic_code = ErrorCode.NO_ERROR
        if bad_acks:
            topic_code = ErrorCode.INVALID_REQUIRED_ACKS
        elif checked and (
            request_denied or not ctx.authorize(AclOperation.WRITE, ResourceType.TOPIC, name)
        ):
            topic_code = request_denied or ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif info is not None and info.internal:
            topic_code = ErrorCode.INVALID_TOPIC_EXCEPTION  # clients may not write internal topics
        elif info is None:
            if topic_name_error(name):
                topic_code = ErrorCode.INVALID_TOPIC_EXCEPTION
            else:
                info, topic_code = auto_create(ctx, name)
        if topic_code:
            topics_out.append(
                _TopicResp(
                    name,
                    [PartitionAppendResult(p.index, topic_code) for p in tdata.partition_data],
                )
            )
            continue
        t_out = _TopicResp(name, [])  # filled in below
        topics_out.append(t_out)
        entries.append((name, tdata.partition_data))
        slots.append((t_out, info))
    appended = None
    verification = None
    refused = None
    validating = validated_topics(broker.replica_manager, entries) if entries else None
    if validating is not None:  # (issue 33) only topics with schema validation on pay for it
        refused = await refuse_invalid(
            broker.schema_registry, broker.replica_manager, entries, validating
        )
    if entries and broker.replica_manager.transaction_verification_enabled:
        txn_id = request.transactional_id if ctx.api_version >= 3 else None
        if txn_id is not None:
            verification = await _verify_transaction(ctx, txn_id, entries)
    if entries:
        appended = broker.replica_manager.append_records(
            entries,
            acks,
            request.timeout_ms,
            AppendOrigin.CLIENT,
            stats=broker.stats,
            requester=(ctx.connection.peer, ctx.client_id),
            verification=verification,
        )
        for pos, ((t_out, info), results) in enumerate(zip(slots, appended.results, strict=True)):
            t_out.partition_responses = results
            if refused and pos in refused:
                results.extend(refused[pos])
            for pr in results:
                if pr.error_code in _NOT_HERE:
                    known = info is not None and info.partition(pr.index) is not None
                    pr.error_code = (
                        ErrorCode.NOT_LEADER_OR_FOLLOWER
                        if known
                        else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    )
        delayed = appended.delayed
        if delayed is not None:
            if delayed.waiting:
                # the batches are in the log: the connection may read and append its next request
                # while this one waits for the ISR (answers still go out in request order)
                return DeferredResponse(_answer_when_complete(delayed, topics_out))
            await delayed.complete()  # the flush policy's fsync
    if acks == 0:
        return None
    return _Response(topics_out)


_NOT_HERE = (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)


async def _verify_transaction(
    ctx: RequestContext, txn_id: str, entries: list[tuple[str, _PartitionData]]
) -> TransactionVerification | None:
    """KIP-890: the guard of each partition whose batch is transactional, and for a transaction's
    first batch on a partition (only), the coordinator's word that the partition is in it; the
    partitions it refuses get their error and are not appended. None: no transactional batch."""
    rm = ctx.broker.replica_manager
    guards: dict[tuple[str, int], VerificationGuard] = {}
    ask: dict[tuple[int, int], dict[TopicPartition, VerificationGuard]] = {}
    for name, partition_data in entries:
        for pdata in partition_data:
            producer = transactional_producer(pdata.records)
            if producer is None:
                continue
            part = rm.get_partition(name, pdata.index)
            if part is None or not part.is_leader:
                continue  # the append answers it
            try:
                guard = part.maybe_start_transaction_verification(*producer)
            except (ReplicaError, StorageError, OSError):
                continue  # (leadership or its log just went away) the append answers it
            if guard is SENTINEL_GUARD:
                continue  # its transaction is open here
            guards[(name, pdata.index)] = guard
            if needs_round_trip(guard, SENTINEL_GUARD):
                ask.setdefault(producer, {})[TopicPartition(name, pdata.index)] = guard
    if not guards:
        return None
    verification = TransactionVerification(guards)
    verifier = ctx.broker.transactions.verifier
    for (producer_id, epoch), wanted in ask.items():
        codes = await verifier.verify(txn_id, producer_id, epoch, wanted)
        for tp, code in codes.items():
            refused = produce_error(code, ctx.api_version)
            if refused is not None:
                verification.errors[(tp.topic, tp.partition)] = refused
                log.info(
                    "transactional produce of %r to %s-%d refused: %s (%s)",
                    txn_id, tp.topic, tp.partition, refused[0].name, refused[1],
                )  # fmt: skip
    return verification


async def _answer_when_complete(delayed: DelayedProduce, topics_out: list[_TopicResp]) -> _Response:
    await delayed.complete()
    return _Response(topics_out)
