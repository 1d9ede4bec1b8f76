"""Secured connections for kafkalite's client: the TLS context and SASL login that Kafka's property
names ask for (security.protocol, ssl.*, sasl.*), checked once per client, and the SASL exchange.
"""

from __future__ import annotations

import os
import re
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import kafkalite.protocol.messages  # noqa: F401  (registers every API)
from kafkalite.client.errors import InvalidConfigurationError, SaslAuthenticationError
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.sasl import SaslAuthenticateRequest, SaslHandshakeRequest
from kafkalite.protocol.sasl_client import PLAIN, SCRAM_MECHANISMS, SaslClientExchange, SaslLogin
from kafkalite.protocol.sasl_client import SaslAuthenticationError as SaslExchangeError

SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = (PLAIN, *SCRAM_MECHANISMS)
_LOGIN_MODULES = {
    "org.apache.kafka.common.security.plain.PlainLoginModule",
    "org.apache.kafka.common.security.scram.ScramLoginModule",
}
_PEM_ONLY = (
    "kafkalite's client reads PEM files only: convert a JKS or PKCS12 store to PEM "
    "(keytool -exportcert -rfc, or openssl pkcs12 -nodes) and set {what}"
)


@dataclass(frozen=True)
class SecuritySettings:
    """What one client's connections do after TCP connect: TLS (with this context), then SASL."""

    protocol: str
    ssl_context: ssl.SSLContext | None
    login: SaslLogin | None

    @property
    def description(self) -> str:
        if self.login is None:
            return self.protocol
        return f"{self.protocol}/{self.login.mechanism} as {self.login.username}"


def security_settings(config: dict[str, Any]) -> SecuritySettings:
    """The settings a config asks for; InvalidConfigurationError names the setting that is wrong."""
    protocol = str(config.get("security.protocol") or "PLAINTEXT").strip().upper()
    if protocol not in PROTOCOLS:
        raise InvalidConfigurationError(
            f"security.protocol={protocol!r} is not one of {', '.join(PROTOCOLS)}"
        )
    context = ssl_context(config) if protocol in ("SSL", "SASL_SSL") else None
    login = sasl_login(config) if protocol.startswith("SASL_") else None
    return SecuritySettings(protocol, context, login)


# -- SASL


_JAAS = re.compile(
    r"\s*(?P<module>[\w.$]+)\s+(?P<flag>required|requisite|sufficient|optional)"
    r"(?P<options>(?:[^;\"']|\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*')*);\s*",
    re.DOTALL,
)
_JAAS_OPTION = re.compile(
    r"\s*(?P<key>[\w.$-]+)\s*=\s*(?:\"(?P<dq>(?:[^\"\\]|\\.)*)\"|'(?P<sq>(?:[^'\\]|\\.)*)'"
    r"|(?P<word>[^\s\"';=]+))",
    re.DOTALL,
)


def parse_jaas_options(text: str) -> tuple[str, dict[str, str]]:
    """`<LoginModule> required key="value" ...;` -> (the module's class, its options).

    Error messages name keys, never values (they hold passwords)."""
    m = _JAAS.fullmatch(text)
    if m is None:
        raise InvalidConfigurationError(
            "sasl.jaas.config must look like '<LoginModule class> required "
            'username="..." password="...";\''
        )
    options: dict[str, str] = {}
    rest = m["options"]
    pos = 0
    while rest[pos:].strip():
        om = _JAAS_OPTION.match(rest, pos)
        if om is None:
            raise InvalidConfigurationError(
                "sasl.jaas.config: cannot read the options after the login module "
                '(write them as key="value")'
            )
        raw = om["dq"] if om["dq"] is not None else om["sq"] if om["sq"] is not None else om["word"]
        options[om["key"]] = re.sub(r"\\(.)", r"\1", raw)
        pos = om.end()
    return m["module"], options


