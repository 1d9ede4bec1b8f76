"""The sans-IO SASL server interface, its failure type, and the PLAIN mechanism (RFC 4616) both ways.

A server takes each SaslAuthenticate token and returns the bytes to send back; no sockets here.
"""

from __future__ import annotations

import abc
import hmac
from collections.abc import Callable

from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.sasl_client import SaslAuthenticationError, plain_client_token
from kafkalite.security.principal import KafkaPrincipal

PLAIN = "PLAIN"
__all__ = [
    "PLAIN",
    "IllegalSaslStateError",
    "LookupPassword",
    "PlainServer",
    "SaslAuthenticationError",
    "SaslServer",
    "invalid_credentials",
    "plain_client_token",
]


class IllegalSaslStateError(Exception):
    """A token arrived after the exchange had completed or failed (Kafka's ILLEGAL_SASL_STATE)."""

    error_code = ErrorCode.ILLEGAL_SASL_STATE


def invalid_credentials(mechanism: str) -> SaslAuthenticationError:
    """The one message Kafka gives for a wrong password or unknown user, whatever the cause."""
    return SaslAuthenticationError(
        "Authentication failed during authentication due to invalid credentials "
        f"with SASL mechanism {mechanism}"
    )


class SaslServer(abc.ABC):
    """One server-side SASL exchange. Feed each client token to `evaluate`; send what it returns.

    When `complete` turns true the exchange succeeded and `principal` is set. A failure raises
    SaslAuthenticationError and the exchange is finished; any further token is an illegal state.
    """

    mechanism: str

    def __init__(self) -> None:
        self._complete = False
        self._failed = False
        self._principal: KafkaPrincipal | None = None
        # the user the client claims to be, once a token named one (for log lines; never a secret)
        self.authentication_id: str | None = None

    @property
    def complete(self) -> bool:
        return self._complete

    @property
    def principal(self) -> KafkaPrincipal | None:
        return self._principal

    def evaluate(self, token: bytes) -> bytes:
        if self._complete or self._failed:
            state = "complete" if self._complete else "failed"
            raise IllegalSaslStateError(
                f"Unexpected SASL token: the {self.mechanism} exchange has {state}"
            )
        try:
            return self._evaluate(token)
        except SaslAuthenticationError:
            self._failed = True
            raise

    def _succeed(self, authorization_id: str) -> None:
        self._complete = True
        self._principal = KafkaPrincipal.user(authorization_id)

    @abc.abstractmethod
    def _evaluate(self, token: bytes) -> bytes: ...


LookupPassword = Callable[[str], str | None]

# Compared against when the user is unknown, so the time taken does not tell who exists.
_DUMMY_PASSWORD = b"\x00" * 32


class PlainServer(SaslServer):
    """SASL/PLAIN: one token `authzid NUL authcid NUL passwd`; the authzid is empty or the authcid."""

    mechanism = PLAIN

    def __init__(self, lookup_password: LookupPassword) -> None:
        super().__init__()
        self._lookup_password = lookup_password

    def _evaluate(self, token: bytes) -> bytes:
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslAuthenticationError("Invalid SASL/PLAIN response: not UTF-8") from None
        tokens = text.split("\0")
        if len(tokens) != 3:
            raise SaslAuthenticationError(
                f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(tokens)}"
            )
        authorization_id, username, password = tokens
        self.authentication_id = username or None
        if not username:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified")
        expected = self._lookup_password(username)
        given = password.encode("utf-8")
        if expected is None:
            hmac.compare_digest(given, _DUMMY_PASSWORD)
            raise SaslAuthenticationError("Authentication failed: Invalid username or password")
        if not hmac.compare_digest(given, expected.encode("utf-8")):
            raise SaslAuthenticationError("Authentication failed: Invalid username or password")
        if authorization_id and authorization_id != username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is "
                "different from username"
            )
        self._succeed(username)
        return b""
