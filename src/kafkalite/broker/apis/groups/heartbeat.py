"""Heartbeat (key 12) v0-4: keeps a member's session alive; REBALANCE_IN_PROGRESS tells it to rejoin.

Errors follow the coordinator: ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, NOT_COORDINATOR...
"""

from __future__ import annotations

from kafkalite.broker.context import RequestContext
from kafkalite.broker.coordinators import groups as _groups
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.groups import HEARTBEAT, HeartbeatRequest, HeartbeatResponse
from kafkalite.security.acl import AclOperation, ResourceType

API = HEARTBEAT


async def handle(ctx: RequestContext, request: HeartbeatRequest) -> HeartbeatResponse:
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return HeartbeatResponse(
            throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED
        )
    coord = _groups.coordinator_of(ctx)
    if coord is None:
        return HeartbeatResponse(throttle_time_ms=0, error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
    code = coord.heartbeat(
        request.group_id,
        request.member_id,
        request.generation_id,
        request.group_instance_id if ctx.api_version >= 3 else None,
    )
    return HeartbeatResponse(throttle_time_ms=0, error_code=code)
