"""ListGroups (key 16) v0-5: the groups this broker coordinates, filtered by state (v4+) and type (v5+).

A group is "classic" or, once KIP-848 members use it, "consumer".
"""

from __future__ import annotations

from kafkalite.broker.context import RequestContext
from kafkalite.broker.coordinators import groups as _groups
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.groups import LIST_GROUPS, ListGroupsRequest, ListGroupsResponse
from kafkalite.security.acl import AclOperation, ResourceType

API = LIST_GROUPS


async def handle(ctx: RequestContext, request: ListGroupsRequest) -> ListGroupsResponse:
    version = ctx.api_version
    coord = _groups.coordinator_of(ctx)
    if coord is None:
        return ListGroupsResponse(
            throttle_time_ms=0, error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE
        )
    r = coord.list_groups(
        request.states_filter if version >= 4 else (),
        request.types_filter if version >= 5 else (),
    )
    # DESCRIBE on the cluster lists every group; otherwise only the groups one may describe
    listed = r.groups
    if ctx.broker.authorizer is not None and not ctx.authorize_cluster(AclOperation.DESCRIBE):
        listed = [
            g
            for g in listed
            if ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, g.group_id)
        ]
    return ListGroupsResponse(
        throttle_time_ms=0,
        error_code=r.error,
        groups=[
            ListGroupsResponse.ListedGroup(
                group_id=g.group_id,
                protocol_type=g.protocol_type,
                group_state=g.state if version >= 4 else "",
                group_type=g.group_type if version >= 5 else "",
            )
            for g in listed
        ],
    )
