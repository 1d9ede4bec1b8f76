"""OffsetDelete (key 47) v0: drops a group's committed offsets for partitions it no longer consumes.

Empty groups lose any offset; active consumer groups keep those of subscribed topics (GROUP_SUBSCRIBED_TO_TOPIC).
"""

from __future__ import annotations

from kafkalite.broker.context import RequestContext
from kafkalite.broker.coordinators import groups as _groups
from kafkalite.coordinator.types import TopicPartition
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.offsets import (
    OFFSET_DELETE,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
)
from kafkalite.security.acl import AclOperation, ResourceType

API = OFFSET_DELETE
_Topic = OffsetDeleteResponse.OffsetDeleteResponseTopic
_Part = _Topic.OffsetDeleteResponsePartition


async def handle(ctx: RequestContext, request: OffsetDeleteRequest) -> OffsetDeleteResponse:
    if not ctx.authorize(AclOperation.DELETE, ResourceType.GROUP, request.group_id):
        return OffsetDeleteResponse(
            error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, throttle_time_ms=0
        )
    coord = _groups.coordinator_of(ctx)
    if coord is None:
        return OffsetDeleteResponse(
            error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, throttle_time_ms=0
        )
    errors: dict[TopicPartition, ErrorCode] = {}
    wanted: list[TopicPartition] = []
    for t in request.topics:
        info = ctx.broker.metadata_cache.topic(t.name)
        topic_ok = ctx.authorize(AclOperation.READ, ResourceType.TOPIC, t.name)
        for p in t.partitions:
            tp = TopicPartition(t.name, p.partition_index)
            if not topic_ok:
                errors[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif info is None or info.partition(p.partition_index) is None:
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                wanted.append(tp)
    r = await coord.delete_offsets(request.group_id, wanted)
    if r.error != ErrorCode.NO_ERROR:
        return OffsetDeleteResponse(error_code=r.error, throttle_time_ms=0)
    errors.update(r.partitions)
    return OffsetDeleteResponse(
        error_code=ErrorCode.NO_ERROR,
        throttle_time_ms=0,
        topics=[
            _Topic(
                name=t.name,
                partitions=[
                    _Part(
                        partition_index=p.partition_index,
                        error_code=errors.get(
                            TopicPartition(t.name, p.partition_index), ErrorCode.NO_ERROR
                        ),
                    )
                    for p in t.partitions
                ],
            )
            for t in request.topics
        ],
    )
