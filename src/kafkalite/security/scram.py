"""SCRAM-SHA-256/512 (RFC 5802, RFC 7677) as Kafka speaks it: credentials, server and client exchanges.

Also the credential string Kafka stores under /config/users/<user>: `salt=..,stored_key=..,server_key=..,iterations=N`.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass

from kafkalite.protocol.sasl_client import (
    SCRAM_MECHANISMS,
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    ScramClient,
    ScramMechanism,
    b64encode_str,
    client_key,
    new_nonce,
    salted_password,
    scram_attributes,
    scram_hmac,
    scram_mechanism,
    server_key,
    stored_key,
    xor_bytes,
)
from kafkalite.security.sasl import SaslAuthenticationError, SaslServer, invalid_credentials

__all__ = [
    "SCRAM_MECHANISMS",
    "SCRAM_SHA_256",
    "SCRAM_SHA_512",
    "LookupCredential",
    "ScramClient",
    "ScramCredential",
    "ScramMechanism",
    "ScramServer",
    "client_key",
    "make_credential",
    "salted_password",
    "scram_mechanism",
    "server_key",
    "stored_key",
]


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """What the broker keeps for a SCRAM user: never the password, only salt and derived keys."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __repr__(self) -> str:
        return f"ScramCredential(iterations={self.iterations})"

    def to_config_string(self) -> str:
        """Kafka's stored form, e.g. the value of `SCRAM-SHA-256` in /config/users/<user>."""
        b64 = b64encode_str
        return (
            f"salt={b64(self.salt)},stored_key={b64(self.stored_key)},"
            f"server_key={b64(self.server_key)},iterations={self.iterations}"
        )

    @classmethod
    def from_config_string(cls, text: str) -> ScramCredential:
        fields: dict[str, str] = {}
        for part in text.split(","):
            key, sep, value = part.partition("=")
            if not sep:
                raise ValueError(f"Invalid SCRAM credential: field {key!r} has no value")
            fields[key.strip()] = value.strip()
        wanted = {"salt", "stored_key", "server_key", "iterations"}
        if not wanted <= fields.keys():
            missing = ", ".join(sorted(wanted - fields.keys()))
            raise ValueError(f"Invalid SCRAM credential: missing {missing}")
        try:
            iterations = int(fields["iterations"])
            return cls(
                base64.b64decode(fields["salt"], validate=True),
                base64.b64decode(fields["stored_key"], validate=True),
                base64.b64decode(fields["server_key"], validate=True),
                iterations,
            )
        except (ValueError, binascii.Error) as e:
            raise ValueError(f"Invalid SCRAM credential: {e}") from None


def make_credential(
    mechanism: str | ScramMechanism,
    password: str,
    iterations: int = 4096,
    salt: bytes | None = None,
) -> ScramCredential:
    """A credential for `password`, as kafka-configs --add-config 'SCRAM-SHA-256=[password=...]' makes."""
    mech = scram_mechanism(mechanism)
    if iterations < mech.min_iterations:
        raise ValueError(
            f"Iterations {iterations} is less than the minimum {mech.min_iterations} "
            f"for {mech.mechanism_name}"
        )
    salt = secrets.token_bytes(32) if salt is None else salt
    salted = salted_password(mech, password, salt, iterations)
    return ScramCredential(
        salt, stored_key(mech, client_key(mech, salted)), server_key(mech, salted), iterations
    )


def _unescape_sasl_name(name: str) -> str:
    if re.search(r"=(?!2C|3D)", name):
        raise SaslAuthenticationError("Invalid SCRAM username: bad '=' escape")
    return name.replace("=2C", ",").replace("=3D", "=")


_NONCE = re.compile(r"[\x21-\x2b\x2d-\x7e]+")
_CLIENT_FIRST = re.compile(r"(?P<cbind>[^,]*),(?P<authzid>[^,]*),(?P<bare>.*)", re.DOTALL)
_CLIENT_FINAL = re.compile(
    r"c=(?P<cbind>[^,]*),r=(?P<nonce>[^,]*)(?P<ext>(?:,[^,]*)*?),p=(?P<proof>[^,]*)"
)


LookupCredential = Callable[[str], ScramCredential | None]


