"""FindCoordinator (key 10) v0-4: the node coordinating a group (or a transactional id), single or batched keys.

Also hosts the start/stop hooks that bring the group coordinator and `__consumer_offsets` up and down.
"""

from __future__ import annotations

import logging
from typing import Any

from kafkalite.broker.apis import _groups
from kafkalite.broker.context import RequestContext
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.groups import FIND_COORDINATOR, FindCoordinatorResponse

API = FIND_COORDINATOR
log = logging.getLogger("kafkalite.broker.find_coordinator")

KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1
_END_TXN_KEY = 26

on_startup = _groups.start
on_shutdown = _groups.stop


def _lookup(ctx: RequestContext, key: str, key_type: int) -> tuple[ErrorCode, str | None]:
    broker = ctx.broker
    if key_type == KEY_TYPE_GROUP:
        coord = _groups.coordinator_of(ctx)
        if coord is None or not coord.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, "the group coordinator is not running"
        if not coord.is_coordinator_for(key):
            return (
                ErrorCode.COORDINATOR_NOT_AVAILABLE,
                "the group's __consumer_offsets partition has no leader",
            )
        return ErrorCode.NO_ERROR, None
    if key_type == KEY_TYPE_TRANSACTION:
        if broker.dispatch.get(_END_TXN_KEY) is None:
            return (
                ErrorCode.COORDINATOR_NOT_AVAILABLE,
                "transactions are not supported by this broker",
            )
        return ErrorCode.NO_ERROR, None
    return ErrorCode.INVALID_REQUEST, f"unknown coordinator key type {key_type}"


async def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    listener = ctx.broker.advertised[0]
    node = ctx.broker.broker_id
    key_type = request.key_type if version >= 1 else KEY_TYPE_GROUP
    if version >= 4:
        coordinators = []
        for key in request.coordinator_keys:
            code, msg = _lookup(ctx, key, key_type)
            ok = code == ErrorCode.NO_ERROR
            coordinators.append(
                FindCoordinatorResponse.Coordinator(
                    key=key,
                    node_id=node if ok else -1,
                    host=listener.host if ok else "",
                    port=listener.port if ok else -1,
                    error_code=code,
                    error_message=msg,
                )
            )
        return FindCoordinatorResponse(throttle_time_ms=0, coordinators=coordinators)
    code, msg = _lookup(ctx, request.key, key_type)
    ok = code == ErrorCode.NO_ERROR
    return FindCoordinatorResponse(
        throttle_time_ms=0,
        error_code=code,
        error_message=msg if version >= 1 else None,
        node_id=node if ok else -1,
        host=listener.host if ok else "",
        port=listener.port if ok else -1,
    )
