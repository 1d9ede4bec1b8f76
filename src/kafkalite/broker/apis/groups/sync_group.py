"""SyncGroup (key 14) v0-5: the leader hands in the assignment; every member gets its own once it is stored.

Followers that sync before the leader wait for it (the handler awaits the coordinator).
"""

from __future__ import annotations

import time

from kafkalite.broker.context import RequestContext
from kafkalite.broker.coordinators import groups as _groups
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.groups import SYNC_GROUP, SyncGroupRequest, SyncGroupResponse
from kafkalite.security.acl import AclOperation, ResourceType

API = SYNC_GROUP


async def handle(ctx: RequestContext, request: SyncGroupRequest) -> SyncGroupResponse:
    version = ctx.api_version
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return SyncGroupResponse(
            throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, assignment=b""
        )
    coord = _groups.coordinator_of(ctx)
    if coord is None:
        return SyncGroupResponse(
            throttle_time_ms=0, error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, assignment=b""
        )
    parked = time.monotonic_ns()
    r = await coord.sync_group(
        request.group_id,
        request.generation_id,
        request.member_id,
        group_instance_id=request.group_instance_id if version >= 3 else None,
        protocol_type=request.protocol_type if version >= 5 else None,
        protocol_name=request.protocol_name if version >= 5 else None,
        assignments={a.member_id: a.assignment for a in request.assignments},
    )
    ctx.parked_ns += time.monotonic_ns() - parked  # waiting for the leader's assignment
    return SyncGroupResponse(
        throttle_time_ms=0,
        error_code=r.error,
        protocol_type=r.protocol_type if version >= 5 else None,
        protocol_name=r.protocol_name if version >= 5 else None,
        assignment=r.assignment,
    )
