"""AlterShareGroupOffsets (key 91, KIP-932) v0: set share-partition start offsets of an empty share group —
state stored afresh at a bumped state epoch with nothing in flight, the leader's copy reloaded.
"""

from __future__ import annotations

import uuid

from kafkalite.broker.apis.share import _share_offsets as _so
from kafkalite.broker.context import RequestContext
from kafkalite.coordinator.share_group import ShareGroup
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.share_admin import (
    ALTER_SHARE_GROUP_OFFSETS,
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsResponse,
)
from kafkalite.security.acl import AclOperation, ResourceType

API = ALTER_SHARE_GROUP_OFFSETS
E = ErrorCode
_Topic = AlterShareGroupOffsetsResponse.AlterShareGroupOffsetsResponseTopic
_Part = _Topic.AlterShareGroupOffsetsResponsePartition


def _error_response(
    request: AlterShareGroupOffsetsRequest, code: ErrorCode, message: str | None
) -> AlterShareGroupOffsetsResponse:
    """The group-level error, repeated on every partition (as Kafka's error response does)."""
    return AlterShareGroupOffsetsResponse(
        throttle_time_ms=0,
        error_code=int(code),
        error_message=message,
        responses=[
            _Topic(
                topic_name=t.topic_name,
                topic_id=_so.NO_TOPIC_ID,
                partitions=[
                    _Part(
                        partition_index=p.partition_index,
                        error_code=int(code),
                        error_message=message,
                    )
                    for p in t.partitions
                ],
            )
            for t in request.topics
        ],
    )


async def _alter_partition(
    ctx: RequestContext, group_id: str, topic: str, topic_id: uuid.UUID, index: int, offset: int
) -> tuple[ErrorCode, str | None]:
    meta = ctx.broker.metadata_cache.partition(topic, index)
    if meta is None:
        return E.UNKNOWN_TOPIC_OR_PARTITION, None
    if offset < 0:
        return E.INVALID_REQUEST, f"start offset {offset} is negative"
    persister = ctx.broker.share_persister
    st = await persister.read_summary(group_id, topic_id, index, meta.leader_epoch)
    if st.error != E.NO_ERROR:
        return st.error, st.message
    # a fresh state at the next state epoch: nothing in flight, and any leader still holding the
    # older state is fenced on its next write (FENCED_STATE_EPOCH) and reloads
    code = await persister.initialize(group_id, topic_id, index, max(st.state_epoch, 0) + 1, offset)
    if code != E.NO_ERROR:
        return code, None
    _so.reload_share_partition(ctx, group_id, topic_id, index)
    return E.NO_ERROR, None


async def _alter_topic(
    ctx: RequestContext,
    group: ShareGroup,
    t: AlterShareGroupOffsetsRequest.AlterShareGroupOffsetsRequestTopic,
) -> _Topic:
    def answer(topic_id: uuid.UUID, code: ErrorCode) -> _Topic:
        return _Topic(
            topic_name=t.topic_name,
            topic_id=topic_id,
            partitions=[
                _Part(partition_index=p.partition_index, error_code=int(code)) for p in t.partitions
            ],
        )

    if not ctx.authorize(AclOperation.READ, ResourceType.TOPIC, t.topic_name):
        return answer(_so.NO_TOPIC_ID, E.TOPIC_AUTHORIZATION_FAILED)
    info = ctx.broker.metadata_cache.topic(t.topic_name)
    if info is None:
        return answer(_so.NO_TOPIC_ID, E.UNKNOWN_TOPIC_OR_PARTITION)
    parts = []
    for p in t.partitions:
        code, message = await _alter_partition(
            ctx, group.group_id, t.topic_name, info.topic_id, p.partition_index, p.start_offset
        )
        if code == E.NO_ERROR:
            group.state_topics[t.topic_name] = info.topic_id
        parts.append(
            _Part(partition_index=p.partition_index, error_code=int(code), error_message=message)
        )
    return _Topic(topic_name=t.topic_name, topic_id=info.topic_id, partitions=parts)


async def handle(
    ctx: RequestContext, request: AlterShareGroupOffsetsRequest
) -> AlterShareGroupOffsetsResponse:
    found = _so.lookup(ctx, request.group_id, AclOperation.READ, require_empty=True, create=True)
    if found.group is None:
        return _error_response(request, found.error, found.message)
    responses = [await _alter_topic(ctx, found.group, t) for t in request.topics]
    return AlterShareGroupOffsetsResponse(throttle_time_ms=0, error_code=0, responses=responses)
