"""Which SASL mechanisms the broker offers, and starting a server exchange for the one a client asks for.

SaslHandshake's answer (the enabled list) and its UNSUPPORTED_SASL_MECHANISM refusal come from here.
"""

from __future__ import annotations

from collections.abc import Collection

from kafkalite.protocol.errors import ErrorCode

# the client side lives in protocol/ (kafkalite's client may not import security/); named here too
from kafkalite.protocol.sasl_client import SaslClientExchange, SaslLogin
from kafkalite.security.sasl import PLAIN, LookupPassword, PlainServer, SaslServer
from kafkalite.security.scram import SCRAM_MECHANISMS, LookupCredential, ScramServer

__all__ = [
    "SUPPORTED_MECHANISMS",
    "SaslClientExchange",
    "SaslLogin",
    "UnsupportedSaslMechanismError",
    "create_sasl_server",
]

SUPPORTED_MECHANISMS: tuple[str, ...] = (PLAIN, *SCRAM_MECHANISMS)


class UnsupportedSaslMechanismError(Exception):
    """The client asked for a mechanism this listener does not enable."""

    error_code = ErrorCode.UNSUPPORTED_SASL_MECHANISM


def create_sasl_server(
    mechanism: str,
    enabled: Collection[str],
    *,
    lookup_password: LookupPassword | None = None,
    lookup_credential: LookupCredential | None = None,
) -> SaslServer:
    """A fresh server exchange for `mechanism`, if `sasl.enabled.mechanisms` includes it.

    `lookup_password` backs PLAIN (the JAAS `user_<name>` options); `lookup_credential` backs
    SCRAM (the credentials stored under /config/users/<user>).
    """
    if mechanism not in enabled:
        raise UnsupportedSaslMechanismError(f"Unsupported SASL mechanism {mechanism}")
    if mechanism == PLAIN and lookup_password is not None:
        return PlainServer(lookup_password)
    if mechanism in SCRAM_MECHANISMS and lookup_credential is not None:
        return ScramServer(mechanism, lookup_credential)
    raise UnsupportedSaslMechanismError(
        f"Unsupported SASL mechanism {mechanism}"
        + (
            ""
            if mechanism in SUPPORTED_MECHANISMS
            else f"; supported: {list(SUPPORTED_MECHANISMS)}"
        )
    )
