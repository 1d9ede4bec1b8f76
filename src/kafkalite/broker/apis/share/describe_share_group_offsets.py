"""DescribeShareGroupOffsets (key 90, KIP-932; v1 adds the lag, KIP-1226): each share-partition's start
offset (-1 when never initialized), lag and in-flight count, for the listed partitions or every one with state.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass

from kafkalite.broker.apis.share import _share_offsets as _so
from kafkalite.broker.context import RequestContext
from kafkalite.broker.coordinators.share_persister import ShareStateRead
from kafkalite.coordinator.share_group import ShareGroup
from kafkalite.coordinator.share_partition import RecordState
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.share_admin import (
    DESCRIBE_SHARE_GROUP_OFFSETS,
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsResponse,
)
from kafkalite.security.acl import AclOperation, ResourceType

API = DESCRIBE_SHARE_GROUP_OFFSETS
E = ErrorCode
_ACKNOWLEDGED = int(RecordState.ACKNOWLEDGED)
_ARCHIVED = int(RecordState.ARCHIVED)
_Group = DescribeShareGroupOffsetsResponse.DescribeShareGroupOffsetsResponseGroup
_Topic = _Group.DescribeShareGroupOffsetsResponseTopic
_Part = _Topic.DescribeShareGroupOffsetsResponsePartition


@dataclass(slots=True)
class _Wanted:
    """One topic to answer for: its partitions, or the error every one of them carries."""

    name: str
    topic_id: uuid.UUID
    partitions: list[int]
    error: ErrorCode = E.NO_ERROR
    only_initialized: bool = False  # every topic was asked for: leave out partitions without state


def _every_topic(ctx: RequestContext, group: ShareGroup) -> list[_Wanted]:
    cache = ctx.broker.metadata_cache
    names = sorted(set(group.state_topics) | group.subscribed_topics())
    out = []
    for name in names:
        info = cache.topic(name)
        if info is None or not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name):
            continue  # Kafka leaves topics one may not describe out of an "all topics" answer
        out.append(
            _Wanted(name, info.topic_id, list(range(info.partition_count)), E.NO_ERROR, True)
        )
    return out


def _listed_topics(
    ctx: RequestContext,
    topics: list[
        DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup.DescribeShareGroupOffsetsRequestTopic
    ],
) -> list[_Wanted]:
    cache = ctx.broker.metadata_cache
    out = []
    for t in topics:
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, t.topic_name):
            out.append(
                _Wanted(
                    t.topic_name, _so.NO_TOPIC_ID, list(t.partitions), E.TOPIC_AUTHORIZATION_FAILED
                )
            )
            continue
        info = cache.topic(t.topic_name)
        if info is None:
            out.append(
                _Wanted(
                    t.topic_name, _so.NO_TOPIC_ID, list(t.partitions), E.UNKNOWN_TOPIC_OR_PARTITION
                )
            )
            continue
        out.append(_Wanted(t.topic_name, info.topic_id, list(t.partitions)))
    return out


async def _partition(ctx: RequestContext, group_id: str, w: _Wanted, index: int) -> _Part | None:
    meta = ctx.broker.metadata_cache.partition(w.name, index) if w.error == E.NO_ERROR else None
    if meta is None:
        code = w.error if w.error != E.NO_ERROR else E.UNKNOWN_TOPIC_OR_PARTITION
        return _Part(partition_index=index, start_offset=-1, leader_epoch=-1, error_code=int(code))
    epoch = meta.leader_epoch
    # the stored state, read as an observer (leader epoch -1 fences nobody)
    st = await ctx.broker.share_persister.read(group_id, w.topic_id, index, -1)
    if w.only_initialized and (st.error != E.NO_ERROR or st.start_offset < 0):
        return None
    if st.error != E.NO_ERROR:
        return _Part(
            partition_index=index,
            start_offset=-1,
            leader_epoch=epoch,
            error_code=int(st.error),
            error_message=st.message,
        )
    lag, in_flight = _progress(ctx, group_id, w, index, st)
    return _Part(
        partition_index=index,
        start_offset=st.start_offset,
        leader_epoch=epoch,
        lag=lag,
        in_flight_records=in_flight,
        error_code=0,
    )


def _progress(
    ctx: RequestContext, group_id: str, w: _Wanted, index: int, st: ShareStateRead
) -> tuple[int, int]:
    """(lag, in-flight records): exact from the live share-partition when this broker leads it,
    else from the stored state (whose in-flight count omits records acquired since its last write)
    and the high watermark this broker knows; -1 when unknown."""
    if st.start_offset < 0:
        return -1, -1
    broker = ctx.broker
    part = broker.replica_manager.get_partition(w.name, index)
    hw = part.high_watermark if part is not None and part.is_leader else None
    live = broker.share_partitions.partitions.get((group_id, w.topic_id, index))
    if live is not None and hw is not None:
        return live.sp.lag(hw), live.sp.in_flight_count()
    done = sum(
        b.last_offset - max(b.first_offset, st.start_offset) + 1
        for b in st.batches
        if b.delivery_state in (_ACKNOWLEDGED, _ARCHIVED) and b.last_offset >= st.start_offset
    )
    in_flight = sum(
        b.last_offset - max(b.first_offset, st.start_offset) + 1
        for b in st.batches
        if b.delivery_state not in (_ACKNOWLEDGED, _ARCHIVED) and b.last_offset >= st.start_offset
    )
    if hw is None:
        hw = _high_watermark(ctx, w.name, index)
    lag = max(0, hw - st.start_offset - done) if hw is not None else -1
    return lag, in_flight


def _high_watermark(ctx: RequestContext, topic: str, index: int) -> int | None:
    """The partition's high watermark as a follower here knows it, or None."""
    part = ctx.broker.replica_manager.get_partition(topic, index)
    return int(part.high_watermark) if part is not None else None


async def _describe(
    ctx: RequestContext, g: DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup
) -> _Group:
    found = _so.lookup(ctx, g.group_id, AclOperation.DESCRIBE)
    if found.group is None:
        return _Group(
            group_id=g.group_id, topics=[], error_code=int(found.error), error_message=found.message
        )
    wanted = _every_topic(ctx, found.group) if g.topics is None else _listed_topics(ctx, g.topics)
    topics = []
    for w in wanted:
        parts = await asyncio.gather(*(_partition(ctx, g.group_id, w, p) for p in w.partitions))
        kept = [p for p in parts if p is not None]
        if kept or not w.only_initialized:
            topics.append(_Topic(topic_name=w.name, topic_id=w.topic_id, partitions=kept))
    return _Group(group_id=g.group_id, topics=topics, error_code=0)


async def handle(
    ctx: RequestContext, request: DescribeShareGroupOffsetsRequest
) -> DescribeShareGroupOffsetsResponse:
    groups = [await _describe(ctx, g) for g in request.groups]
    return DescribeShareGroupOffsetsResponse(throttle_time_ms=0, groups=groups)
