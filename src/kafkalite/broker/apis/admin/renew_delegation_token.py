"""RenewDelegationToken (key 39, KIP-48): refused as by a Kafka broker with delegation tokens
disabled (kafkalite does not build them), with Kafka's error for the connection's kind.
"""

from __future__ import annotations

from kafkalite.broker.apis.admin._delegation_tokens import token_refusal
from kafkalite.broker.context import RequestContext
from kafkalite.protocol.messages.delegation_tokens import (
    RENEW_DELEGATION_TOKEN,
    RenewDelegationTokenRequest,
    RenewDelegationTokenResponse,
)

API = RENEW_DELEGATION_TOKEN


async def handle(
    ctx: RequestContext, request: RenewDelegationTokenRequest
) -> RenewDelegationTokenResponse:
    return RenewDelegationTokenResponse(
        error_code=token_refusal(ctx), expiry_timestamp_ms=-1, throttle_time_ms=0
    )
