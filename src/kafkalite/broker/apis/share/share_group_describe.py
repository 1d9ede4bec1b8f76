"""ShareGroupDescribe (key 77, KIP-932): a share group's epochs, assignor and members with the
partitions each may fetch (topic names resolved from the metadata cache).
"""

from __future__ import annotations

from kafkalite.broker.context import RequestContext
from kafkalite.broker.coordinators import groups as _groups
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.share_groups import (
    SHARE_GROUP_DESCRIBE,
    ShareGroupDescribeRequest,
    ShareGroupDescribeResponse,
)
from kafkalite.security.acl import AUTHORIZED_OPERATIONS_OMITTED, AclOperation, ResourceType

API = SHARE_GROUP_DESCRIBE
_Group = ShareGroupDescribeResponse.DescribedGroup
_Member = _Group.Member
_Assignment = _Member.Assignment


def _empty(gid: str, code: ErrorCode, message: str | None = None) -> _Group:
    return _Group(
        error_code=int(code),
        error_message=message,
        group_id=gid,
        group_state="",
        group_epoch=-1,
        assignment_epoch=-1,
        assignor_name="",
        members=[],
        authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
    )


async def handle(
    ctx: RequestContext, request: ShareGroupDescribeRequest
) -> ShareGroupDescribeResponse:
    coord = _groups.coordinator_of(ctx)
    allowed = [
        g for g in request.group_ids if ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, g)
    ]
    found = (
        {d.group_id: d for d in coord.share_group_describe(allowed)} if coord is not None else {}
    )
    groups = []
    for gid in request.group_ids:
        d = found.get(gid)
        if d is None:
            code = (
                ErrorCode.GROUP_AUTHORIZATION_FAILED
                if gid not in allowed
                else ErrorCode.COORDINATOR_NOT_AVAILABLE
            )
            groups.append(_empty(gid, code))
            continue
        if d.error:
            groups.append(_empty(gid, d.error, d.message))
            continue
        ops = AUTHORIZED_OPERATIONS_OMITTED
        if request.include_authorized_operations:
            ops = ctx.authorized_operations(ResourceType.GROUP, gid)
        groups.append(
            _Group(
                error_code=0,
                error_message=None,
                group_id=gid,
                group_state=d.state,
                group_epoch=d.group_epoch,
                assignment_epoch=d.assignment_epoch,
                assignor_name=d.assignor,
                members=[
                    _Member(
                        member_id=m.member_id,
                        rack_id=m.rack_id,
                        member_epoch=m.member_epoch,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        subscribed_topic_names=list(m.subscribed_topic_names),
                        assignment=_groups.described_assignment(ctx, m.assignment, _Assignment),
                    )
                    for m in d.members
                ],
                authorized_operations=ops,
            )
        )
    return ShareGroupDescribeResponse(throttle_time_ms=0, groups=groups)
