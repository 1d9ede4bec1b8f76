"""TLS and listener configuration: PEM key and trust stores, per-listener overrides, the errors a person
sees for settings that cannot work, and the RFC 2253 subject of a peer certificate.
"""

from __future__ import annotations

import ssl
import subprocess
import sys
from pathlib import Path

import pytest

from kafkalite.broker.config.broker_config import BrokerConfig, ConfigError
from kafkalite.broker.network.listeners import configure_listeners
from kafkalite.broker.network.tls import (
    TlsConfigError,
    iana_to_openssl,
    normalize_pem,
    server_context,
    ssl_settings,
    subject_rfc2253,
)
from kafkalite.testing_tls import CertificateAuthority, Issued


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> tuple[CertificateAuthority, Issued, Issued]:
    ca = CertificateAuthority(tmp_path_factory.mktemp("pki"))
    return ca, ca.issue("broker", server=True), ca.issue("locked", server=True, password="s3cret")


def _cfg(**props: str) -> BrokerConfig:
    base = {"listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0"}
    base.update(props)
    return BrokerConfig(base)


def test_listener_names_protocols_and_inter_broker_choice() -> None:
    cfg = BrokerConfig(
        {
            "listeners": "INTERNAL://127.0.0.1:9092,EXTERNAL://0.0.0.0:9093",
            "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:SSL",
            "advertised.listeners": "EXTERNAL://kafka.example.com:19093",
            "inter.broker.listener.name": "internal",
            "ssl.keystore.location": "/nowhere",
        }
    )
    assert cfg.security_protocol("EXTERNAL") == "SSL"
    assert cfg.inter_broker_listener_name == "INTERNAL"
    adv = {a.name: (a.host, a.port) for a in cfg.advertised_listeners}
    assert adv == {"INTERNAL": ("127.0.0.1", 9092), "EXTERNAL": ("kafka.example.com", 19093)}
    # security.inter.broker.protocol picks the first listener with that protocol
    cfg2 = _cfg(**{"security.inter.broker.protocol": "SSL"})
    assert cfg2.inter_broker_listener_name == "SSL"


