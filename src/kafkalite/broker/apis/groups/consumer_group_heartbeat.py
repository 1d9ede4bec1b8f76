"""ConsumerGroupHeartbeat (key 68, KIP-848): join with epoch 0, heartbeat with the member epoch, leave with
-1 (-2: a static member away for now); the answer is the member's epoch and, when changed, its partitions.
"""

from __future__ import annotations

import uuid

from kafkalite.broker.context import RequestContext
from kafkalite.broker.coordinators import groups as _groups
from kafkalite.coordinator.consumer_assignors import SubscribedTopic
from kafkalite.coordinator.consumer_group import HeartbeatRequest, HeartbeatResult
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.consumer_groups import (
    CONSUMER_GROUP_HEARTBEAT,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from kafkalite.security.acl import AclOperation, ResourceType

API = CONSUMER_GROUP_HEARTBEAT
_Assignment = ConsumerGroupHeartbeatResponse.Assignment


def _answer(ctx: RequestContext, result: HeartbeatResult) -> ConsumerGroupHeartbeatResponse:
    assignment = None
    if result.assignment is not None:
        assignment = _Assignment(
            topic_partitions=[
                _Assignment.TopicPartitions(topic_id=t, partitions=sorted(ps))
                for t, ps in sorted(result.assignment.items(), key=lambda kv: str(kv[0]))
            ]
        )
    coord = _groups.coordinator_of(ctx)
    interval = coord.consumer_config.heartbeat_interval_ms if coord is not None else 5000
    return ConsumerGroupHeartbeatResponse(
        throttle_time_ms=0,
        error_code=int(result.error),
        error_message=result.message,
        member_id=result.member_id,
        member_epoch=result.member_epoch,
        heartbeat_interval_ms=interval,
        assignment=assignment,
    )


def _invalid(request: ConsumerGroupHeartbeatRequest, version: int) -> str | None:
    """Kafka's request checks before the coordinator sees the heartbeat."""
    if not request.group_id:
        return "GroupId can't be empty."
    if request.instance_id is not None and not request.instance_id:
        return "InstanceId can't be empty."
    if request.rack_id is not None and not request.rack_id:
        return "RackId can't be empty."
    if request.member_epoch > 0 or request.member_epoch in (-1, -2):
        if not request.member_id:
            return "MemberId can't be empty."
        if request.member_epoch == -2 and request.instance_id is None:
            return "InstanceId can't be null."
    elif request.member_epoch == 0:
        if version >= 1 and not request.member_id:
            return "MemberId can't be empty."
        if request.rebalance_timeout_ms == -1:
            return "RebalanceTimeoutMs must be provided in first request."
        if request.topic_partitions is None or request.topic_partitions:
            return "TopicPartitions must be empty when (re-)joining."
        regex = request.subscribed_topic_regex if version >= 1 else None
        if not request.subscribed_topic_names and not regex:
            return "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
    else:
        return f"MemberEpoch is invalid: {request.member_epoch}"
    return None


async def handle(
    ctx: RequestContext, request: ConsumerGroupHeartbeatRequest
) -> ConsumerGroupHeartbeatResponse:
    version = ctx.api_version
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return _answer(ctx, HeartbeatResult(ErrorCode.GROUP_AUTHORIZATION_FAILED))
    why = _invalid(request, version)
    if why is not None:
        return _answer(ctx, HeartbeatResult(ErrorCode.INVALID_REQUEST, why))
    coord = _groups.coordinator_of(ctx)
    if coord is None:
        return _answer(ctx, HeartbeatResult(ErrorCode.COORDINATOR_NOT_AVAILABLE))
    topics = {
        t.name: SubscribedTopic(t.topic_id, t.name, len(t.partitions))
        for t in ctx.broker.metadata_cache.topics()
        if ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, t.name)
    }
    owned: dict[uuid.UUID, frozenset[int]] | None = None
    if request.topic_partitions is not None:
        owned = {}
        for tp in request.topic_partitions:
            owned[tp.topic_id] = owned.get(tp.topic_id, frozenset()) | frozenset(tp.partitions)
    hb = HeartbeatRequest(
        member_id=request.member_id,
        member_epoch=request.member_epoch,
        instance_id=request.instance_id,
        rack_id=request.rack_id,
        rebalance_timeout_ms=request.rebalance_timeout_ms,
        subscribed_topic_names=(
            tuple(request.subscribed_topic_names)
            if request.subscribed_topic_names is not None
            else None
        ),
        subscribed_topic_regex=request.subscribed_topic_regex if version >= 1 else None,
        server_assignor=request.server_assignor,
        owned=owned,
        client_id=ctx.client_id or "",
        client_host=_groups.client_host(ctx),
    )
    result = await coord.consumer_group_heartbeat(request.group_id, hb, topics)
    return _answer(ctx, result)
