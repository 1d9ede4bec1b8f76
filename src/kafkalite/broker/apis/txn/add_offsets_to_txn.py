"""AddOffsetsToTxn (key 25) v0-3: a transactional producer will commit a group's offsets in this
transaction; the coordinator adds the group's `__consumer_offsets` partition to it.
"""

from __future__ import annotations

from kafkalite.broker.apis.txn._txn_common import coordinator_or_error, old_fenced_code
from kafkalite.broker.context import RequestContext
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.txn import (
    ADD_OFFSETS_TO_TXN,
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
)
from kafkalite.security.acl import AclOperation, ResourceType

API = ADD_OFFSETS_TO_TXN


async def handle(ctx: RequestContext, request: AddOffsetsToTxnRequest) -> AddOffsetsToTxnResponse:
    coord, code = coordinator_or_error(ctx)
    if not ctx.authorize(
        AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id
    ):
        code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        code = ErrorCode.GROUP_AUTHORIZATION_FAILED
    elif not request.group_id:
        code = ErrorCode.INVALID_GROUP_ID
    elif coord is not None:
        code = await coord.add_offsets(
            request.transactional_id, request.producer_id, request.producer_epoch, request.group_id
        )
    return AddOffsetsToTxnResponse(
        throttle_time_ms=0, error_code=old_fenced_code(code, ctx.api_version, 2)
    )
