"""Fetch (key 1): decode, fetch session, authorize (READ per topic, CLUSTER_ACTION for a follower), one
ReplicaManager.fetch_messages call (reads bounded by HW / LSO / log end, the long poll, KIP-392), encode.

Data leaves as file regions (sendfile) for v4+; v0-3 get message sets down-converted to magic 0/1.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence

from kafkalite.broker.apis.data._fetch_filter import apply_filter, compile_request_filter
from kafkalite.broker.context import RequestContext, SlicedResponse
from kafkalite.broker.fastpath import (
    FetchRequestView,
    FetchResult,
    FetchTopicResult,
    FetchTopicView,
    decode_fetch,
    encode_fetch_response,
)
from kafkalite.cluster.fetch_messages import (
    FOLLOWER,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    FetchParams,
    FetchPartition,
    ReplicaSelection,
)
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.fetch import FETCH, FetchRequest, FetchResponse
from kafkalite.security.acl import AclOperation, ResourceType

API = FETCH
log = logging.getLogger("kafkalite.broker.fetch")

_SchemaTopic = FetchResponse.FetchableTopicResponse
_SchemaPart = _SchemaTopic.PartitionData
ZERO_UUID = uuid.UUID(int=0)
MAX_WAIT_MS = 30_000

# v4+ arrives as the fast path's view, v0-3 as the decoded message: the handler reads what both have
Request = FetchRequest | FetchRequestView


def _requested(
    ctx: RequestContext,
    topics: Sequence[FetchTopicView] | Sequence[FetchRequest.FetchTopic],
    replica_id: int,
) -> list[list[FetchPartition]]:
    """Each requested partition, with the error to answer when its topic is unknown or denied.
    ACLs (one attribute check when off): a follower needs CLUSTER_ACTION, a consumer READ per topic."""
    broker = ctx.broker
    cache = broker.metadata_cache
    by_id = ctx.api_version >= 13
    out: list[list[FetchPartition]] = []
    checked = broker.authorizer is not None
    follower_denied = (
        checked and replica_id >= 0 and not ctx.authorize_cluster(AclOperation.CLUSTER_ACTION)
    )
    for t in topics:
        if by_id:
            topic_id = t.topic_id  # the fast view decodes one from every v13+ request
            info = cache.topic_by_id(topic_id) if topic_id is not None else None
            name = info.name if info is not None else None
        else:
            name = t.topic
            info = cache.topic(name)
        denied = checked and (
            follower_denied
            or (
                replica_id < 0
                and name is not None
                and not ctx.authorize(AclOperation.READ, ResourceType.TOPIC, name)
            )
        )
        group: list[FetchPartition] = []
        for p in t.partitions:
            tgt = FetchPartition(
                name,
                t.topic_id if by_id else None,
                p.partition,
                p.fetch_offset,
                p.partition_max_bytes,
                p.current_leader_epoch,
                p.log_start_offset if replica_id >= 0 else -1,
            )
            if denied:
                tgt.error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif info is None:
                tgt.error = (
                    ErrorCode.UNKNOWN_TOPIC_ID if by_id else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                )
            elif info.partition(p.partition) is None:
                tgt.error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                tgt.topic = info.name
            group.append(tgt)
        out.append(group)
    return out


def _selection(ctx: RequestContext, client_rack: str) -> ReplicaSelection:
    """KIP-392 on the leader: how the replica selector sees the brokers' racks and liveness."""
    cache = ctx.broker.metadata_cache

    def rack_of(broker_id: int) -> str | None:
        ep = cache.broker(broker_id)
        return ep.rack if ep is not None else None

    return ReplicaSelection(ctx.broker.replica_selector, client_rack, rack_of, cache.is_alive)