def sasl_login(config: dict[str, Any]) -> SaslLogin:
    """The mechanism and credentials: librdkafka's sasl.username / sasl.password, else the
    username and password of Kafka's sasl.jaas.config (PlainLoginModule or ScramLoginModule)."""
    mechanism = str(config.get("sasl.mechanism") or "GSSAPI").strip().upper()
    if mechanism not in MECHANISMS:
        raise InvalidConfigurationError(
            f"sasl.mechanism={mechanism} is not supported by kafkalite's client; "
            f"use one of {', '.join(MECHANISMS)}"
        )
    username, password = config.get("sasl.username"), config.get("sasl.password")
    jaas = config.get("sasl.jaas.config")
    if jaas and (username is None or password is None):
        module, options = parse_jaas_options(str(jaas))
        if module not in _LOGIN_MODULES:
            raise InvalidConfigurationError(
                f"sasl.jaas.config: login module {module} is not supported by kafkalite's client "
                f"(use PlainLoginModule or ScramLoginModule with sasl.mechanism={mechanism})"
            )
        username = options.get("username") if username is None else username
        password = options.get("password") if password is None else password
    if not username or password is None:
        raise InvalidConfigurationError(
            f"SASL/{mechanism} needs a user name and a password: set sasl.username and "
            'sasl.password, or sasl.jaas.config with username="..." password="..."'
        )
    return SaslLogin(mechanism, str(username), str(password))


# -- TLS


def _pem_file(path: str, what: str) -> str:
    try:
        with open(path, "rb") as f:
            head = f.read(1 << 16)
    except OSError as exc:
        raise InvalidConfigurationError(f"{what}={path!r} cannot be read: {exc}") from None
    if b"-----BEGIN" not in head:
        raise InvalidConfigurationError(
            f"{what}={path!r} is not a PEM file; " + _PEM_ONLY.format(what=what)
        )
    return path


def _store_type(config: dict[str, Any], name: str, location: str) -> None:
    kind = config.get(name)
    if kind is not None and str(kind).strip().upper() not in ("PEM", ""):
        raise InvalidConfigurationError(
            f"{name}={kind} is not supported; "
            + _PEM_ONLY.format(what=f"{location} and {name}=PEM")
        )


_TLS_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


def _tls_versions(value: Any) -> tuple[ssl.TLSVersion, ssl.TLSVersion]:
    """Java's ssl.enabled.protocols ("TLSv1.2,TLSv1.3") as the lowest and highest version allowed."""
    names = [n.strip() for n in str(value or "TLSv1.2,TLSv1.3").split(",") if n.strip()]
    unknown = [n for n in names if n not in _TLS_VERSIONS]
    if unknown or not names:
        raise InvalidConfigurationError(
            f"ssl.enabled.protocols={value!r}: kafkalite's client speaks "
            f"{' and '.join(_TLS_VERSIONS)} only"
        )
    versions = sorted(_TLS_VERSIONS[n] for n in names)
    return versions[0], versions[-1]


