"""DescribeGroups (key 15) v0-5: state, protocol and members (with metadata and assignment when Stable).

An unknown group is described as Dead with no error, as Kafka does before v6.
"""

from __future__ import annotations

from kafkalite.broker.context import RequestContext
from kafkalite.broker.coordinators import groups as _groups
from kafkalite.coordinator.types import GroupDescription
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.groups import (
    DESCRIBE_GROUPS,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
)
from kafkalite.security.acl import (
    AUTHORIZED_OPERATIONS_OMITTED,
    AclOperation,
    ResourceType,
)

API = DESCRIBE_GROUPS
_Group = DescribeGroupsResponse.DescribedGroup
_Member = _Group.DescribedGroupMember


async def handle(ctx: RequestContext, request: DescribeGroupsRequest) -> DescribeGroupsResponse:
    version = ctx.api_version
    coord = _groups.coordinator_of(ctx)
    if coord is None:
        described = [
            GroupDescription(g, ErrorCode.COORDINATOR_NOT_AVAILABLE, state="")
            for g in request.groups
        ]
    else:
        allowed = [
            g for g in request.groups if ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, g)
        ]
        found = {d.group_id: d for d in coord.describe_groups(allowed)} if allowed else {}
        described = [
            found.get(g) or GroupDescription(g, ErrorCode.GROUP_AUTHORIZATION_FAILED, state="")
            for g in request.groups
        ]
    return DescribeGroupsResponse(
        throttle_time_ms=0,
        groups=[
            _Group(
                error_code=d.error,
                group_id=d.group_id,
                group_state=d.state,
                protocol_type=d.protocol_type,
                protocol_data=d.protocol_data,
                members=[
                    _Member(
                        member_id=m.member_id,
                        group_instance_id=m.group_instance_id if version >= 4 else None,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        member_metadata=m.metadata,
                        member_assignment=m.assignment,
                    )
                    for m in d.members
                ],
                authorized_operations=(
                    ctx.authorized_operations(ResourceType.GROUP, d.group_id)
                    if version >= 3 and request.include_authorized_operations and not d.error
                    else AUTHORIZED_OPERATIONS_OMITTED
                ),
            )
            for d in described
        ],
    )
