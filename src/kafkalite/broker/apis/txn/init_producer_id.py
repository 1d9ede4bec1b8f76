"""InitProducerId (key 22): idempotent producers get a fresh producer id (epoch 0) per request — in a
cluster from this broker's block in /latest_producer_id_block, so ids are unique across brokers.

A transactional id goes to the transaction coordinator: its producer id with a bumped epoch, fencing the
older instance (and aborting the transaction it left open).
"""

from __future__ import annotations

import itertools
import time

from kafkalite.broker.apis.txn._txn_common import coordinator_or_error, old_fenced_code
from kafkalite.broker.context import RequestContext
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.txn import (
    INIT_PRODUCER_ID,
    InitProducerIdRequest,
    InitProducerIdResponse,
)
from kafkalite.security.acl import AclOperation, ResourceType

API = INIT_PRODUCER_ID

# ids from the wall clock (ms) times 1024 plus a counter: distinct across restarts without a stored block
_BASE = int(time.time() * 1000) << 10
_counter = itertools.count()


def next_producer_id() -> int:
    return _BASE + next(_counter)


async def _new_id(ctx: RequestContext) -> int:
    zk = ctx.broker.zk_broker
    return await zk.next_producer_id() if zk is not None else next_producer_id()


def _denied(ctx: RequestContext, transactional_id: str | None) -> ErrorCode:
    """WRITE on the transactional id; without one, IDEMPOTENT_WRITE on the cluster or WRITE on
    some topic (Kafka's rule for idempotent producers)."""
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return ErrorCode.NO_ERROR
    if transactional_id is not None:
        if ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
            return ErrorCode.NO_ERROR
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    if ctx.authorize_cluster(AclOperation.IDEMPOTENT_WRITE) or authorizer.authorize_any(
        ctx.principal, ctx.client_host, AclOperation.WRITE, ResourceType.TOPIC
    ):
        return ErrorCode.NO_ERROR
    return ErrorCode.CLUSTER_AUTHORIZATION_FAILED


async def handle(ctx: RequestContext, request: InitProducerIdRequest) -> InitProducerIdResponse:
    denied = _denied(ctx, request.transactional_id)
    if denied:
        return InitProducerIdResponse(
            throttle_time_ms=0, error_code=denied, producer_id=-1, producer_epoch=-1
        )
    if request.transactional_id is not None:
        coord, code = coordinator_or_error(ctx)
        if coord is None:
            return InitProducerIdResponse(
                throttle_time_ms=0, error_code=code, producer_id=-1, producer_epoch=-1
            )
        expected = (
            (request.producer_id, request.producer_epoch) if ctx.api_version >= 3 else (-1, -1)
        )
        result = await coord.init_producer_id(
            request.transactional_id, request.transaction_timeout_ms, *expected
        )
        return InitProducerIdResponse(
            throttle_time_ms=0,
            error_code=old_fenced_code(result.error, ctx.api_version, 4),
            producer_id=result.producer_id,
            producer_epoch=result.producer_epoch,
        )
    if ctx.api_version >= 3 and request.producer_id >= 0:
        # bumping the epoch of an existing idempotent producer (KIP-360)
        epoch = request.producer_epoch + 1
        if epoch > 32767:
            return InitProducerIdResponse(
                throttle_time_ms=0, error_code=0, producer_id=await _new_id(ctx), producer_epoch=0
            )
        return InitProducerIdResponse(
            throttle_time_ms=0, error_code=0, producer_id=request.producer_id, producer_epoch=epoch
        )
    return InitProducerIdResponse(
        throttle_time_ms=0, error_code=0, producer_id=await _new_id(ctx), producer_epoch=0
    )
