"""SaslAuthenticate (key 36): one SASL token each way after SaslHandshake v1. Success sets the
connection's principal (User:<name>) and, with connections.max.reauth.ms, the session lifetime.
"""

from __future__ import annotations

import logging

from kafkalite.broker.context import RequestContext
from kafkalite.broker.security.sasl_auth import SaslState
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.sasl import (
    SASL_AUTHENTICATE,
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
)
from kafkalite.security.sasl import IllegalSaslStateError, SaslAuthenticationError

API = SASL_AUTHENTICATE
log = logging.getLogger("kafkalite.broker.sasl")


def _error(code: int, message: str) -> SaslAuthenticateResponse:
    return SaslAuthenticateResponse(
        error_code=code, error_message=message, auth_bytes=b"", session_lifetime_ms=0
    )


async def handle(ctx: RequestContext, request: SaslAuthenticateRequest) -> SaslAuthenticateResponse:
    conn = ctx.connection
    sasl = conn.sasl
    if sasl is None:
        return _error(
            int(ErrorCode.ILLEGAL_SASL_STATE),
            "SaslAuthenticate request received after successful authentication"
            if conn.security_protocol.startswith("SASL")
            else f"SaslAuthenticate on listener {conn.listener_name}, which does not use SASL",
        )
    try:
        token = sasl.authenticate(request.auth_bytes)
    except (SaslAuthenticationError, IllegalSaslStateError) as exc:
        log.warning(
            "%s on listener %s failed SASL/%s authentication as %s: %s",
            conn.peer,
            conn.listener_name,
            sasl.mechanism,
            sasl.username or "an unnamed user",
            exc,
        )
        conn.close_after_failed_authentication(sasl)
        return _error(int(exc.error_code), str(exc))
    lifetime = 0
    if sasl.state is SaslState.AUTHENTICATED:
        lifetime = sasl.session_lifetime_ms
        conn.sasl_authenticated(sasl)
        log.info(
            "%s authenticated as %s with SASL/%s on listener %s",
            conn.peer,
            conn.principal,
            sasl.mechanism,
            conn.listener_name,
        )
    return SaslAuthenticateResponse(
        error_code=0, error_message=None, auth_bytes=token, session_lifetime_ms=lifetime
    )
