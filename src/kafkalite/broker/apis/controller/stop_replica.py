"""StopReplica (key 5), cluster mode only: the controller tells this broker to stop hosting partitions
(stop fetching, and delete the log when the topic is deleted or the replica moved away).

A stale controller or broker epoch gets Kafka's error and changes nothing.
"""

from __future__ import annotations

import logging

from kafkalite.broker.context import RequestContext
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.cluster import (
    STOP_REPLICA,
    StopReplicaRequest,
    StopReplicaResponse,
)
from kafkalite.security.acl import AclOperation

API = STOP_REPLICA
CLUSTER_ONLY = True
log = logging.getLogger("kafkalite.broker.stop_replica")


def _partitions(request: StopReplicaRequest, version: int) -> list[tuple[tuple[str, int], bool]]:
    if version == 0:
        return [
            ((p.topic_name, p.partition_index), bool(request.delete_partitions))
            for p in request.ungrouped_partitions
        ]
    if version <= 2:
        return [
            ((t.name, i), bool(request.delete_partitions))
            for t in request.topics
            for i in t.partition_indexes
        ]
    return [
        ((t.topic_name, ps.partition_index), bool(ps.delete_partition))
        for t in request.topic_states
        for ps in t.partition_states
    ]


async def handle(ctx: RequestContext, request: StopReplicaRequest) -> StopReplicaResponse:
    if not ctx.authorize_cluster(AclOperation.CLUSTER_ACTION):
        return StopReplicaResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    v = ctx.api_version
    zk = ctx.broker.zk_broker
    assert zk is not None  # CLUSTER_ONLY
    parts = _partitions(request, v)
    refused = await zk.check_controller_request(
        request.controller_id,
        request.controller_epoch,
        request.broker_epoch if v >= 1 else -1,
        "StopReplica",
        ctx.connection.peer,
    )
    PE = StopReplicaResponse.StopReplicaPartitionError
    if refused is not None:
        log.warning("%s", refused.reason)
        return StopReplicaResponse(error_code=refused.error, partition_errors=[])
    errors = await zk.apply_stop_replica(parts)
    return StopReplicaResponse(
        error_code=ErrorCode.NO_ERROR,
        partition_errors=[
            PE(topic_name=t, partition_index=p, error_code=e) for (t, p), e in errors.items()
        ],
    )
