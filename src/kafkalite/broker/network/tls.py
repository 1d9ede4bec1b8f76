"""TLS contexts from Kafka's PEM settings (KIP-651) for listeners and the broker-to-broker channel,
with per-listener `listener.name.<name>.ssl.*` overrides; and the RFC 2253 subject of a peer.
"""

from __future__ import annotations

import logging
import os
import re
import ssl
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field

from kafkalite.broker.config.broker_config import BrokerConfig, ConfigError
from kafkalite.broker.config.config_defs import SSL_CONFIG_DEFS

log = logging.getLogger("kafkalite.broker.tls")

_TLS_VERSIONS = {
    "TLSV1": ssl.TLSVersion.TLSv1,
    "TLSV1.1": ssl.TLSVersion.TLSv1_1,
    "TLSV1.2": ssl.TLSVersion.TLSv1_2,
    "TLSV1.3": ssl.TLSVersion.TLSv1_3,
}
_CLIENT_AUTH = {
    "required": ssl.CERT_REQUIRED,
    "requested": ssl.CERT_OPTIONAL,
    "none": ssl.CERT_NONE,
}
_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.S)


class TlsConfigError(ConfigError):
    """A TLS setting that cannot work; the message names the property and what to do."""


@dataclass(frozen=True)
class SslSettings:
    """The effective ssl.* settings of one listener (or of the broker-to-broker client side), each
    remembered with the property it came from so errors name what the operator wrote."""

    where: str
    values: dict[str, str] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)

    def get(self, key: str) -> str | None:
        v = self.values.get(key)
        return v if v not in (None, "") else None

    def name(self, key: str) -> str:
        return self.sources.get(key, key)


def ssl_settings(
    config: BrokerConfig,
    listener_name: str | None,
    dynamic: Mapping[str, str] | None = None,
    *,
    sasl: bool = False,
) -> SslSettings:
    """ssl.* of a listener: `listener.name.<lower name>.ssl.*` (dynamic, then static) over `ssl.*`
    over the defaults. `listener_name` None: the plain ssl.* settings. On a SASL_SSL listener
    (`sasl`) only the listener's own ssl.client.auth asks for client certificates (KIP-684): the
    broker-wide one is for SSL listeners, whose principal comes from the certificate."""
    prefix = f"listener.name.{listener_name.lower()}." if listener_name else None
    # only listener-prefixed names are dynamic; plain ssl.* come from server.properties alone
    candidates: list[tuple[Mapping[str, str], str]] = []
    if prefix:
        candidates = [(dynamic or {}, prefix), (config.props, prefix)]
    candidates.append((config.props, ""))
    values: dict[str, str] = {}
    sources: dict[str, str] = {}
    for d in SSL_CONFIG_DEFS:
        for layer, pre in candidates:
            if pre + d.name in layer:
                values[d.name], sources[d.name] = layer[pre + d.name], pre + d.name
                break
        else:
            if d.default is not None:
                values[d.name], sources[d.name] = d.default, d.name
    if sasl and not (prefix and sources.get("ssl.client.auth", "").startswith(prefix)):
        values["ssl.client.auth"], sources["ssl.client.auth"] = "none", "ssl.client.auth"
    where = f"listener {listener_name}" if listener_name else "the broker-to-broker client"
    return SslSettings(where, values, sources)


# -- contexts ---------------------------------------------------------------------------------------------
def server_context(s: SslSettings) -> ssl.SSLContext:
    """The context a TLS listener accepts with; TlsConfigError when the settings cannot work."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    if not _load_keystore(ctx, s):
        raise TlsConfigError(
            f"{s.where} is SSL but has no key store: set ssl.keystore.location (a PEM file with the "
            "private key and certificate chain) or ssl.keystore.key and "
            "ssl.keystore.certificate.chain"
        )
    auth = (s.get("ssl.client.auth") or "none").strip().lower()
    if auth not in _CLIENT_AUTH:
        raise TlsConfigError(
            f"{s.name('ssl.client.auth')}={auth}: expected required, requested or none"
        )
    ctx.verify_mode = _CLIENT_AUTH[auth]
    if auth != "none":
        _load_truststore(ctx, s, ssl.Purpose.CLIENT_AUTH)
    _set_protocols(ctx, s)
    _set_ciphers(ctx, s)
    return ctx


def client_context(s: SslSettings) -> ssl.SSLContext:
    """The context a broker connects to another broker's TLS listener with: the trust store, the key
    store as client certificate when there is one, host name check when ssl.endpoint.identification
    .algorithm=https."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = (s.get("ssl.endpoint.identification.algorithm") or "").lower() == "https"
    ctx.verify_mode = ssl.CERT_REQUIRED
    _load_truststore(ctx, s, ssl.Purpose.SERVER_AUTH)
    _load_keystore(ctx, s)
    _set_protocols(ctx, s)
    _set_ciphers(ctx, s)
    return ctx


