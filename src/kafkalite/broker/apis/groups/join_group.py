"""JoinGroup (key 11) v0-9: answered when the group's rebalance completes (awaits the coordinator).

v4+ requires a known member id (KIP-394), v5+ static membership, v9 lets a static leader skip assigning.
"""

from __future__ import annotations

import time

from kafkalite.broker.context import RequestContext
from kafkalite.broker.coordinators import groups as _groups
from kafkalite.coordinator.types import JoinGroupResult
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.groups import JOIN_GROUP, JoinGroupRequest, JoinGroupResponse
from kafkalite.security.acl import AclOperation, ResourceType

API = JOIN_GROUP


def _response(version: int, r: JoinGroupResult) -> JoinGroupResponse:
    nullable_names = version >= 7
    return JoinGroupResponse(
        throttle_time_ms=0,
        error_code=r.error,
        generation_id=r.generation_id,
        protocol_type=r.protocol_type if nullable_names else None,
        protocol_name=r.protocol_name if nullable_names else (r.protocol_name or ""),
        leader=r.leader,
        skip_assignment=r.skip_assignment if version >= 9 else False,
        member_id=r.member_id,
        members=[
            JoinGroupResponse.JoinGroupResponseMember(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id if version >= 5 else None,
                metadata=m.metadata,
            )
            for m in r.members
        ],
    )


async def handle(ctx: RequestContext, request: JoinGroupRequest) -> JoinGroupResponse:
    version = ctx.api_version
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return _response(
            version,
            JoinGroupResult(ErrorCode.GROUP_AUTHORIZATION_FAILED, member_id=request.member_id),
        )
    coord = _groups.coordinator_of(ctx)
    if coord is None:
        return _response(
            version,
            JoinGroupResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id=request.member_id),
        )
    pending = coord.join_group(
        request.group_id,
        request.member_id,
        request.protocol_type,
        [(p.name, p.metadata) for p in request.protocols],
        session_timeout_ms=request.session_timeout_ms,
        rebalance_timeout_ms=request.rebalance_timeout_ms if version >= 1 else -1,
        group_instance_id=request.group_instance_id if version >= 5 else None,
        client_id=ctx.client_id or "",
        client_host=_groups.client_host(ctx),
        require_known_member_id=version >= 4,
        supports_skip_assignment=version >= 9,
        reason=request.reason if version >= 8 else None,
    )
    parked = time.monotonic_ns()
    result = await pending  # the rebalance: purgatory time, as Kafka's DelayedJoin
    ctx.parked_ns += time.monotonic_ns() - parked
    return _response(version, result)
