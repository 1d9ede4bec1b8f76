"""AlterPartitionReassignments (key 45, KIP-455), answered by the controller: start, replace or cancel
(null replicas) partition moves; a broker that is not the controller answers NOT_CONTROLLER.
"""

from __future__ import annotations

from kafkalite.broker.apis.admin._controller import (
    active_controller,
    is_single_node,
    one_broker_view,
)
from kafkalite.broker.context import RequestContext
from kafkalite.cluster.controller.reassignment import check_reassignments
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.reassignments import (
    ALTER_PARTITION_REASSIGNMENTS,
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
)
from kafkalite.security.acl import AclOperation

API = ALTER_PARTITION_REASSIGNMENTS
_Topic = AlterPartitionReassignmentsResponse.ReassignableTopicResponse
_Partition = _Topic.ReassignablePartitionResponse


def _top_level(code: ErrorCode, message: str) -> AlterPartitionReassignmentsResponse:
    return AlterPartitionReassignmentsResponse(
        throttle_time_ms=0, error_code=code, error_message=message, responses=[]
    )


async def handle(
    ctx: RequestContext, request: AlterPartitionReassignmentsRequest
) -> AlterPartitionReassignmentsResponse:
    if not ctx.authorize_cluster(AclOperation.ALTER):
        return _top_level(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
    targets: dict[tuple[str, int], tuple[int, ...] | None] = {}
    for t in request.topics:
        for p in t.partitions:
            replicas = p.replicas
            targets[(t.name, p.partition_index)] = tuple(replicas) if replicas is not None else None
    controller = active_controller(ctx)
    if is_single_node(ctx):
        # a one-broker cluster checks as the controller does; any target it accepts is the replica
        # set the partition already has (no other broker is live), so no move starts
        view = one_broker_view(ctx)
        results, _ = check_reassignments(targets, view.assignment, view.live, ())
    elif controller is None:
        return _top_level(ErrorCode.NOT_CONTROLLER, "This broker is not the controller.")
    else:
        reply = await controller.alter_partition_reassignments(targets)
        if reply is None:
            return _top_level(ErrorCode.NOT_CONTROLLER, "This broker is no longer the controller.")
        results = reply.results
    by_topic: dict[str, list[_Partition]] = {}
    for (topic, part), (code, message) in results.items():
        by_topic.setdefault(topic, []).append(
            _Partition(partition_index=part, error_code=code, error_message=message)
        )
    return AlterPartitionReassignmentsResponse(
        throttle_time_ms=0,
        error_code=ErrorCode.NO_ERROR,
        error_message=None,
        responses=[_Topic(name=t, partitions=ps) for t, ps in by_topic.items()],
    )
