"""DescribeTransactions (key 65, KIP-664): state, producer id and epoch, timeout, start time and partitions
of transactional ids this broker coordinates (NOT_COORDINATOR for the others).
"""

from __future__ import annotations

from kafkalite.broker.apis.txn._txn_common import coordinator_or_error
from kafkalite.broker.context import RequestContext
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.txn import (
    DESCRIBE_TRANSACTIONS,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
)
from kafkalite.security.acl import AclOperation, ResourceType

API = DESCRIBE_TRANSACTIONS
_State = DescribeTransactionsResponse.TransactionState
_Topic = _State.TopicData


async def handle(
    ctx: RequestContext, request: DescribeTransactionsRequest
) -> DescribeTransactionsResponse:
    coord, code = coordinator_or_error(ctx)
    states = []
    if coord is None:
        for tid in request.transactional_ids:
            states.append(
                _State(
                    error_code=code,
                    transactional_id=tid,
                    transaction_state="",
                    transaction_timeout_ms=0,
                    transaction_start_time_ms=-1,
                    producer_id=-1,
                    producer_epoch=-1,
                    topics=[],
                )
            )
    else:
        allowed = [
            tid
            for tid in request.transactional_ids
            if ctx.authorize(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, tid)
        ]
        for tid in request.transactional_ids:
            if tid not in allowed:
                states.append(
                    _State(
                        error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                        transactional_id=tid,
                        transaction_state="",
                        transaction_timeout_ms=0,
                        transaction_start_time_ms=-1,
                        producer_id=-1,
                        producer_epoch=-1,
                        topics=[],
                    )
                )
        for d in coord.describe_transactions(allowed) if allowed else ():
            states.append(
                _State(
                    error_code=d.error_code,
                    transactional_id=d.transactional_id,
                    transaction_state=d.transaction_state,
                    transaction_timeout_ms=d.transaction_timeout_ms,
                    transaction_start_time_ms=d.transaction_start_time_ms,
                    producer_id=d.producer_id,
                    producer_epoch=d.producer_epoch,
                    topics=[_Topic(topic=t, partitions=ps) for t, ps in sorted(d.topics.items())],
                )
            )
    return DescribeTransactionsResponse(throttle_time_ms=0, transaction_states=states)
