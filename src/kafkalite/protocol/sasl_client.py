"""The client side of SASL as Kafka speaks it, sans-IO: PLAIN's one token and SCRAM-SHA-256/512's
exchange (RFC 5802/7677), with the SCRAM arithmetic the broker's server side shares.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from dataclasses import dataclass, field

from kafkalite.protocol.errors import ErrorCode

PLAIN = "PLAIN"


class SaslAuthenticationError(Exception):
    """Authentication failed; `str(e)` is safe to send to the client (no secrets, no stored data)."""

    error_code = ErrorCode.SASL_AUTHENTICATION_FAILED

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def plain_client_token(username: str, password: str, authorization_id: str = "") -> bytes:
    """The client's single PLAIN message; NUL may appear in none of the three parts."""
    for part, what in (
        (username, "username"),
        (password, "password"),
        (authorization_id, "authzid"),
    ):
        if "\0" in part:
            raise ValueError(f"SASL/PLAIN {what} must not contain NUL")
    return f"{authorization_id}\0{username}\0{password}".encode()


@dataclass(frozen=True, slots=True)
class ScramMechanism:
    """A SCRAM mechanism: its SASL name, the hash it is built on, Kafka's iteration bounds."""

    mechanism_name: str
    hash_name: str
    min_iterations: int = 4096
    max_iterations: int = 16384  # the most AlterUserScramCredentials accepts

    @property
    def digest_size(self) -> int:
        return hashlib.new(self.hash_name).digest_size


SCRAM_SHA_256 = ScramMechanism("SCRAM-SHA-256", "sha256")
SCRAM_SHA_512 = ScramMechanism("SCRAM-SHA-512", "sha512")
SCRAM_MECHANISMS: dict[str, ScramMechanism] = {
    m.mechanism_name: m for m in (SCRAM_SHA_256, SCRAM_SHA_512)
}


def scram_mechanism(mechanism: str | ScramMechanism) -> ScramMechanism:
    if isinstance(mechanism, ScramMechanism):
        return mechanism
    try:
        return SCRAM_MECHANISMS[mechanism]
    except KeyError:
        raise ValueError(
            f"Unsupported SCRAM mechanism {mechanism!r}; supported: {sorted(SCRAM_MECHANISMS)}"
        ) from None


def b64encode_str(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def scram_hmac(mechanism: ScramMechanism, key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, mechanism.hash_name).digest()


def salted_password(
    mechanism: ScramMechanism, password: str, salt: bytes, iterations: int
) -> bytes:
    """Hi(password, salt, i) of RFC 5802: PBKDF2 with HMAC of the mechanism's hash."""
    return hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode("utf-8"), salt, iterations)


def client_key(mechanism: ScramMechanism, salted: bytes) -> bytes:
    return scram_hmac(mechanism, salted, b"Client Key")


def server_key(mechanism: ScramMechanism, salted: bytes) -> bytes:
    return scram_hmac(mechanism, salted, b"Server Key")


def stored_key(mechanism: ScramMechanism, client_key_: bytes) -> bytes:
    return hashlib.new(mechanism.hash_name, client_key_).digest()


def xor_bytes(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


def escape_sasl_name(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def new_nonce() -> str:
    return secrets.token_urlsafe(24)  # printable, never a comma


def scram_attributes(text: str, what: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for part in text.split(","):
        if len(part) < 2 or part[1] != "=":
            raise SaslAuthenticationError(f"Invalid SCRAM {what} message format")
        out.append((part[0], part[2:]))
    return out


class ScramClient:
    """Client side: `first_message()`, then `final_message(server_first)`, then `verify(server_final)`."""

    def __init__(
        self,
        mechanism: str | ScramMechanism,
        username: str,
        password: str,
        *,
        nonce: str | None = None,
        extensions: dict[str, str] | None = None,
    ) -> None:
        self._mech = scram_mechanism(mechanism)
        self.mechanism = self._mech.mechanism_name
        self._username = username
        self._password = password
        self._nonce = new_nonce() if nonce is None else nonce
        ext = "".join(f",{k}={v}" for k, v in (extensions or {}).items())
        self._client_first_bare = f"n={escape_sasl_name(username)},r={self._nonce}{ext}"
        self._server_signature: bytes | None = None
        self.complete = False

    def first_message(self) -> bytes:
        return f"n,,{self._client_first_bare}".encode()

    def final_message(self, server_first: bytes) -> bytes:
        text = server_first.decode("utf-8")
        attrs = dict(scram_attributes(text, "server first"))
        if "e" in attrs:
            raise SaslAuthenticationError(f"SCRAM server error: {attrs['e']}")
        try:
            nonce, salt, iterations = attrs["r"], base64.b64decode(attrs["s"]), int(attrs["i"])
        except (KeyError, ValueError, binascii.Error):
            raise SaslAuthenticationError("Invalid SCRAM server first message format") from None
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
            raise SaslAuthenticationError("Invalid server nonce: does not start with client nonce")
        if iterations < self._mech.min_iterations:
            raise SaslAuthenticationError(
                f"Requested iterations {iterations} is less than the minimum "
                f"{self._mech.min_iterations} for {self.mechanism}"
            )
        salted = salted_password(self._mech, self._password, salt, iterations)
        without_proof = f"c={b64encode_str(b'n,,')},r={nonce}"
        auth_message = f"{self._client_first_bare},{text},{without_proof}".encode()
        key = client_key(self._mech, salted)
        signature = scram_hmac(self._mech, stored_key(self._mech, key), auth_message)
        self._server_signature = scram_hmac(
            self._mech, server_key(self._mech, salted), auth_message
        )
        return f"{without_proof},p={b64encode_str(xor_bytes(key, signature))}".encode()

    def verify(self, server_final: bytes) -> None:
        if self._server_signature is None:
            raise SaslAuthenticationError("SCRAM server final message before the client final")
        attrs = dict(scram_attributes(server_final.decode("utf-8"), "server final"))
        if "e" in attrs:
            raise SaslAuthenticationError(f"SCRAM server error: {attrs['e']}")
        try:
            verifier = base64.b64decode(attrs["v"], validate=True)
        except (KeyError, binascii.Error):
            raise SaslAuthenticationError("Invalid SCRAM server final message format") from None
        if not hmac.compare_digest(verifier, self._server_signature):
            raise SaslAuthenticationError("Invalid SCRAM server signature")
        self.complete = True


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
