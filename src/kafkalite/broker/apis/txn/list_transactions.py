"""ListTransactions (key 66, KIP-664; v1 adds KIP-994's duration filter): the transactional ids this broker
coordinates, filtered by state, producer id and how long their transaction has been open.
"""

from __future__ import annotations

from kafkalite.broker.apis.txn._txn_common import coordinator_or_error
from kafkalite.broker.context import RequestContext
from kafkalite.protocol.messages.txn import (
    LIST_TRANSACTIONS,
    ListTransactionsRequest,
    ListTransactionsResponse,
)
from kafkalite.security.acl import AclOperation, ResourceType

API = LIST_TRANSACTIONS
_State = ListTransactionsResponse.TransactionState


async def handle(ctx: RequestContext, request: ListTransactionsRequest) -> ListTransactionsResponse:
    coord, code = coordinator_or_error(ctx)
    if coord is None:
        return ListTransactionsResponse(
            throttle_time_ms=0, error_code=code, unknown_state_filters=[], transaction_states=[]
        )
    result = coord.list_transactions(
        list(request.state_filters),
        list(request.producer_id_filters),
        request.duration_filter if ctx.api_version >= 1 else -1,
    )
    return ListTransactionsResponse(
        throttle_time_ms=0,
        error_code=result.error_code,
        unknown_state_filters=list(result.unknown_state_filters),
        transaction_states=[
            _State(
                transactional_id=t.transactional_id,
                producer_id=t.producer_id,
                transaction_state=t.transaction_state,
            )
            for t in result.transaction_states
            if ctx.authorize(
                AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, t.transactional_id
            )
        ],
    )
