"""EndTxn (key 26) v0-3: commit or abort the producer's transaction. Answered once PrepareCommit /
PrepareAbort is in `__transaction_state`; the markers are then written by the coordinator's channel.
"""

from __future__ import annotations

from kafkalite.broker.apis.txn._txn_common import coordinator_or_error, old_fenced_code
from kafkalite.broker.context import RequestContext
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.txn import END_TXN, EndTxnRequest, EndTxnResponse
from kafkalite.security.acl import AclOperation, ResourceType

API = END_TXN


async def handle(ctx: RequestContext, request: EndTxnRequest) -> EndTxnResponse:
    coord, code = coordinator_or_error(ctx)
    if not ctx.authorize(
        AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id
    ):
        code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif coord is not None:
        code = await coord.end_txn(
            request.transactional_id,
            request.producer_id,
            request.producer_epoch,
            bool(request.committed),
        )
    return EndTxnResponse(throttle_time_ms=0, error_code=old_fenced_code(code, ctx.api_version, 2))
