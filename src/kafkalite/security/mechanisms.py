"""Which SASL mechanisms the broker offers, and starting a server exchange for the one a client asks for.

SaslHandshake's answer (the enabled list) and its UNSUPPORTED_SASL_MECHANISM refusal come from here.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from kafkalite.protocol.errors import ErrorCode
from kafkalite.security.sasl import (
    PLAIN,
    LookupPassword,
    PlainServer,
    SaslAuthenticationError,
    SaslServer,
    plain_client_token,
)
from kafkalite.security.scram import SCRAM_MECHANISMS, LookupCredential, ScramClient, ScramServer

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


@dataclass(frozen=True)
class SaslLogin:
    """What a client logs in with: a mechanism, a user name and a password (never shown)."""

    mechanism: str
    username: str
    password: str = field(repr=False)


class SaslClientExchange:
    """The client side of one exchange, sans-IO: send `first_token()`, then for each server token
    send what `next_token` returns until it returns None (done; SCRAM has verified the server)."""

    def __init__(self, login: SaslLogin) -> None:
        self.login = login
        self._scram: ScramClient | None = None
        self._step = 0
        if login.mechanism in SCRAM_MECHANISMS:
            self._scram = ScramClient(login.mechanism, login.username, login.password)
        elif login.mechanism != PLAIN:
            raise ValueError(f"no SASL client for mechanism {login.mechanism}")

    def first_token(self) -> bytes:
        if self._scram is None:
            return plain_client_token(self.login.username, self.login.password)
        return self._scram.first_message()

    def next_token(self, server_token: bytes) -> bytes | None:
        self._step += 1
        if self._scram is None:
            return None
        if self._step == 1:
            return self._scram.final_message(server_token)
        if self._step == 2:
            self._scram.verify(server_token)
            return None
        raise SaslAuthenticationError("unexpected SASL token after the SCRAM exchange completed")
