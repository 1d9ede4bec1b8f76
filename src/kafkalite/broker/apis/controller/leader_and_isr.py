"""LeaderAndIsr (key 4), cluster mode only: the controller tells this broker which partitions it leads
or follows, at which leader epoch, with which ISR and replicas; applied through the ReplicaManager.

A stale controller or broker epoch gets Kafka's error and changes nothing.
"""

from __future__ import annotations

import logging
import uuid

from kafkalite.broker.context import RequestContext
from kafkalite.cluster.partition import LeaderAndIsrState
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.cluster import (
    LEADER_AND_ISR,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    grouped_partition_states,
)
from kafkalite.security.acl import AclOperation

API = LEADER_AND_ISR
CLUSTER_ONLY = True
log = logging.getLogger("kafkalite.broker.leader_and_isr")


def _states(
    request: LeaderAndIsrRequest, version: int
) -> tuple[dict[tuple[str, int], LeaderAndIsrState], dict[str, uuid.UUID | None]]:
    states: dict[tuple[str, int], LeaderAndIsrState] = {}
    topic_ids: dict[str, uuid.UUID | None] = {}
    for topic, tid, ps in grouped_partition_states(request, version >= 2, version >= 5):
        topic_ids[topic] = tid
        states[(topic, ps.partition_index)] = LeaderAndIsrState(
            ps.leader,
            ps.leader_epoch,
            tuple(ps.isr),
            tuple(ps.replicas),
            ps.partition_epoch,
            bool(ps.is_new) if version >= 1 else False,
        )
    return states, topic_ids


async def handle(ctx: RequestContext, request: LeaderAndIsrRequest) -> LeaderAndIsrResponse:
    if not ctx.authorize_cluster(AclOperation.CLUSTER_ACTION):
        return LeaderAndIsrResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    v = ctx.api_version
    zk = ctx.broker.zk_broker
    assert zk is not None  # CLUSTER_ONLY
    states, topic_ids = _states(request, v)
    refused = await zk.check_controller_request(
        request.controller_id,
        request.controller_epoch,
        request.broker_epoch if v >= 2 else -1,
        "LeaderAndIsr",
        ctx.connection.peer,
    )
    if refused is not None:
        log.warning("%s", refused.reason)
        errors = {tp: refused.error for tp in states}
        return _response(v, refused.error, errors, topic_ids)
    errors = await zk.apply_leader_and_isr(states, topic_ids)
    return _response(v, ErrorCode.NO_ERROR, errors, topic_ids)


def _response(
    v: int,
    code: ErrorCode,
    errors: dict[tuple[str, int], ErrorCode],
    topic_ids: dict[str, uuid.UUID | None],
) -> LeaderAndIsrResponse:
    PE = LeaderAndIsrResponse.LeaderAndIsrPartitionError
    if v < 5:
        return LeaderAndIsrResponse(
            error_code=code,
            partition_errors=[
                PE(topic_name=t, partition_index=p, error_code=e) for (t, p), e in errors.items()
            ],
        )
    TE = LeaderAndIsrResponse.LeaderAndIsrTopicError
    by_topic: dict[
        str, list[LeaderAndIsrResponse.LeaderAndIsrTopicError.LeaderAndIsrPartitionError]
    ] = {}
    for (t, p), e in errors.items():
        by_topic.setdefault(t, []).append(
            TE.LeaderAndIsrPartitionError(partition_index=p, error_code=e)
        )
    return LeaderAndIsrResponse(
        error_code=code,
        topics=[TE(topic_id=topic_ids.get(t), partition_errors=ps) for t, ps in by_topic.items()],
    )
