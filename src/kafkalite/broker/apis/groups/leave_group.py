"""LeaveGroup (key 13) v0-5: one member (v0-2) or a batch of members by id or instance id (v3+).

Before v3 the single member's error is the response's error.
"""

from __future__ import annotations

from kafkalite.broker.context import RequestContext
from kafkalite.broker.coordinators import groups as _groups
from kafkalite.coordinator.types import LeavingMember
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.groups import LEAVE_GROUP, LeaveGroupRequest, LeaveGroupResponse
from kafkalite.security.acl import AclOperation, ResourceType

API = LEAVE_GROUP


async def handle(ctx: RequestContext, request: LeaveGroupRequest) -> LeaveGroupResponse:
    version = ctx.api_version
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return LeaveGroupResponse(
            throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED
        )
    coord = _groups.coordinator_of(ctx)
    if coord is None:
        return LeaveGroupResponse(
            throttle_time_ms=0, error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE
        )
    if version >= 3:
        leaving = [
            LeavingMember(m.member_id, m.group_instance_id, m.reason if version >= 5 else None)
            for m in request.members
        ]
    else:
        leaving = [LeavingMember(request.member_id)]
    r = coord.leave_group(request.group_id, leaving)
    if version < 3:
        code = r.error
        if code == ErrorCode.NO_ERROR and r.members:
            code = r.members[0].error
        return LeaveGroupResponse(throttle_time_ms=0, error_code=code)
    return LeaveGroupResponse(
        throttle_time_ms=0,
        error_code=r.error,
        members=[
            LeaveGroupResponse.MemberResponse(
                member_id=m.member_id, group_instance_id=m.group_instance_id, error_code=m.error
            )
            for m in r.members
        ],
    )