class ScramServer(SaslServer):
    """Server side of one SCRAM exchange: client-first -> server-first, client-final -> server-final."""

    def __init__(
        self,
        mechanism: str | ScramMechanism,
        lookup_credential: LookupCredential,
        *,
        server_nonce: Callable[[], str] = new_nonce,
    ) -> None:
        super().__init__()
        self._mech = scram_mechanism(mechanism)
        self.mechanism = self._mech.mechanism_name
        self._lookup = lookup_credential
        self._server_nonce = server_nonce
        self._credential: ScramCredential | None = None
        self._username = ""
        self._gs2_header = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""

    def _evaluate(self, token: bytes) -> bytes:
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslAuthenticationError("Invalid SCRAM message: not UTF-8") from None
        if self._credential is None:
            return self._client_first(text)
        return self._client_final(text)

    def _client_first(self, text: str) -> bytes:
        m = _CLIENT_FIRST.fullmatch(text)
        if m is None:
            raise SaslAuthenticationError("Invalid SCRAM client first message format")
        cbind, authzid = m["cbind"], m["authzid"]
        if cbind.startswith("p="):
            raise SaslAuthenticationError("SCRAM channel binding is not supported")
        if cbind not in ("n", "y") or (authzid and not authzid.startswith("a=")):
            raise SaslAuthenticationError("Invalid SCRAM client first message format")
        parts = m["bare"].split(",")
        if parts[0].startswith("m="):
            raise SaslAuthenticationError("Unsupported mandatory SCRAM extension")
        attrs = scram_attributes(",".join(parts[:2]), "client first")
        if len(attrs) < 2 or attrs[0][0] != "n" or attrs[1][0] != "r":
            raise SaslAuthenticationError("Invalid SCRAM client first message format")
        username = _unescape_sasl_name(attrs[0][1])
        self.authentication_id = username
        client_nonce = attrs[1][1]
        if not _NONCE.fullmatch(client_nonce):
            raise SaslAuthenticationError("Invalid SCRAM client nonce")
        # Kafka's extensions (KIP-84 tokenauth, KIP-342) are `key=value`, keys longer than a letter
        extensions: dict[str, str] = {}
        for part in parts[2:]:
            key, sep, value = part.partition("=")
            if not sep or not key:
                raise SaslAuthenticationError("Invalid SCRAM client first message format")
            extensions[key] = value
        if extensions.get("tokenauth", "false").lower() == "true":
            raise SaslAuthenticationError(
                "Authentication failed: delegation token authentication is not supported"
            )
        credential = self._lookup(username)
        if credential is None:
            raise invalid_credentials(self.mechanism)
        if authzid and _unescape_sasl_name(authzid[2:]) != username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is "
                "different from username"
            )
        if credential.iterations < self._mech.min_iterations:
            raise invalid_credentials(self.mechanism)
        self._username = username
        self._gs2_header = f"{cbind},{authzid},"
        self._client_first_bare = m["bare"]
        self._nonce = client_nonce + self._server_nonce()
        self._server_first = (
            f"r={self._nonce},s={b64encode_str(credential.salt)},i={credential.iterations}"
        )
        self._credential = credential
        return self._server_first.encode()

    def _client_final(self, text: str) -> bytes:
        credential = self._credential
        assert credential is not None
        m = _CLIENT_FINAL.fullmatch(text)
        if m is None:
            raise SaslAuthenticationError("Invalid SCRAM client final message format")
        if m["cbind"] != b64encode_str(self._gs2_header.encode()):
            raise SaslAuthenticationError(
                "Invalid SCRAM channel binding in the final client message"
            )
        # Kafka checks only that the nonce ends with the server-first one: some librdkafka versions
        # send their own nonce again in front of it
        if not m["nonce"].endswith(self._nonce):
            raise SaslAuthenticationError("Invalid client nonce in the final client message.")
        try:
            proof = base64.b64decode(m["proof"], validate=True)
        except binascii.Error:
            raise SaslAuthenticationError("Invalid SCRAM client proof encoding") from None
        if len(proof) != self._mech.digest_size:
            raise invalid_credentials(self.mechanism)
        without_proof = text[: m.start("proof") - len(",p=")]
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        signature = scram_hmac(self._mech, credential.stored_key, auth_message)
        computed_stored_key = stored_key(self._mech, xor_bytes(proof, signature))
        if not hmac.compare_digest(computed_stored_key, credential.stored_key):
            raise invalid_credentials(self.mechanism)
        verifier = scram_hmac(self._mech, credential.server_key, auth_message)
        self._succeed(self._username)
        return f"v={b64encode_str(verifier)}".encode()
