"""The client's security settings from Kafka's property names: JAAS parsing, SASL credentials,
the TLS context (PEM only, with clear refusals), host name checking; no broker needed.
"""

from __future__ import annotations

import asyncio
import base64
import ssl
from pathlib import Path
from typing import Any

import pytest

from kafkalite.client.config import CONSUMER, PRODUCER, make_config
from kafkalite.client.errors import InvalidConfigurationError, SaslAuthenticationError
from kafkalite.client.security import parse_jaas_options, sasl_authenticate, security_settings
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.sasl_client import SaslLogin
from kafkalite.testing_tls import CertificateAuthority, Issued


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> tuple[CertificateAuthority, Issued, Issued]:
    ca = CertificateAuthority(tmp_path_factory.mktemp("client-sec-ca"))
    return ca, ca.issue("app"), ca.issue("locked", password="key-pw")


def _settings(**conf: object):  # type: ignore[no-untyped-def]
    return security_settings(
        make_config(CONSUMER, {k.replace("_", "."): v for k, v in conf.items()}, {})
    )


def test_plain_and_scram_jaas_forms() -> None:
    module, opts = parse_jaas_options(
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="u" password="p";'
    )
    assert module.endswith("PlainLoginModule") and opts == {"username": "u", "password": "p"}
    module, opts = parse_jaas_options(
        "  org.apache.kafka.common.security.scram.ScramLoginModule required\n"
        'username=\'al ice\' password="p\\"w;d" tokenauth=false ;  '
    )
    assert module.endswith("ScramLoginModule")
    assert opts == {"username": "al ice", "password": 'p"w;d', "tokenauth": "false"}


@pytest.mark.parametrize(
    "text",
    [
        'username="u" password="p";',  # no module
        'org.Module required username="u"',  # no semicolon
        'org.Module mandatory username="u";',  # not a control flag
        "org.Module required username=;",
    ],
)
def test_bad_jaas_is_refused_without_showing_values(text: str) -> None:
    with pytest.raises(InvalidConfigurationError) as info:
        parse_jaas_options(text)
    assert '"u"' not in str(info.value)


def test_sasl_login_from_jaas_and_from_librdkafka_names() -> None:
    jaas = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="alice" password="s3cret";'
    )
    s = _settings(
        security_protocol="SASL_PLAINTEXT", sasl_mechanism="scram-sha-256", sasl_jaas_config=jaas
    )
    assert s.ssl_context is None and s.login is not None
    assert (s.login.mechanism, s.login.username, s.login.password) == (
        "SCRAM-SHA-256",
        "alice",
        "s3cret",
    )
    assert "s3cret" not in repr(s.login)
    s = _settings(
        **{
            "security.protocol": "SASL_SSL",
            "sasl.mechanisms": "PLAIN",
            "sasl.username": "bob",
            "sasl.password": "pw",
        }
    )
    assert s.login is not None and (s.login.mechanism, s.login.username) == ("PLAIN", "bob")
    assert s.ssl_context is not None
    # kafka-python's argument names
    cfg = make_config(
        PRODUCER,
        None,
        {
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "PLAIN",
            "sasl_plain_username": "carl",
            "sasl_plain_password": "c",
        },
    )
    login = security_settings(cfg).login
    assert login is not None and (login.username, login.password) == ("carl", "c")


