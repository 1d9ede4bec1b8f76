"""ConsumerGroupDescribe (key 69, KIP-848): a consumer group's epochs, assignor and members with their
current and target assignments (topic names resolved from the metadata cache).
"""

from __future__ import annotations

from kafkalite.broker.context import RequestContext
from kafkalite.broker.coordinators import groups as _groups
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.consumer_groups import (
    CONSUMER_GROUP_DESCRIBE,
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
)
from kafkalite.security.acl import AUTHORIZED_OPERATIONS_OMITTED, AclOperation, ResourceType

API = CONSUMER_GROUP_DESCRIBE
_Group = ConsumerGroupDescribeResponse.DescribedGroup
_Member = _Group.Member
_Assignment = _Member.Assignment


async def handle(
    ctx: RequestContext, request: ConsumerGroupDescribeRequest
) -> ConsumerGroupDescribeResponse:
    coord = _groups.coordinator_of(ctx)
    groups = []
    allowed = [
        g for g in request.group_ids if ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, g)
    ]
    found = (
        {d.group_id: d for d in coord.describe_consumer_groups(allowed)}
        if coord is not None
        else {}
    )
    for gid in request.group_ids:
        d = found.get(gid)
        if d is None:
            code = (
                ErrorCode.GROUP_AUTHORIZATION_FAILED
                if gid not in allowed
                else ErrorCode.COORDINATOR_NOT_AVAILABLE
            )
            groups.append(
                _Group(
                    error_code=int(code),
                    error_message=None,
                    group_id=gid,
                    group_state="",
                    group_epoch=-1,
                    assignment_epoch=-1,
                    assignor_name="",
                    members=[],
                )
            )
            continue
        groups.append(
            _Group(
                error_code=int(d.error),
                error_message=d.message,
                group_id=gid,
                group_state=d.state,
                group_epoch=d.group_epoch,
                assignment_epoch=d.assignment_epoch,
                assignor_name=d.assignor,
                members=[
                    _Member(
                        member_id=m.member_id,
                        instance_id=m.instance_id,
                        rack_id=m.rack_id,
                        member_epoch=m.member_epoch,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        subscribed_topic_names=list(m.subscribed_topic_names),
                        subscribed_topic_regex=m.subscribed_topic_regex,
                        assignment=_groups.described_assignment(ctx, m.assignment, _Assignment),
                        target_assignment=_groups.described_assignment(
                            ctx, m.target_assignment, _Assignment
                        ),
                        member_type=1,
                    )
                    for m in d.members
                ],
                authorized_operations=(
                    ctx.authorized_operations(ResourceType.GROUP, gid)
                    if request.include_authorized_operations and d.error == ErrorCode.NO_ERROR
                    else AUTHORIZED_OPERATIONS_OMITTED
                ),
            )
        )
    return ConsumerGroupDescribeResponse(throttle_time_ms=0, groups=groups)
