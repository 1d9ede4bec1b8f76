"""ShareGroupHeartbeat (key 76, KIP-932): join a share group with epoch 0, heartbeat with the member
epoch, leave with -1; the answer carries the partitions the member may fetch (shared with others).
"""

from __future__ import annotations

from kafkalite.broker.context import RequestContext
from kafkalite.broker.coordinators import groups as _groups
from kafkalite.coordinator.consumer_assignors import SubscribedTopic
from kafkalite.coordinator.share_group import ShareHeartbeat, ShareHeartbeatResult
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.share_groups import (
    SHARE_GROUP_HEARTBEAT,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
)
from kafkalite.security.acl import AclOperation, ResourceType

API = SHARE_GROUP_HEARTBEAT
_Assignment = ShareGroupHeartbeatResponse.Assignment


def _answer(result: ShareHeartbeatResult, interval_ms: int) -> ShareGroupHeartbeatResponse:
    assignment = None
    if result.assignment is not None:
        assignment = _Assignment(
            topic_partitions=[
                _Assignment.TopicPartitions(topic_id=t, partitions=sorted(ps))
                for t, ps in sorted(result.assignment.items(), key=lambda kv: str(kv[0]))
            ]
        )
    return ShareGroupHeartbeatResponse(
        throttle_time_ms=0,
        error_code=int(result.error),
        error_message=result.message,
        member_id=result.member_id,
        member_epoch=result.member_epoch,
        heartbeat_interval_ms=interval_ms,
        assignment=assignment,
    )


def _invalid(request: ShareGroupHeartbeatRequest) -> str | None:
    """Kafka's request checks before the coordinator sees the heartbeat."""
    if not request.group_id:
        return "GroupId can't be empty."
    if request.rack_id is not None and not request.rack_id:
        return "RackId can't be empty."
    if request.member_epoch == 0:
        if not request.subscribed_topic_names:
            return "SubscribedTopicNames cannot be null or empty when MemberEpoch is 0."
    elif request.member_epoch > 0 or request.member_epoch == -1:
        if not request.member_id:
            return "MemberId can't be empty."
    else:
        return f"MemberEpoch is invalid: {request.member_epoch}"
    return None


async def handle(
    ctx: RequestContext, request: ShareGroupHeartbeatRequest
) -> ShareGroupHeartbeatResponse:
    config = _groups.share_group_config(
        ctx.broker.config, ctx.broker.group_configs, request.group_id or ""
    )
    interval = config.heartbeat_interval_ms
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return _answer(ShareHeartbeatResult(ErrorCode.GROUP_AUTHORIZATION_FAILED), interval)
    why = _invalid(request)
    if why is not None:
        return _answer(ShareHeartbeatResult(ErrorCode.INVALID_REQUEST, why), interval)
    coord = _groups.coordinator_of(ctx)
    if coord is None:
        return _answer(ShareHeartbeatResult(ErrorCode.COORDINATOR_NOT_AVAILABLE), interval)
    names = request.subscribed_topic_names
    if names is not None:
        denied = [n for n in names if not ctx.authorize(AclOperation.READ, ResourceType.TOPIC, n)]
        if denied:
            return _answer(
                ShareHeartbeatResult(
                    ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                    f"Not authorized to read topic(s) {', '.join(sorted(denied))}",
                ),
                interval,
            )
    topics = {
        t.name: SubscribedTopic(t.topic_id, t.name, len(t.partitions))
        for t in ctx.broker.metadata_cache.topics()
        if not t.name.startswith("__")
    }
    hb = ShareHeartbeat(
        member_id=request.member_id,
        member_epoch=request.member_epoch,
        rack_id=request.rack_id,
        subscribed_topic_names=tuple(names) if names is not None else None,
        client_id=ctx.client_id or "",
        client_host=_groups.client_host(ctx),
    )
    result = coord.share_group_heartbeat(request.group_id, hb, topics, config)
    return _answer(result, interval)
