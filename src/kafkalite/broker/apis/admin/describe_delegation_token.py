"""DescribeDelegationToken (key 41, KIP-48): refused as by a Kafka broker with delegation tokens
disabled (kafkalite does not build them), with Kafka's error for the connection's kind.
"""

from __future__ import annotations

from kafkalite.broker.apis.admin._delegation_tokens import token_refusal
from kafkalite.broker.context import RequestContext
from kafkalite.protocol.messages.delegation_tokens import (
    DESCRIBE_DELEGATION_TOKEN,
    DescribeDelegationTokenRequest,
    DescribeDelegationTokenResponse,
)

API = DESCRIBE_DELEGATION_TOKEN


async def handle(
    ctx: RequestContext, request: DescribeDelegationTokenRequest
) -> DescribeDelegationTokenResponse:
    return DescribeDelegationTokenResponse(
        error_code=token_refusal(ctx), tokens=[], throttle_time_ms=0
    )
