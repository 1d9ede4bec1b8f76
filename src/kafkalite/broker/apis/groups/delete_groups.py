"""DeleteGroups (key 42) v0-2: removes Empty groups and their committed offsets (tombstones appended first).

A group with members answers NON_EMPTY_GROUP; an unknown one GROUP_ID_NOT_FOUND.
"""

from __future__ import annotations

from kafkalite.broker.context import RequestContext
from kafkalite.broker.coordinators import groups as _groups
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.groups import (
    DELETE_GROUPS,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
)
from kafkalite.security.acl import AclOperation, ResourceType

API = DELETE_GROUPS


async def handle(ctx: RequestContext, request: DeleteGroupsRequest) -> DeleteGroupsResponse:
    coord = _groups.coordinator_of(ctx)
    names = list(request.groups_names)
    allowed = [g for g in names if ctx.authorize(AclOperation.DELETE, ResourceType.GROUP, g)]
    errors: dict[str, ErrorCode] = dict.fromkeys(names, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if coord is None:
        errors.update(dict.fromkeys(allowed, ErrorCode.COORDINATOR_NOT_AVAILABLE))
    elif allowed:
        errors.update(await coord.delete_groups(allowed))
    return DeleteGroupsResponse(
        throttle_time_ms=0,
        results=[
            DeleteGroupsResponse.DeletableGroupResult(group_id=g, error_code=errors[g])
            for g in dict.fromkeys(names)
        ],
    )