def test_sasl_refusals_name_the_setting() -> None:
    with pytest.raises(InvalidConfigurationError, match=r"sasl.mechanism=GSSAPI is not supported"):
        _settings(security_protocol="SASL_PLAINTEXT", sasl_username="u", sasl_password="p")
    with pytest.raises(InvalidConfigurationError, match=r"needs a user name and a password"):
        _settings(security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN")
    with pytest.raises(InvalidConfigurationError, match=r"OAuthBearerLoginModule is not supported"):
        _settings(
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="PLAIN",
            sasl_jaas_config="org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;",
        )
    with pytest.raises(InvalidConfigurationError, match=r"security.protocol='TLS'"):
        _settings(security_protocol="TLS")


def test_tls_context_ca_and_hostname(pki: tuple[CertificateAuthority, Issued, Issued]) -> None:
    ca, _, _ = pki
    s = _settings(security_protocol="SSL", ssl_ca_location=str(ca.cert))
    ctx = s.ssl_context
    assert ctx is not None and ctx.check_hostname and ctx.verify_mode == ssl.CERT_REQUIRED
    assert len(ctx.get_ca_certs()) == 1
    ctx = _settings(
        **{
            "security.protocol": "SSL",
            "ssl.truststore.location": str(ca.cert),
            "ssl.endpoint.identification.algorithm": "",
        }
    ).ssl_context
    assert ctx is not None and not ctx.check_hostname and ctx.verify_mode == ssl.CERT_REQUIRED
    ctx = _settings(
        **{"security.protocol": "SSL", "ssl.cafile": str(ca.cert), "ssl.check.hostname": "false"}
    ).ssl_context
    assert ctx is not None and not ctx.check_hostname
    ctx = _settings(**{"security.protocol": "SSL", "ssl.ca.pem": ca.cert.read_text()}).ssl_context
    assert ctx is not None and len(ctx.get_ca_certs()) == 1
    ctx = _settings(
        **{"security.protocol": "SSL", "enable.ssl.certificate.verification": "false"}
    ).ssl_context
    assert ctx is not None and ctx.verify_mode == ssl.CERT_NONE
    with pytest.raises(
        InvalidConfigurationError, match=r"endpoint.identification.algorithm='ldap'"
    ):
        _settings(security_protocol="SSL", ssl_endpoint_identification_algorithm="ldap")


def test_client_certificate_forms(pki: tuple[CertificateAuthority, Issued, Issued]) -> None:
    ca, app, locked = pki
    base = {"security.protocol": "SSL", "ssl.ca.location": str(ca.cert)}
    assert (
        _settings(
            **base, **{"ssl.certificate.location": str(app.cert), "ssl.key.location": str(app.key)}
        ).ssl_context
        is not None
    )
    assert (
        _settings(
            **base,
            **{
                "ssl.keystore.location": str(locked.bundle),
                "ssl.keystore.type": "PEM",
                "ssl.key.password": "key-pw",
            },
        ).ssl_context
        is not None
    )
    assert (
        _settings(
            **base,
            **{
                "ssl.certfile": str(locked.cert),
                "ssl.keyfile": str(locked.key),
                "ssl.password": "key-pw",
            },
        ).ssl_context
        is not None
    )
    with pytest.raises(InvalidConfigurationError, match=r"wrong ssl.key.password"):
        _settings(
            **base, **{"ssl.keystore.location": str(locked.bundle), "ssl.key.password": "nope"}
        )


def test_jks_and_pkcs12_stores_are_refused_with_the_way_out(tmp_path: Path) -> None:
    with pytest.raises(
        InvalidConfigurationError, match=r"ssl.truststore.type=JKS is not supported.*PEM"
    ):
        _settings(
            **{
                "security.protocol": "SSL",
                "ssl.truststore.location": "/x.jks",
                "ssl.truststore.type": "JKS",
            }
        )
    with pytest.raises(
        InvalidConfigurationError, match=r"ssl.keystore.type=PKCS12 is not supported"
    ):
        _settings(
            **{
                "security.protocol": "SSL",
                "ssl.keystore.location": "/x.p12",
                "ssl.keystore.type": "PKCS12",
            }
        )
    jks = tmp_path / "truststore.jks"
    jks.write_bytes(b"\xfe\xed\xfe\xed\x00\x00\x00\x02binary")
    with pytest.raises(InvalidConfigurationError, match=r"is not a PEM file.*keytool"):
        _settings(
            **{
                "security.protocol": "SASL_SSL",
                "ssl.truststore.location": str(jks),
                "sasl.mechanism": "PLAIN",
                "sasl.username": "u",
                "sasl.password": "p",
            }
        )
    with pytest.raises(InvalidConfigurationError, match=r"cannot be read"):
        _settings(security_protocol="SSL", ssl_ca_location=str(tmp_path / "missing.pem"))


def test_enabled_protocols() -> None:
    ctx = _settings(security_protocol="SSL").ssl_context
    assert ctx is not None
    assert (ctx.minimum_version, ctx.maximum_version) == (
        ssl.TLSVersion.TLSv1_2,
        ssl.TLSVersion.TLSv1_3,
    )
    ctx = _settings(security_protocol="SSL", ssl_enabled_protocols="TLSv1.3").ssl_context
    assert ctx is not None and ctx.minimum_version == ssl.TLSVersion.TLSv1_3
    with pytest.raises(InvalidConfigurationError, match=r"speaks TLSv1.2 and TLSv1.3 only"):
        _settings(security_protocol="SSL", ssl_enabled_protocols="TLSv1,TLSv1.1")


def test_plaintext_needs_nothing() -> None:
    s = _settings()
    assert (s.protocol, s.ssl_context, s.login) == ("PLAINTEXT", None, None)


class _Broker:
    """The broker's side of SaslHandshake / SaslAuthenticate, on kafkalite's sans-IO SCRAM server."""

    def __init__(self, tamper: bool = False, lifetime_ms: int = 0) -> None:
        from kafkalite.security.scram import ScramServer, make_credential

        cred = make_credential("SCRAM-SHA-512", "right")
        self.server = ScramServer("SCRAM-SHA-512", {"alice": cred}.get)
        self.tamper = tamper
        self.lifetime_ms = lifetime_ms
        self.sent: list[str] = []

    async def send(self, request: Any, version: int) -> Any:
        from kafkalite.protocol.schema import APIS
        from kafkalite.security.sasl import SaslAuthenticationError as ServerRefusal

        self.sent.append(type(request).__name__)
        if request.API_KEY == 17:
            return APIS[17].response(error_code=0, mechanisms=["SCRAM-SHA-512"])
        try:
            answer = self.server.evaluate(bytes(request.auth_bytes))
        except ServerRefusal as exc:
            return APIS[36].response(error_code=58, error_message=exc.message)
        if self.tamper and self.server.complete:
            answer = b"v=" + base64.b64encode(b"\0" * 64)
        return APIS[36].response(
            error_code=0, auth_bytes=answer, session_lifetime_ms=self.lifetime_ms
        )


VERSIONS = {17: 1, 36: 2}


def _login(password: str) -> SaslLogin:
    return SaslLogin("SCRAM-SHA-512", "alice", password)


def test_sasl_exchange_success_and_session_lifetime() -> None:
    broker = _Broker(lifetime_ms=60000)
    lifetime = asyncio.run(sasl_authenticate(broker.send, VERSIONS, _login("right"), "b:1"))
    assert lifetime == 60000
    assert broker.sent == [
        "SaslHandshakeRequest",
        "SaslAuthenticateRequest",
        "SaslAuthenticateRequest",
    ]


def test_sasl_exchange_refusals() -> None:
    with pytest.raises(SaslAuthenticationError, match="invalid credentials") as info:
        asyncio.run(sasl_authenticate(_Broker().send, VERSIONS, _login("wrong"), "b:1"))
    assert info.value.code == ErrorCode.SASL_AUTHENTICATION_FAILED
    # a broker that cannot prove it knows the password is refused by the client
    with pytest.raises(SaslAuthenticationError, match="server signature"):
        asyncio.run(sasl_authenticate(_Broker(tamper=True).send, VERSIONS, _login("right"), "b:1"))
    with pytest.raises(SaslAuthenticationError, match="is this a SASL listener") as info:
        asyncio.run(sasl_authenticate(_Broker().send, {18: 3}, _login("right"), "b:1"))
    assert info.value.code == ErrorCode.ILLEGAL_SASL_STATE
