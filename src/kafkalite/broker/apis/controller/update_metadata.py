"""UpdateMetadata (key 6), cluster mode only: the controller's view of live brokers and every partition's
leader, epoch, replicas, ISR and offline replicas, written into this broker's MetadataCache.

A stale controller or broker epoch gets Kafka's error and changes nothing.
"""

from __future__ import annotations

import logging
import uuid

from kafkalite.broker.context import RequestContext
from kafkalite.cluster.metadata_cache import (
    SECURITY_PROTOCOL_IDS,
    BrokerEndpoint,
    ListenerEndpoint,
    PartitionMetadata,
)
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.cluster import (
    UPDATE_METADATA,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
    grouped_partition_states,
)
from kafkalite.security.acl import AclOperation

API = UPDATE_METADATA
CLUSTER_ONLY = True
log = logging.getLogger("kafkalite.broker.update_metadata")


_PROTOCOL_NAMES = {v: k for k, v in SECURITY_PROTOCOL_IDS.items()}


def _brokers(
    request: UpdateMetadataRequest, version: int, inter_broker_listener: str
) -> list[BrokerEndpoint]:
    """Live brokers with every listener; host and port are those of the inter-broker listener."""
    out = []
    for b in request.live_brokers:
        rack = b.rack if version >= 2 else None
        if version == 0:
            out.append(BrokerEndpoint(b.id, b.v0_host, b.v0_port, rack))
            continue
        listeners = tuple(
            ListenerEndpoint(
                ep.listener if version >= 3 else _PROTOCOL_NAMES.get(ep.security_protocol, ""),
                ep.host,
                ep.port,
                _PROTOCOL_NAMES.get(ep.security_protocol, "PLAINTEXT"),
            )
            for ep in b.endpoints
        )
        if not listeners:
            continue
        inter = next((ep for ep in listeners if ep.listener == inter_broker_listener), listeners[0])
        out.append(BrokerEndpoint(b.id, inter.host, inter.port, rack, listeners))
    return out


def _states(
    request: UpdateMetadataRequest, version: int
) -> tuple[list[PartitionMetadata], dict[str, uuid.UUID]]:
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


async def handle(ctx: RequestContext, request: UpdateMetadataRequest) -> UpdateMetadataResponse:
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
    brokers = _brokers(request, v, ctx.broker.inter_broker_listener)
    zk.apply_update_metadata(brokers, states, topic_ids)
    return UpdateMetadataResponse(error_code=ErrorCode.NO_ERROR)
