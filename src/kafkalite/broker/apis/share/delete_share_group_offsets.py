"""DeleteShareGroupOffsets (key 92, KIP-932) v0: drop the share-partition state of whole topics of an empty
share group, so the next ShareFetch initializes them again from share.auto.offset.reset.
"""

from __future__ import annotations

from kafkalite.broker.apis.share import _share_offsets as _so
from kafkalite.broker.context import RequestContext
from kafkalite.coordinator.share_group import ShareGroup
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.share_admin import (
    DELETE_SHARE_GROUP_OFFSETS,
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse,
)
from kafkalite.security.acl import AclOperation, ResourceType

API = DELETE_SHARE_GROUP_OFFSETS
E = ErrorCode
_Topic = DeleteShareGroupOffsetsResponse.DeleteShareGroupOffsetsResponseTopic


async def _delete_topic(ctx: RequestContext, group: ShareGroup, name: str) -> _Topic:
    if not ctx.authorize(AclOperation.READ, ResourceType.TOPIC, name):
        code = E.TOPIC_AUTHORIZATION_FAILED
        return _Topic(topic_name=name, topic_id=_so.NO_TOPIC_ID, error_code=int(code))
    info = ctx.broker.metadata_cache.topic(name)
    if info is None:
        code = E.UNKNOWN_TOPIC_OR_PARTITION
        return _Topic(topic_name=name, topic_id=_so.NO_TOPIC_ID, error_code=int(code))
    first_error = E.NO_ERROR
    for index in range(info.partition_count):
        code = await ctx.broker.share_persister.delete(group.group_id, info.topic_id, index)
        if code == E.NO_ERROR:
            _so.reload_share_partition(ctx, group.group_id, info.topic_id, index)
        elif first_error == E.NO_ERROR:
            first_error = code
    if first_error == E.NO_ERROR:
        group.state_topics.pop(name, None)
    return _Topic(
        topic_name=name,
        topic_id=info.topic_id,
        error_code=int(first_error),
        error_message=None
        if first_error == E.NO_ERROR
        else f"state delete failed: {first_error.name}",
    )


async def handle(
    ctx: RequestContext, request: DeleteShareGroupOffsetsRequest
) -> DeleteShareGroupOffsetsResponse:
    found = _so.lookup(ctx, request.group_id, AclOperation.READ, require_empty=True)
    if found.group is None:
        return DeleteShareGroupOffsetsResponse(
            throttle_time_ms=0, error_code=int(found.error), error_message=found.message
        )
    responses = [await _delete_topic(ctx, found.group, t.topic_name) for t in request.topics]
    return DeleteShareGroupOffsetsResponse(throttle_time_ms=0, error_code=0, responses=responses)
