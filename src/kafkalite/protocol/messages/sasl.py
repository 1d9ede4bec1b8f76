"""SASL authentication APIs: SaslHandshake (mechanism negotiation, key 17) and SaslAuthenticate
(framed SASL tokens, key 36, used after a v1 handshake).
"""

from __future__ import annotations

from kafkalite.protocol.schema import F, api, request, response

SaslHandshakeRequest = request(
    17,
    "SaslHandshakeRequest",
    valid="0-1",
    flexible="none",
    fields=[
        F("mechanism", "string", "0+"),
    ],
)

SaslHandshakeResponse = response(
    17,
    "SaslHandshakeResponse",
    valid="0-1",
    flexible="none",
    fields=[
        F("error_code", "int16", "0+"),
        F("mechanisms", "[]string", "0+"),
    ],
)

SASL_HANDSHAKE = api("SaslHandshake", SaslHandshakeRequest, SaslHandshakeResponse)

SaslAuthenticateRequest = request(
    36,
    "SaslAuthenticateRequest",
    valid="0-2",
    flexible="2+",
    fields=[
        F("auth_bytes", "bytes", "0+"),
    ],
)

SaslAuthenticateResponse = response(
    36,
    "SaslAuthenticateResponse",
    valid="0-2",
    flexible="2+",
    fields=[
        F("error_code", "int16", "0+"),
        F("error_message", "string", "0+", nullable="0+"),
        F("auth_bytes", "bytes", "0+"),
        F("session_lifetime_ms", "int64", "1+", default=0, ignorable=True),
    ],
)

SASL_AUTHENTICATE = api("SaslAuthenticate", SaslAuthenticateRequest, SaslAuthenticateResponse)
