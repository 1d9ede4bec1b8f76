"""ListPartitionReassignments (key 46, KIP-455), answered by the controller: the partitions (asked for,
or all) with a move in flight, with their replicas and adding / removing replicas (none on one broker).
"""

from __future__ import annotations

from kafkalite.broker.apis.admin._controller import is_single_node, one_broker_view
from kafkalite.broker.context import RequestContext
from kafkalite.cluster.controller.reassignment import ReplicaAssignment
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.reassignments import (
    LIST_PARTITION_REASSIGNMENTS,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from kafkalite.security.acl import AclOperation

API = LIST_PARTITION_REASSIGNMENTS
_Topic = ListPartitionReassignmentsResponse.OngoingTopicReassignment
_Partition = _Topic.OngoingPartitionReassignment


def _top_level(code: ErrorCode, message: str) -> ListPartitionReassignmentsResponse:
    return ListPartitionReassignmentsResponse(
        throttle_time_ms=0, error_code=code, error_message=message, topics=[]
    )


async def handle(
    ctx: RequestContext, request: ListPartitionReassignmentsRequest
) -> ListPartitionReassignmentsResponse:
    if not ctx.authorize_cluster(AclOperation.DESCRIBE):
        return _top_level(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
    zk = ctx.broker.zk_broker
    controller = zk.controller if zk is not None else None
    asked = (
        [(t.name, p) for t in request.topics for p in t.partition_indexes]
        if request.topics is not None
        else None
    )
    moving: dict[tuple[str, int], ReplicaAssignment] | None = None
    if is_single_node(ctx):
        view = one_broker_view(ctx)
        tps = asked if asked is not None else list(view.assignments)
        moving = {tp: a for tp in tps if (a := view.assignment(tp)).is_being_reassigned}
    elif controller is not None:
        moving = controller.list_partition_reassignments(asked)
    if moving is None:
        return _top_level(ErrorCode.NOT_CONTROLLER, "This broker is not the controller.")
    by_topic: dict[str, list[_Partition]] = {}
    for (topic, part), a in sorted(moving.items()):
        by_topic.setdefault(topic, []).append(
            _Partition(
                partition_index=part,
                replicas=list(a.replicas),
                adding_replicas=list(a.adding),
                removing_replicas=list(a.removing),
            )
        )
    return ListPartitionReassignmentsResponse(
        throttle_time_ms=0,
        error_code=ErrorCode.NO_ERROR,
        error_message=None,
        topics=[_Topic(name=t, partitions=ps) for t, ps in by_topic.items()],
    )