def ssl_context(config: dict[str, Any]) -> ssl.SSLContext:
    """The client's TLS context: the CA (ssl.ca.location / ssl.truststore.location / ssl.ca.pem, else
    the system's), the client certificate if any, host name check per
    ssl.endpoint.identification.algorithm (https: check, empty: do not)."""
    given = config.get("ssl.context")
    if given is not None:
        if not isinstance(given, ssl.SSLContext):
            raise InvalidConfigurationError("ssl.context must be an ssl.SSLContext")
        return given
    _store_type(config, "ssl.truststore.type", "ssl.truststore.location")
    _store_type(config, "ssl.keystore.type", "ssl.keystore.location")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version, ctx.maximum_version = _tls_versions(config.get("ssl.enabled.protocols"))
    ca, ca_pem = config.get("ssl.ca.location"), config.get("ssl.ca.pem")
    try:
        if ca:
            ca = str(ca)
            if os.path.isdir(ca):
                ctx.load_verify_locations(capath=ca)
            else:
                ctx.load_verify_locations(cafile=_pem_file(ca, "ssl.ca.location"))
        if ca_pem:
            ctx.load_verify_locations(cadata=str(ca_pem))
        if not ca and not ca_pem:
            ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
    except ssl.SSLError as exc:
        raise InvalidConfigurationError(f"the CA certificates cannot be loaded: {exc}") from None
    password = config.get("ssl.key.password")
    cert, key = config.get("ssl.certificate.location"), config.get("ssl.key.location")
    keystore = config.get("ssl.keystore.location")
    try:
        if cert:
            ctx.load_cert_chain(
                _pem_file(str(cert), "ssl.certificate.location"),
                _pem_file(str(key), "ssl.key.location") if key else None,
                password=None if password is None else str(password),
            )
        elif keystore:
            ctx.load_cert_chain(
                _pem_file(str(keystore), "ssl.keystore.location"),
                None,
                password=None if password is None else str(password),
            )
        elif key:
            raise InvalidConfigurationError(
                "ssl.key.location is set without ssl.certificate.location"
            )
    except ssl.SSLError as exc:
        raise InvalidConfigurationError(
            f"the client certificate or key cannot be loaded (wrong ssl.key.password?): {exc}"
        ) from None
    algorithm = str(config.get("ssl.endpoint.identification.algorithm") or "").strip().lower()
    if algorithm not in ("https", "", "none"):
        raise InvalidConfigurationError(
            f"ssl.endpoint.identification.algorithm={algorithm!r}: use https (check the broker's "
            "host name) or an empty value (do not)"
        )
    verify = config.get("enable.ssl.certificate.verification", True)
    if verify is False or str(verify).strip().lower() in ("false", "0", "no", "off"):
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    else:
        ctx.check_hostname = algorithm == "https"
    return ctx


# -- the SASL exchange on a connection


Send = Callable[..., Awaitable[Any]]


async def sasl_authenticate(
    send: Send, versions: dict[int, int], login: SaslLogin, where: str
) -> int:
    """SaslHandshake v1, then SaslAuthenticate until the mechanism's exchange is done, through
    `send(request, version=...)`; returns the session lifetime (KIP-368, 0: none). A refusal raises
    SaslAuthenticationError with the broker's error code and message (never retried)."""
    if SASL_HANDSHAKE not in versions or SASL_AUTHENTICATE not in versions:
        raise SaslAuthenticationError(
            ErrorCode.ILLEGAL_SASL_STATE,
            f"the broker at {where} offers no SaslHandshake v1 / SaslAuthenticate: is this a "
            "SASL listener (security.protocol)?",
        )
    hs = await send(SaslHandshakeRequest(mechanism=login.mechanism), version=1)
    if hs.error_code:
        raise SaslAuthenticationError(
            hs.error_code,
            f"the broker at {where} does not enable SASL mechanism {login.mechanism} "
            f"(enabled: {', '.join(hs.mechanisms) or 'none'})",
        )
    exchange = SaslClientExchange(login)
    version = versions[SASL_AUTHENTICATE]
    resp: Any = None
    token: bytes | None = exchange.first_token()
    while token is not None:
        resp = await send(SaslAuthenticateRequest(auth_bytes=token), version=version)
        if resp.error_code:
            raise SaslAuthenticationError(
                resp.error_code,
                resp.error_message
                or f"SASL/{login.mechanism} authentication as {login.username} failed",
            )
        try:
            token = exchange.next_token(bytes(resp.auth_bytes))
        except SaslExchangeError as exc:
            raise SaslAuthenticationError(
                ErrorCode.SASL_AUTHENTICATION_FAILED, f"{exc} (broker at {where})"
            ) from None
    return 0 if resp is None else int(resp.session_lifetime_ms)


def tls_failure_reason(exc: ssl.SSLError) -> str:
    if isinstance(exc, ssl.SSLCertVerificationError):
        return (
            f"the broker's certificate did not verify ({exc.verify_message}); check "
            "ssl.ca.location and, for a host name mismatch, ssl.endpoint.identification.algorithm"
        )
    return f"{exc.reason or exc} (is this an SSL / SASL_SSL listener?)"
