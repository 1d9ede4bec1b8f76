"""ControlledShutdown (key 7), cluster mode only, answered by the controller: move leadership off the
broker that is shutting down and answer with the partitions it still leads.

Every other broker answers NOT_CONTROLLER (the sender asks ZooKeeper who the controller is and retries).
"""

from __future__ import annotations

from kafkalite.broker.context import RequestContext
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.cluster import (
    CONTROLLED_SHUTDOWN,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
)
from kafkalite.security.acl import AclOperation

API = CONTROLLED_SHUTDOWN
CLUSTER_ONLY = True


async def handle(
    ctx: RequestContext, request: ControlledShutdownRequest
) -> ControlledShutdownResponse:
    if not ctx.authorize_cluster(AclOperation.CLUSTER_ACTION):
        return ControlledShutdownResponse(
            error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, remaining_partitions=[]
        )
    zk = ctx.broker.zk_broker
    controller = zk.controller if zk is not None else None
    if controller is None or not controller.active:
        return ControlledShutdownResponse(
            error_code=ErrorCode.NOT_CONTROLLER, remaining_partitions=[]
        )
    epoch = request.broker_epoch if ctx.api_version >= 2 else -1
    reply = await controller.controlled_shutdown(request.broker_id, epoch)
    R = ControlledShutdownResponse.RemainingPartition
    return ControlledShutdownResponse(
        error_code=reply.error,
        remaining_partitions=[R(topic_name=t, partition_index=p) for t, p in reply.remaining],
    )