@pytest.mark.parametrize(
    ("props", "needle"),
    [
        ({"listeners": "FOO://127.0.0.1:0"}, "no entry in listener.security.protocol.map"),
        ({"listeners": "SSL://127.0.0.1:1,SSL://127.0.0.1:2"}, "used twice"),
        (
            {"listeners": "PLAINTEXT://127.0.0.1:0", "advertised.listeners": "SSL://h:1"},
            "advertised.listeners names SSL",
        ),
        (
            {"listeners": "PLAINTEXT://127.0.0.1:0", "inter.broker.listener.name": "SSL"},
            "inter.broker.listener.name=SSL",
        ),
    ],
)
def test_listener_configs_that_cannot_start(props: dict[str, str], needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        BrokerConfig(props)


def test_pem_file_and_inline_key_stores(pki: tuple[CertificateAuthority, Issued, Issued]) -> None:
    ca, srv, _ = pki
    ctx = server_context(ssl_settings(_cfg(**{"ssl.keystore.location": str(srv.bundle)}), "SSL"))
    assert isinstance(ctx, ssl.SSLContext) and ctx.verify_mode == ssl.CERT_NONE
    # inline values as a properties file delivers them: `\` continuations drop the line breaks
    key = srv.key.read_text().replace("\n", "")
    chain = srv.cert.read_text().replace("\n", " ")
    cfg = _cfg(
        **{
            "ssl.keystore.key": key,
            "ssl.keystore.certificate.chain": chain,
            "ssl.truststore.certificates": ca.cert.read_text().replace("\n", ""),
            "ssl.client.auth": "required",
        }
    )
    ctx = server_context(ssl_settings(cfg, "SSL"))
    assert ctx.verify_mode == ssl.CERT_REQUIRED
    assert normalize_pem(key) == srv.key.read_text()


def test_sasl_ssl_listeners_ask_for_certificates_only_when_told_so(
    pki: tuple[CertificateAuthority, Issued, Issued],
) -> None:
    """KIP-684: the broker-wide ssl.client.auth is for SSL listeners; a SASL_SSL listener asks for
    a client certificate only through its own listener.name.<name>.ssl.client.auth."""
    ca, srv, _ = pki
    common = {"ssl.keystore.location": str(srv.bundle), "ssl.truststore.location": str(ca.cert)}
    cfg = _cfg(**common, **{"ssl.client.auth": "required"})
    assert server_context(ssl_settings(cfg, "SSL")).verify_mode == ssl.CERT_REQUIRED
    assert server_context(ssl_settings(cfg, "SASL_SSL", sasl=True)).verify_mode == ssl.CERT_NONE
    own = _cfg(**common, **{"listener.name.sasl_ssl.ssl.client.auth": "required"})
    assert server_context(ssl_settings(own, "SASL_SSL", sasl=True)).verify_mode == ssl.CERT_REQUIRED


def test_encrypted_key(pki: tuple[CertificateAuthority, Issued, Issued]) -> None:
    _, _, locked = pki
    ok = _cfg(**{"ssl.keystore.location": str(locked.bundle), "ssl.key.password": "s3cret"})
    server_context(ssl_settings(ok, "SSL"))
    wrong = _cfg(**{"ssl.keystore.location": str(locked.bundle), "ssl.key.password": "nope"})
    with pytest.raises(
        TlsConfigError, match=r"cannot decrypt the private key: wrong ssl.key.password"
    ):
        server_context(ssl_settings(wrong, "SSL"))
    missing = _cfg(**{"ssl.keystore.location": str(locked.bundle)})
    with pytest.raises(TlsConfigError, match=r"encrypted; set ssl\.key\.password"):
        server_context(ssl_settings(missing, "SSL"))


def test_listener_override_wins(pki: tuple[CertificateAuthority, Issued, Issued]) -> None:
    _, srv, _ = pki
    cfg = _cfg(
        **{
            "ssl.keystore.location": "/no/such/file.pem",
            "listener.name.ssl.ssl.keystore.location": str(srv.bundle),
        }
    )
    s = ssl_settings(cfg, "SSL")
    assert s.get("ssl.keystore.location") == str(srv.bundle)
    assert s.name("ssl.keystore.location") == "listener.name.ssl.ssl.keystore.location"
    server_context(s)


@pytest.mark.parametrize(
    ("props", "needle"),
    [
        (
            {"ssl.keystore.type": "JKS", "ssl.keystore.location": "x.jks"},
            "ssl.keystore.type=JKS: only PEM is supported",
        ),
        (
            {"listener.name.ssl.ssl.truststore.type": "PKCS12", "ssl.client.auth": "required"},
            "listener.name.ssl.ssl.truststore.type=PKCS12: only PEM is supported",
        ),
        (
            {"ssl.keystore.location": "/no/such/file.pem"},
            "ssl.keystore.location=/no/such/file.pem: cannot read it",
        ),
        ({}, "listener SSL is SSL but has no key store"),
        ({"ssl.client.auth": "maybe"}, "ssl.client.auth=maybe"),
        ({"ssl.enabled.protocols": "SSLv3"}, "unknown protocol 'SSLv3'"),
        ({"ssl.cipher.suites": "NOT_A_CIPHER"}, "OpenSSL knows none"),
    ],
)
def test_tls_configs_that_cannot_start(
    pki: tuple[CertificateAuthority, Issued, Issued], props: dict[str, str], needle: str
) -> None:
    _, srv, _ = pki
    base = {"ssl.keystore.location": str(srv.bundle)}
    if "ssl.keystore.location" in props or "ssl.keystore.type" in props or not props:
        base = {}
    base.update(props)
    with pytest.raises(TlsConfigError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        configure_listeners(_cfg(**base))


def test_cli_reports_a_bad_tls_config_without_traceback(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "kafkalite.cli.main",
            "serve",
            "--data-dir",
            str(tmp_path),
            "--override",
            "listeners=SSL://127.0.0.1:0",
            "--override",
            "ssl.keystore.location=/no/such/key.pem",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode != 0
    assert "ssl.keystore.location=/no/such/key.pem: cannot read it" in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout


def test_cipher_names_and_subjects() -> None:
    assert iana_to_openssl("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256") == "ECDHE-RSA-AES128-GCM-SHA256"
    assert iana_to_openssl("TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256") == (
        "ECDHE-ECDSA-CHACHA20-POLY1305"
    )
    assert iana_to_openssl("ECDHE-RSA-AES256-GCM-SHA384") == "ECDHE-RSA-AES256-GCM-SHA384"
    cert = {
        "subject": (
            (("countryName", "US"),),
            (("organizationName", "Acme, Inc."),),
            (("organizationalUnitName", "eng"), ("userId", "7")),
            (("commonName", "svc"),),
        )
    }
    assert subject_rfc2253(cert) == "CN=svc,OU=eng+UID=7,O=Acme\\, Inc.,C=US"
    assert subject_rfc2253({}) is None
    assert subject_rfc2253(None) is None


def test_listener_tls_changes_are_per_broker(
    pki: tuple[CertificateAuthority, Issued, Issued], tmp_path: Path
) -> None:
    from kafkalite.broker.config.dynamic_config import alter_broker
    from kafkalite.protocol.errors import ErrorCode
    from kafkalite.testing import Broker

    _, srv, _ = pki
    props = {"listeners": "SSL://127.0.0.1:0", "ssl.keystore.location": str(srv.bundle)}
    with Broker(tmp_path, config=props) as b:
        change = {"listener.name.ssl.ssl.keystore.location": str(srv.bundle)}
        code, msg = b.call(alter_broker, b.server, "", change, False)
        assert code == ErrorCode.INVALID_REQUEST and "per broker" in str(msg)
        code, msg = b.call(
            alter_broker, b.server, "0", {**change, "ssl.keystore.type": "JKS"}, True
        )
        assert (code == ErrorCode.INVALID_REQUEST and "read-only" in str(msg)) or "JKS" in str(msg)
        code, msg = b.call(alter_broker, b.server, "0", change, False)
        assert (code, msg) == (0, None)


def test_a_malformed_principal_mapping_rule_stops_startup(tmp_path: Path) -> None:
    from kafkalite.broker.server import BrokerServer

    cfg = BrokerConfig(
        {"log.dirs": str(tmp_path), "ssl.principal.mapping.rules": "RULE:^CN=(.*)$/$1/X"}
    )
    with pytest.raises(ConfigError, match=r"ssl\.principal\.mapping\.rules"):
        BrokerServer(cfg)
