"""InitProducerId (key 22) for idempotent producers: a fresh producer id (epoch 0) per request — in a
cluster from this broker's block in /latest_producer_id_block, so ids are unique across brokers.

Transactional ids need a transaction coordinator, which this broker does not have yet: they get an error.
"""

from __future__ import annotations

import itertools
import logging
import time
from typing import Any

from kafkalite.broker.context import RequestContext
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.txn import INIT_PRODUCER_ID, InitProducerIdResponse

API = INIT_PRODUCER_ID
log = logging.getLogger("kafkalite.broker.init_producer_id")

# ids from the wall clock (ms) times 1024 plus a counter: distinct across restarts without a stored block
_BASE = int(time.time() * 1000) << 10
_counter = itertools.count()


def next_producer_id() -> int:
    return _BASE + next(_counter)


async def _new_id(ctx: RequestContext) -> int:
    zk = ctx.broker.zk_broker
    return await zk.next_producer_id() if zk is not None else next_producer_id()


async def handle(ctx: RequestContext, request: Any) -> Any:
    if request.transactional_id is not None:
        log.warning(
            "InitProducerId for transactional id %r from %s refused: transactions are not supported",
            request.transactional_id,
            ctx.client_id,
        )
        return InitProducerIdResponse(
            throttle_time_ms=0,
            error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE,
            producer_id=-1,
            producer_epoch=-1,
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
