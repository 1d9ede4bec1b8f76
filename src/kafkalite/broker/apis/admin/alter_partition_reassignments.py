"""AlterPartitionReassignments (key 45, KIP-455), cluster mode, answered by the controller: start, replace
or cancel (null replicas) partition moves; a broker that is not the controller answers NOT_CONTROLLER.
"""

from __future__ import annotations

from kafkalite.broker.apis.admin._controller import active_controller
from kafkalite.broker.context import RequestContext
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.reassignments import (
    ALTER_PARTITION_REASSIGNMENTS,
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
)
from kafkalite.security.acl import AclOperation

API = ALTER_PARTITION_REASSIGNMENTS
CLUSTER_ONLY = True
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
    controller = active_controller(ctx)
    if controller is None:
        return _top_level(ErrorCode.NOT_CONTROLLER, "This broker is not the controller.")
    targets: dict[tuple[str, int], tuple[int, ...] | None] = {}
    for t in request.topics:
        for p in t.partitions:
            replicas = p.replicas
            targets[(t.name, p.partition_index)] = tuple(replicas) if replicas is not None else None
    reply = await controller.alter_partition_reassignments(targets)
    if reply is None:
        return _top_level(ErrorCode.NOT_CONTROLLER, "This broker is no longer the controller.")
    by_topic: dict[str, list[_Partition]] = {}
    for (topic, part), (code, message) in reply.results.items():
        by_topic.setdefault(topic, []).append(
            _Partition(partition_index=part, error_code=code, error_message=message)
        )
    return AlterPartitionReassignmentsResponse(
        throttle_time_ms=0,
        error_code=ErrorCode.NO_ERROR,
        error_message=None,
        responses=[_Topic(name=t, partitions=ps) for t, ps in by_topic.items()],
    )
