"""Client quotas on the request path: the throttle time a request (its handler time, a produce's bytes)
or a fetch answer's bytes earns, and how a connection honours it (KIP-219).
"""

from __future__ import annotations

import asyncio
import time

from kafkalite.broker.context import RequestContext
from kafkalite.broker.network.connection import Connection
from kafkalite.broker.security.client_quotas import ClientQuotas, client_throttles

FETCH_KEY = 1


def request_throttle_ms(
    quotas: ClientQuotas, ctx: RequestContext, api_key: int, request_bytes: int
) -> int:
    """The throttle time (ms) of a handled request under the request and produce quotas; 0 when no
    quota is set or the request is exempt (a follower's fetch)."""
    if not quotas.active or ctx.quota_exempt:
        return 0
    return quotas.record_request(
        ctx.principal.name,
        ctx.quota_client_id,
        api_key,
        request_bytes,
        time.monotonic_ns() - ctx.received_ns - ctx.parked_ns,
    )


def fetch_throttle_ms(
    quotas: ClientQuotas, ctx: RequestContext, api_key: int, response_bytes: int
) -> int:
    """The throttle time (ms) a consumer's Fetch answer of `response_bytes` earns (0: none)."""
    if api_key != FETCH_KEY or not quotas.fetch.enabled or ctx.quota_exempt:
        return 0
    return quotas.record_fetch(ctx.principal.name, ctx.quota_client_id, response_bytes)


async def throttle(conn: Connection, api_key: int, version: int, throttle_ms: int) -> None:
    """KIP-219: the connection reads nothing more for the throttle time after this answer; a client
    too old to back off by itself gets the answer itself that late."""
    if client_throttles(api_key, version):
        conn.mute_for(throttle_ms)
    else:
        await asyncio.sleep(throttle_ms / 1000)
