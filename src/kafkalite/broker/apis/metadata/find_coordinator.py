"""FindCoordinator (key 10) v0-4: the node coordinating a group or a transactional id, single or batched keys.

A group's coordinator is the leader of its `__consumer_offsets` partition, a transactional id's the leader of
its `__transaction_state` partition, as the metadata cache knows them.
"""

from __future__ import annotations

import logging

from kafkalite.broker.context import RequestContext
from kafkalite.broker.coordinators import groups as _groups
from kafkalite.cluster.metadata_cache import BrokerEndpoint
from kafkalite.coordinator import OFFSETS_TOPIC
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.groups import (
    FIND_COORDINATOR,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)
from kafkalite.security.acl import AclOperation, ResourceType

API = FIND_COORDINATOR
log = logging.getLogger("kafkalite.broker.find_coordinator")

KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1

_NONE = BrokerEndpoint(-1, "", -1)


def _lookup(
    ctx: RequestContext, key: str, key_type: int
) -> tuple[ErrorCode, str | None, BrokerEndpoint]:
    broker = ctx.broker
    if key_type == KEY_TYPE_GROUP and not ctx.authorize(
        AclOperation.DESCRIBE, ResourceType.GROUP, key
    ):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, None, _NONE
    if key_type == KEY_TYPE_TRANSACTION and not ctx.authorize(
        AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key
    ):
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None, _NONE
    if key_type == KEY_TYPE_GROUP:
        coord = _groups.coordinator_of(ctx)
        if coord is None or not coord.active:
            return (
                ErrorCode.COORDINATOR_NOT_AVAILABLE,
                "the group coordinator is not running",
                _NONE,
            )
        partition = coord.partition_for(key)
        node = broker.metadata_cache.leader_endpoint(OFFSETS_TOPIC, partition)
        if node is None and OFFSETS_TOPIC not in broker.metadata_cache:
            broker.groups.ensure_offsets_topic()
        if node is None:
            return (
                ErrorCode.COORDINATOR_NOT_AVAILABLE,
                f"the group's partition {OFFSETS_TOPIC}-{partition} has no leader",
                _NONE,
            )
        return ErrorCode.NO_ERROR, None, node
    if key_type == KEY_TYPE_TRANSACTION:
        txn = broker.transactions.coordinator
        if txn is None or not txn.active:
            return (
                ErrorCode.COORDINATOR_NOT_AVAILABLE,
                "the transaction coordinator is not running",
                _NONE,
            )
        topic = broker.transactions.topic
        partition = txn.partition_for(key)
        node = broker.metadata_cache.leader_endpoint(topic, partition)
        if node is None and topic not in broker.metadata_cache:
            broker.transactions.ensure_topic()
        if node is None:
            return (
                ErrorCode.COORDINATOR_NOT_AVAILABLE,
                f"the transactional id's partition {topic}-{partition} has no leader",
                _NONE,
            )
        return ErrorCode.NO_ERROR, None, node
    return ErrorCode.INVALID_REQUEST, f"unknown coordinator key type {key_type}", _NONE


def _lookup_for_listener(
    ctx: RequestContext, key: str, key_type: int
) -> tuple[ErrorCode, str | None, BrokerEndpoint]:
    """The coordinator as reached through the listener the client connected to."""
    code, msg, node = _lookup(ctx, key, key_type)
    if code != ErrorCode.NO_ERROR:
        return code, msg, node
    seen = node.for_listener(ctx.connection.listener_name)
    if seen is None:
        return (
            ErrorCode.COORDINATOR_NOT_AVAILABLE,
            f"the coordinator has no listener named {ctx.connection.listener_name}",
            _NONE,
        )
    return code, msg, seen


async def handle(ctx: RequestContext, request: FindCoordinatorRequest) -> FindCoordinatorResponse:
    version = ctx.api_version
    key_type = request.key_type if version >= 1 else KEY_TYPE_GROUP
    if version >= 4:
        coordinators = []
        for key in request.coordinator_keys:
            code, msg, node = _lookup_for_listener(ctx, key, key_type)
            coordinators.append(
                FindCoordinatorResponse.Coordinator(
                    key=key,
                    node_id=node.broker_id,
                    host=node.host,
                    port=node.port,
                    error_code=code,
                    error_message=msg,
                )
            )
        return FindCoordinatorResponse(throttle_time_ms=0, coordinators=coordinators)
    code, msg, node = _lookup_for_listener(ctx, request.key, key_type)
    return FindCoordinatorResponse(
        throttle_time_ms=0,
        error_code=code,
        error_message=msg if version >= 1 else None,
        node_id=node.broker_id,
        host=node.host,
        port=node.port,
    )