def _check_pem_type(s: SslSettings, key: str) -> None:
    typ = (s.get(key) or "PEM").strip().upper()
    if typ != "PEM":
        store = "ssl.keystore" if "keystore" in key else "ssl.truststore"
        raise TlsConfigError(
            f"{s.name(key)}={typ}: only PEM is supported (set {key}=PEM with {store}.location, "
            f"or the inline {store} PEM settings)"
        )


def _read(s: SslSettings, key: str) -> str:
    path = s.get(key) or ""
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read()
    except OSError as exc:
        raise TlsConfigError(
            f"{s.name(key)}={path}: cannot read it: {exc.strerror or exc}"
        ) from None


def normalize_pem(text: str) -> str:
    """PEM blocks with their base64 body re-wrapped: inline values in a properties file lose their
    line breaks to `\\` continuations, which OpenSSL would not parse."""
    blocks = []
    for kind, body in _PEM_BLOCK.findall(text):
        headers = ""
        lines = [ln.strip() for ln in body.strip().splitlines()]
        if any(":" in ln for ln in lines):  # traditional encrypted keys: Proc-Type/DEK-Info
            head = [ln for ln in lines if ":" in ln]
            lines = [ln for ln in lines if ":" not in ln]
            headers = "\n".join(head) + "\n\n"
        b64 = re.sub(r"\s+", "", "".join(lines))
        wrapped = "\n".join(b64[i : i + 64] for i in range(0, len(b64), 64))
        blocks.append(f"-----BEGIN {kind}-----\n{headers}{wrapped}\n-----END {kind}-----\n")
    return "".join(blocks)


def _load_keystore(ctx: ssl.SSLContext, s: SslSettings) -> bool:
    """Load the key and certificate chain (False when none is configured)."""
    _check_pem_type(s, "ssl.keystore.type")
    location = s.get("ssl.keystore.location")
    key, chain = s.get("ssl.keystore.key"), s.get("ssl.keystore.certificate.chain")
    if location and (key or chain):
        raise TlsConfigError(
            f"{s.where}: set either {s.name('ssl.keystore.location')} or the inline "
            "ssl.keystore.key / ssl.keystore.certificate.chain, not both"
        )
    if location:
        text, what = (
            _read(s, "ssl.keystore.location"),
            f"{s.name('ssl.keystore.location')}={location}",
        )
    elif key or chain:
        if not (key and chain):
            missing = "ssl.keystore.certificate.chain" if key else "ssl.keystore.key"
            raise TlsConfigError(f"{s.where}: inline PEM key store needs {missing} too")
        text, what = normalize_pem(key) + normalize_pem(chain), s.name("ssl.keystore.key")
    else:
        return False
    if "PRIVATE KEY-----" not in text:
        raise TlsConfigError(f"{what}: no PEM private key in it")
    if "CERTIFICATE-----" not in text:
        raise TlsConfigError(f"{what}: no PEM certificate in it")
    password = s.get("ssl.key.password")
    if "ENCRYPTED" in text and password is None:
        raise TlsConfigError(f"{what}: the private key is encrypted; set ssl.key.password")
    fd, tmp = tempfile.mkstemp(prefix="kafkalite-keystore-", suffix=".pem")
    try:
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(normalize_pem(text))
        # a callable password never lets OpenSSL prompt on the terminal
        ctx.load_cert_chain(tmp, password=lambda: password or "")
    except ssl.SSLError as exc:
        raise TlsConfigError(f"{what}: {_keystore_reason(exc, s, 'ENCRYPTED' in text)}") from None
    finally:
        os.unlink(tmp)
    return True


def _keystore_reason(exc: ssl.SSLError, s: SslSettings, encrypted: bool) -> str:
    reason = (exc.reason or str(exc)).upper()
    if "DECRYPT" in reason or "BAD_PASSWORD" in reason or (encrypted and "PEM LIB" in reason):
        return f"cannot decrypt the private key: wrong {s.name('ssl.key.password')}"
    if "KEY_VALUES_MISMATCH" in reason:
        return "the private key does not belong to the first certificate of the chain"
    return f"not a usable PEM key store ({exc.reason or exc})"


def _load_truststore(ctx: ssl.SSLContext, s: SslSettings, purpose: ssl.Purpose) -> None:
    _check_pem_type(s, "ssl.truststore.type")
    location, inline = s.get("ssl.truststore.location"), s.get("ssl.truststore.certificates")
    if location and inline:
        raise TlsConfigError(
            f"{s.where}: set either {s.name('ssl.truststore.location')} or "
            f"{s.name('ssl.truststore.certificates')}, not both"
        )
    if location:
        text, what = (
            _read(s, "ssl.truststore.location"),
            f"{s.name('ssl.truststore.location')}={location}",
        )
    elif inline:
        text, what = inline, s.name("ssl.truststore.certificates")
    else:
        log.info("%s: no trust store configured; trusting the system's CA certificates", s.where)
        ctx.load_default_certs(purpose)
        return
    pem = normalize_pem(text)
    if "CERTIFICATE-----" not in pem:
        raise TlsConfigError(f"{what}: no PEM certificate in it")
    try:
        ctx.load_verify_locations(cadata=pem)
    except ssl.SSLError as exc:
        raise TlsConfigError(
            f"{what}: not a usable PEM trust store ({exc.reason or exc})"
        ) from None


