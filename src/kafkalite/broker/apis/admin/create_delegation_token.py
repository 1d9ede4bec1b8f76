"""CreateDelegationToken (key 38, KIP-48): refused as by a Kafka broker with delegation tokens
disabled (kafkalite does not build them), with Kafka's error for the connection's kind.
"""

from __future__ import annotations

from kafkalite.broker.apis.admin._delegation_tokens import token_refusal
from kafkalite.broker.context import RequestContext
from kafkalite.protocol.messages.delegation_tokens import (
    CREATE_DELEGATION_TOKEN,
    CreateDelegationTokenRequest,
    CreateDelegationTokenResponse,
)

API = CREATE_DELEGATION_TOKEN


async def handle(
    ctx: RequestContext, request: CreateDelegationTokenRequest
) -> CreateDelegationTokenResponse:
    return CreateDelegationTokenResponse(
        error_code=token_refusal(ctx),
        principal_type=ctx.principal.principal_type,
        principal_name=ctx.principal.name,
        issue_timestamp_ms=-1,
        expiry_timestamp_ms=-1,
        max_timestamp_ms=-1,
        token_id="",
        hmac=b"",
        throttle_time_ms=0,
    )