async def handle(ctx: RequestContext, request: Request) -> FetchResult | SlicedResponse | None:
    version = ctx.api_version
    broker = ctx.broker
    session = None
    full = True
    flt = None
    if request.filter is not None and version >= 12:  # kafkalite's fetch filter (issue 35)
        flt, fault = compile_request_filter(request.filter, ctx.quota_client_id)
        if flt is None:
            refused = FetchResult([], error_code=ErrorCode.INVALID_REQUEST)
            refused.filter_error = fault
            return refused
    if version >= 7:
        session, full, err = broker.fetch_sessions.begin(request, version >= 13)
        if err:
            return FetchResult([], error_code=err)
    topics = request.topics if session is None or full else session.as_topics()
    replica_id = request.replica_id if version <= 14 else -1
    if replica_id >= 0:
        isolation = FOLLOWER
        ctx.quota_exempt = True
    else:
        isolation = (
            READ_COMMITTED if version >= 4 and request.isolation_level == 1 else READ_UNCOMMITTED
        )
    # KIP-392: a v11+ consumer fetch may be read from a follower, and sent to one by the leader
    follower_ok = replica_id < 0 and version >= 11
    groups = _requested(ctx, topics, replica_id)
    budget = request.max_bytes if version >= 3 else 0x7FFFFFFF
    if budget <= 0:
        budget = 0x7FFFFFFF
    if broker.client_quotas.active and replica_id < 0:
        # a consumer under a byte-rate quota gets at most one window's allowance per answer
        cap = broker.client_quotas.fetch_max_bytes(ctx.principal.name, ctx.quota_client_id)
        if cap is not None:
            budget = min(budget, cap)
    params = FetchParams(
        replica_id,
        isolation,
        min(max(request.max_wait_ms, 0), MAX_WAIT_MS),
        request.min_bytes,
        budget,
        follower_ok,
        _selection(ctx, request.rack_id)
        if follower_ok and request.rack_id and broker.replica_selector is not None
        else None,
        broker.replication_quotas.leader if replica_id >= 0 else None,
        ctx.connection,
    )
    fetched = await broker.replica_manager.fetch_messages(params, groups, broker.stats)
    if fetched is None:
        return None  # the connection closed while the fetch waited
    ctx.parked_ns += fetched.parked_ns
    sliced = SlicedResponse(None)
    down_magic = 0 if version <= 1 else 1
    topics_out = []
    filtered = flt is not None and replica_id < 0
    for group, results in zip(groups, fetched.results, strict=True):
        t0 = group[0] if group else None
        if flt is not None and replica_id < 0 and t0 is not None and t0.topic is not None:
            done, saved = apply_filter(flt, results, t0.topic, broker.stats.fetch_filter)
            filtered = filtered and done
            if saved:
                broker.stats.topic(t0.topic).bytes_out -= saved
        topics_out.append(
            FetchTopicResult(
                t0.topic if t0 is not None and t0.topic is not None else "",
                t0.topic_id if t0 is not None and t0.topic_id is not None else ZERO_UUID,
                results,  # type: ignore[arg-type]  # PartitionReadResult: the same named fields
            )
        )
        for pr in results:
            region = pr.region
            if region is None:
                continue
            if version >= 4:
                pr.records = sliced.placeholder(region)
            else:
                try:
                    pr.records = _downconvert(region.read_bytes(), down_magic)
                except Exception as exc:
                    code = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
                    if "compression" not in type(exc).__name__.lower():
                        code = ErrorCode.CORRUPT_MESSAGE
                        log.warning(
                            "down-conversion of %s-%d failed: %s",
                            group[0].topic, pr.partition_index, exc,
                        )  # fmt: skip
                    pr.error_code = code
                    pr.records = b""
    if session is not None:
        topics_out = session.filter_response(topics_out, full=full)
    response = FetchResult(topics_out)
    response.filtered = filtered
    if session is not None:
        response.session_id = session.id
    if not sliced.regions:
        return response
    sliced.response = response
    return sliced


def _downconvert(blob: bytes, magic: int) -> bytes:
    from kafkalite.records.legacy import downconvert

    return downconvert(blob, magic)


def decode_request(buf: bytes, pos: int, version: int) -> FetchRequestView | None:
    """Hot-path decoder for v4-16; older versions go through the schema."""
    return decode_fetch(buf, pos, version) if version >= 4 else None


def encode_response(out: bytearray, result: FetchResult, version: int) -> None:
    if version >= 4:
        encode_fetch_response(out, result, version)
    else:
        to_schema(result).encode_into(out, version)


def to_schema(result: FetchResult) -> FetchResponse:
    return FetchResponse(
        throttle_time_ms=result.throttle_time_ms,
        error_code=result.error_code,
        session_id=result.session_id,
        responses=[
            _SchemaTopic(
                topic=t.topic,
                topic_id=t.topic_id,
                partitions=[
                    _SchemaPart(
                        partition_index=p.partition_index,
                        error_code=int(p.error_code),
                        high_watermark=p.high_watermark,
                        last_stable_offset=p.last_stable_offset,
                        log_start_offset=p.log_start_offset,
                        aborted_transactions=None
                        if p.aborted_transactions is None
                        else [
                            _SchemaPart.AbortedTransaction(producer_id=pid, first_offset=first)
                            for pid, first in p.aborted_transactions
                        ],
                        preferred_read_replica=p.preferred_read_replica,
                        records=p.records,
                    )
                    for p in t.partitions
                ],
            )
            for t in result.responses
        ],
    )
