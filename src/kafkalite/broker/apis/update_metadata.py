"""UpdateMetadata (key 6), cluster mode only: the controller's view of live brokers and every partition's
leader, epoch, replicas, ISR and offline replicas, written into this broker's MetadataCache.

A stale controller or broker epoch gets Kafka's error and changes nothing.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from kafkalite.broker.context import RequestContext
from kafkalite.cluster.metadata_cache import BrokerEndpoint, PartitionMetadata
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.cluster import (
    UPDATE_METADATA,
    UpdateMetadataResponse,
    grouped_partition_states,
)
from kafkalite.security.acl import AclOperation

API = UPDATE_METADATA
CLUSTER_ONLY = True
log = logging.getLogger("kafkalite.broker.update_metadata")


def _brokers(request: Any, version: int) -> list[BrokerEndpoint]:
    out = []
    for b in request.live_brokers:
        if version == 0:
            host, port = b.v0_host, b.v0_port
        else:
            ep = b.endpoints[0] if b.endpoints else None
            if ep is None:
                continue
            host, port = ep.host, ep.port
        out.append(BrokerEndpoint(b.id, host, port, b.rack if version >= 2 else None))
    return out


def _states(request: Any, version: int) -> tuple[list[PartitionMetadata], dict[str, uuid.UUID]]:
    states: list[PartitionMetadata] = []
    topic_ids: dict[str, uuid.UUID] = {}
    for topic, tid, ps in grouped_partition_states(request, version >= 5, version >= 7):
        if tid is not None:
            topic_ids[topic] = tid
        states.append(
            PartitionMetadata(
                topic,
                ps.partition_index,
                ps.leader,
                ps.leader_epoch,
                tuple(ps.replicas),
                tuple(ps.isr),
                tuple(ps.offline_replicas) if version >= 4 else (),
                ps.zk_version,
            )
        )
    return states, topic_ids


async def handle(ctx: RequestContext, request: Any) -> Any:
    if not ctx.authorize_cluster(AclOperation.CLUSTER_ACTION):
        return UpdateMetadataResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    v = ctx.api_version
    zk = ctx.broker.zk_broker
    assert zk is not None  # CLUSTER_ONLY
    refused = await zk.check_controller_request(
        request.controller_id,
        request.controller_epoch,
        request.broker_epoch if v >= 5 else -1,
        "UpdateMetadata",
        ctx.connection.peer,
    )
    if refused is not None:
        log.warning("%s", refused.reason)
        return UpdateMetadataResponse(error_code=refused.error)
    states, topic_ids = _states(request, v)
    zk.apply_update_metadata(_brokers(request, v), states, topic_ids)
    return UpdateMetadataResponse(error_code=ErrorCode.NO_ERROR)
