"""DeleteGroups (key 42) v0-2: removes Empty groups and their committed offsets (tombstones appended first).

A group with members answers NON_EMPTY_GROUP; an unknown one GROUP_ID_NOT_FOUND.
"""

from __future__ import annotations

from typing import Any

from kafkalite.broker import groups as _groups
from kafkalite.broker.context import RequestContext
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.groups import DELETE_GROUPS, DeleteGroupsResponse

API = DELETE_GROUPS


async def handle(ctx: RequestContext, request: Any) -> Any:
    coord = _groups.coordinator_of(ctx)
    names = list(request.groups_names)
    if coord is None:
        errors = dict.fromkeys(names, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    else:
        errors = await coord.delete_groups(names)
    return DeleteGroupsResponse(
        throttle_time_ms=0,
        results=[
            DeleteGroupsResponse.DeletableGroupResult(group_id=g, error_code=errors[g])
            for g in dict.fromkeys(names)
        ],
    )
