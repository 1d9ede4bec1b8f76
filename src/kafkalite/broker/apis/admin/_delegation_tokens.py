"""Shared by the delegation-token APIs: the answer of a Kafka broker whose delegation tokens are not
enabled (no delegation.token.secret.key), as kafkalite does not build them.
"""

from __future__ import annotations

from kafkalite.broker.context import RequestContext
from kafkalite.protocol.errors import ErrorCode
from kafkalite.security.principal import ANONYMOUS


def token_refusal(ctx: RequestContext) -> ErrorCode:
    """Kafka's order: a connection that may not ask for tokens at all (PLAINTEXT, or TLS without a
    client certificate) gets DELEGATION_TOKEN_REQUEST_NOT_ALLOWED; any other, since tokens are not
    enabled here, DELEGATION_TOKEN_AUTH_DISABLED."""
    protocol = ctx.connection.security_protocol
    if protocol == "PLAINTEXT" or (protocol == "SSL" and ctx.principal == ANONYMOUS):
        return ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
    return ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED
