"""HTTP Basic authentication for /v3 with the broker's SASL users: PLAIN users of its JAAS configs and
SCRAM credentials (checked by deriving the stored key from the stored salt and iterations).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac

from aiohttp import web

from kafkalite.broker.server import BrokerServer
from kafkalite.security.principal import KafkaPrincipal
from kafkalite.security.scram import (
    SCRAM_MECHANISMS,
    client_key,
    salted_password,
    stored_key,
)
from kafkalite.web.rest._base import RestError

_CACHE_MAX = 1024


def auth_required(broker: BrokerServer) -> bool:
    """Basic auth is asked for when the broker has a SASL listener (as its Kafka listeners do)."""
    return bool(broker.sasl_listeners)


def _credentials(header: str | None) -> tuple[str, str]:
    if not header or not header.lower().startswith("basic "):
        raise RestError(401, "Unauthorized: HTTP Basic credentials are required")
    try:
        text = base64.b64decode(header[6:].strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        raise RestError(401, "Unauthorized: malformed Basic credentials") from None
    user, sep, password = text.partition(":")
    if not sep or not user:
        raise RestError(401, "Unauthorized: malformed Basic credentials")
    return user, password


class BasicAuthenticator:
    """Checks a user and password against the broker's PLAIN users and SCRAM credentials; a
    verified pair is remembered (by a hash of the password) so PBKDF2 runs once per password."""

    def __init__(self, broker: BrokerServer) -> None:
        self.broker = broker
        self._verified: dict[tuple[str, bytes], bytes] = {}

    def _plain_ok(self, user: str, password: str) -> bool:
        for settings in self.broker.sasl_listeners.values():
            expected = settings.plain_users.get(user)
            if expected is not None and hmac.compare_digest(
                expected.encode("utf-8"), password.encode("utf-8")
            ):
                return True
        return False

    def _scram_ok(self, user: str, password: str) -> bytes | None:
        """The stored key the password matches, or None."""
        for name, mechanism in SCRAM_MECHANISMS.items():
            cred = self.broker.scram_credentials.lookup(name, user)
            if cred is None:
                continue
            salted = salted_password(mechanism, password, cred.salt, cred.iterations)
            derived = stored_key(mechanism, client_key(mechanism, salted))
            if hmac.compare_digest(derived, cred.stored_key):
                return cred.stored_key
        return None

    def _current_keys(self, user: str) -> bytes:
        keys = b""
        for name in SCRAM_MECHANISMS:
            cred = self.broker.scram_credentials.lookup(name, user)
            if cred is not None:
                keys += cred.stored_key
        return keys

    async def authenticate(self, request: web.Request) -> KafkaPrincipal:
        user, password = _credentials(request.headers.get("Authorization"))
        if self._plain_ok(user, password):
            return KafkaPrincipal.user(user)
        memo = (user, hashlib.sha256(password.encode("utf-8")).digest())
        known = self._verified.get(memo)
        if known is not None and known and known in self._current_keys(user):
            return KafkaPrincipal.user(user)
        matched = await asyncio.to_thread(self._scram_ok, user, password)
        if matched is None:
            raise RestError(401, "Unauthorized: authentication failed for user " + repr(user))
        if len(self._verified) >= _CACHE_MAX:
            self._verified.clear()
        self._verified[memo] = matched
        return KafkaPrincipal.user(user)