def _set_protocols(ctx: ssl.SSLContext, s: SslSettings) -> None:
    raw = s.get("ssl.enabled.protocols") or "TLSv1.2,TLSv1.3"
    wanted = [p.strip() for p in raw.split(",") if p.strip()]
    versions = []
    for p in wanted:
        v = _TLS_VERSIONS.get(p.upper())
        if v is None:
            raise TlsConfigError(
                f"{s.name('ssl.enabled.protocols')}: unknown protocol {p!r} (TLSv1.2, TLSv1.3)"
            )
        versions.append(v)
    if not versions:
        raise TlsConfigError(f"{s.name('ssl.enabled.protocols')} is empty")
    ctx.minimum_version, ctx.maximum_version = min(versions), max(versions)


def iana_to_openssl(name: str) -> str:
    """TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 -> ECDHE-RSA-AES128-GCM-SHA256 (OpenSSL's spelling);
    OpenSSL names pass through."""
    if not name.startswith("TLS_") or "_WITH_" not in name:
        return name
    kx, _, enc = name[4:].partition("_WITH_")
    enc = enc.replace("AES_128", "AES128").replace("AES_256", "AES256").replace("_CBC", "")
    enc = enc.replace("CHACHA20_POLY1305_SHA256", "CHACHA20_POLY1305").replace("_", "-")
    kx = "" if kx == "RSA" else kx.replace("_", "-") + "-"
    return kx + enc


def _set_ciphers(ctx: ssl.SSLContext, s: SslSettings) -> None:
    raw = s.get("ssl.cipher.suites")
    if not raw:
        return
    names = [c.strip() for c in raw.split(",") if c.strip()]
    # TLS 1.3 suites (TLS_AES_*, TLS_CHACHA20_*) are not selectable through Python's ssl module
    tls12 = [iana_to_openssl(n) for n in names if "_WITH_" in n or not n.startswith("TLS_")]
    if len(tls12) < len(names):
        log.info("%s: TLS 1.3 cipher suites stay OpenSSL's defaults", s.where)
    if not tls12:
        return
    try:
        ctx.set_ciphers(":".join(tls12))
    except ssl.SSLError:
        raise TlsConfigError(
            f"{s.name('ssl.cipher.suites')}={raw}: OpenSSL knows none of these cipher suites"
        ) from None


# -- peers ----------------------------------------------------------------------------------------------
_RDN_KEYS = {
    "commonName": "CN",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}


def _escape_dn_value(v: str) -> str:
    out = "".join("\\" + ch if ch in ',+"\\<>;=' else ch for ch in v)
    if out.startswith(("#", " ")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out


def subject_rfc2253(peercert: Mapping[str, object] | None) -> str | None:
    """The subject DN of a certificate (as `SSLSocket.getpeercert()` gives it) in RFC 2253 form,
    most specific RDN first: CN=client,OU=eng,O=example. None without a certificate."""
    if not peercert:
        return None
    subject = peercert.get("subject")  # a tuple of RDNs, each a tuple of (key, value) pairs
    if not subject or not isinstance(subject, tuple):
        return None
    rdns = []
    for rdn in reversed(subject):
        rdns.append("+".join(f"{_RDN_KEYS.get(k, k)}={_escape_dn_value(v)}" for k, v in rdn))
    return ",".join(rdns)


def handshake_failure_reason(exc: BaseException) -> str:
    """What a person should know about a failed TLS handshake, in one line."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"the client's certificate is not trusted ({exc.verify_message})"
    if isinstance(exc, ssl.SSLError):
        reason = (exc.reason or "").upper()
        if reason in (
            "WRONG_VERSION_NUMBER",
            "HTTP_REQUEST",
            "UNKNOWN_PROTOCOL",
            "RECORD_LAYER_FAILURE",
            "PACKET_LENGTH_TOO_LONG",
        ):
            return "the client does not speak TLS (a plaintext client on a TLS listener?)"
        if reason == "PEER_DID_NOT_RETURN_A_CERTIFICATE":
            return "the client sent no certificate and ssl.client.auth=required"
        if reason == "CERTIFICATE_VERIFY_FAILED":
            return "the client's certificate is not trusted"
        if reason.startswith("TLSV1_ALERT_") or reason.startswith("SSLV3_ALERT_"):
            return f"the client refused the handshake ({reason.lower()}: does it trust this broker's certificate?)"
        if reason in ("UNSUPPORTED_PROTOCOL", "NO_SHARED_CIPHER", "NO_PROTOCOLS_AVAILABLE"):
            return f"no TLS version or cipher suite in common ({reason.lower()})"
        return f"{exc.reason or exc}"
    if isinstance(exc, TimeoutError) or "taking longer" in str(exc):
        return "the handshake did not finish in time"
    if isinstance(exc, ConnectionError | EOFError):
        return "the client closed the connection during the handshake"
    return f"{type(exc).__name__}: {exc}"
