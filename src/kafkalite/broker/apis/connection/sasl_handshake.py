"""SaslHandshake (key 17): the client names a mechanism; v1 continues with SaslAuthenticate requests,
v0 with bare tokens. A mechanism the listener does not enable gets UNSUPPORTED_SASL_MECHANISM and a close.
"""

from __future__ import annotations

import logging

from kafkalite.broker.context import RequestContext
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.sasl import (
    SASL_HANDSHAKE,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

API = SASL_HANDSHAKE
log = logging.getLogger("kafkalite.broker.sasl")


async def handle(ctx: RequestContext, request: SaslHandshakeRequest) -> SaslHandshakeResponse:
    conn = ctx.connection
    sasl = conn.sasl
    if sasl is None:  # not a SASL listener, or already authenticated without KIP-368 sessions
        return SaslHandshakeResponse(error_code=int(ErrorCode.ILLEGAL_SASL_STATE), mechanisms=[])
    enabled = list(sasl.settings.mechanisms)
    code = sasl.handshake(request.mechanism, ctx.api_version)
    if code == ErrorCode.UNSUPPORTED_SASL_MECHANISM:
        log.warning(
            "%s on listener %s asked for SASL mechanism %s, which is not enabled (enabled: %s); "
            "closing the connection",
            conn.peer,
            conn.listener_name,
            request.mechanism,
            ", ".join(enabled),
        )
        conn.close_after_failed_authentication(sasl)
    elif code != 0:
        log.warning(
            "%s on listener %s: SaslHandshake %s v%d for re-authentication is not allowed "
            "(the mechanism must stay %s and the version be 1); closing the connection",
            conn.peer,
            conn.listener_name,
            request.mechanism,
            ctx.api_version,
            sasl.mechanism,
        )
        conn.close_after_failed_authentication(sasl)
    return SaslHandshakeResponse(error_code=code, mechanisms=enabled)
