"""The SASL listener settings (startup refusals) and the per-connection authentication state table,
driven without I/O; a property: no sequence of client steps authenticates without the right password.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.broker.config.broker_config import BrokerConfig, ConfigError
from kafkalite.broker.security.sasl_auth import (
    SaslListenerSettings,
    SaslSession,
    SaslState,
    configure_sasl,
    sasl_settings,
)
from kafkalite.cluster import zk_data as zd
from kafkalite.cluster.metadata import LocalMetadataStore
from kafkalite.protocol.errors import ErrorCode
from kafkalite.security.principal import KafkaPrincipal
from kafkalite.security.sasl import (
    IllegalSaslStateError,
    SaslAuthenticationError,
    plain_client_token,
)
from kafkalite.security.scram import ScramClient, make_credential

JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-pw";'
)
CRED = make_credential("SCRAM-SHA-256", "bob-pw")


def _settings(reauth_ms: int = 0) -> SaslListenerSettings:
    return SaslListenerSettings(
        "SASL_PLAINTEXT",
        ("PLAIN", "SCRAM-SHA-256"),
        {"alice": "alice-pw", "admin": "admin-secret"},
        reauth_ms,
    )


def _session(reauth_ms: int = 0, clock: list[float] | None = None) -> SaslSession:
    now = clock if clock is not None else [0.0]
    return SaslSession(
        _settings(reauth_ms),
        lambda mech, user: CRED if (mech, user) == ("SCRAM-SHA-256", "bob") else None,
        clock=lambda: now[0],
    )


def test_settings_from_listener_jaas_and_mechanisms() -> None:
    cfg = BrokerConfig(
        {
            "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
            "listener.name.sasl_plaintext.connections.max.reauth.ms": "5000",
        }
    )
    s = sasl_settings(cfg, "SASL_PLAINTEXT")
    assert s.mechanisms == ("PLAIN", "SCRAM-SHA-512")
    assert dict(s.plain_users) == {"admin": "admin-secret", "alice": "alice-pw"}
    assert s.reauth_ms == 5000 and s.logins["PLAIN"].username == "admin"
    assert "secret" not in repr(s)


@pytest.mark.parametrize(
    ("props", "needle"),
    [
        ({"sasl.enabled.mechanisms": "GSSAPI"}, "GSSAPI .* not supported by kafkalite"),
        ({"sasl.enabled.mechanisms": "PLAIN,OAUTHBEARER"}, "OAUTHBEARER"),
        ({"sasl.enabled.mechanisms": "PLAIN"}, "enables PLAIN but .*plain.sasl.jaas.config"),
        ({"sasl.enabled.mechanisms": "DIGEST-MD5"}, "unknown SASL mechanism DIGEST-MD5"),
        ({"sasl.enabled.mechanisms": "PLAIN", "sasl.jaas.config": "x required"}, "semi-colon"),
        (
            {
                "sasl.enabled.mechanisms": "PLAIN",
                "sasl.jaas.config": JAAS,
                "zookeeper.connect": "127.0.0.1:2181",
                "inter.broker.listener.name": "SASL_PLAINTEXT",
                "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256",
            },
            "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-256 is not enabled",
        ),
    ],
)
def test_sasl_configs_that_cannot_start(props: dict[str, str], needle: str) -> None:
    cfg = BrokerConfig({"listeners": "SASL_PLAINTEXT://127.0.0.1:0", **props})
    with pytest.raises(ConfigError, match=needle):
        configure_sasl(cfg)


def test_plain_on_handshake_v1() -> None:
    s = _session()
    assert s.rejection(18) is None and s.rejection(17) is None
    assert "only ApiVersions" in (s.rejection(3) or "")
    assert s.handshake("PLAIN", 1) == 0 and s.state is SaslState.AUTHENTICATE
    assert s.rejection(3) is not None and s.rejection(36) is None
    assert s.authenticate(plain_client_token("alice", "alice-pw")) == b""
    assert s.state is SaslState.AUTHENTICATED
    assert s.principal == KafkaPrincipal.user("alice")
    assert s.rejection(3) is None and s.expires_at is None


def test_scram_on_handshake_v0_raw_tokens() -> None:
    s = _session()
    assert s.handshake("SCRAM-SHA-256", 0) == 0 and s.state is SaslState.RAW_TOKEN
    client = ScramClient("SCRAM-SHA-256", "bob", "bob-pw")
    final = client.final_message(s.authenticate(client.first_message()))
    client.verify(s.authenticate(final))
    assert s.principal == KafkaPrincipal.user("bob")


def test_unsupported_mechanism_and_wrong_password_fail_the_session() -> None:
    s = _session()
    assert s.handshake("GSSAPI", 1) == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert s.state is SaslState.FAILED and s.rejection(36) is not None
    s = _session()
    s.handshake("PLAIN", 1)
    with pytest.raises(SaslAuthenticationError, match="Invalid username or password") as e:
        s.authenticate(plain_client_token("alice", "nope"))
    assert "nope" not in str(e.value) and s.username == "alice"
    assert s.state is SaslState.FAILED
    with pytest.raises(IllegalSaslStateError):
        s.authenticate(b"again")


def test_reauthentication_and_session_expiry() -> None:
    clock = [100.0]
    s = _session(reauth_ms=1000, clock=clock)
    s.handshake("PLAIN", 1)
    s.authenticate(plain_client_token("alice", "alice-pw"))
    assert s.session_lifetime_ms == 1000 and s.expires_at == 101.0
    clock[0] = 100.9
    assert s.rejection(0) is None
    assert s.handshake("PLAIN", 1) == 0 and s.state is SaslState.REAUTH_AUTHENTICATE
    assert s.rejection(0) is not None  # nothing but SaslAuthenticate while re-authenticating
    s.authenticate(plain_client_token("alice", "alice-pw"))
    assert s.expires_at == pytest.approx(101.9)
    clock[0] = 102.0
    assert "expired" in (s.rejection(0) or "")
    # a re-authentication may not change the principal
    s.handshake("PLAIN", 1)
    with pytest.raises(SaslAuthenticationError, match="Cannot change principals"):
        s.authenticate(plain_client_token("admin", "admin-secret"))
    assert s.state is SaslState.FAILED


def test_reauthentication_may_not_switch_mechanism() -> None:
    s = _session(reauth_ms=1000)
    s.handshake("PLAIN", 1)
    s.authenticate(plain_client_token("alice", "alice-pw"))
    assert s.handshake("SCRAM-SHA-256", 1) == ErrorCode.ILLEGAL_SASL_STATE


_STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("handshake"), st.sampled_from(["PLAIN", "SCRAM-SHA-256", "GSSAPI"])),
        st.tuples(st.just("token"), st.binary(max_size=40)),
        st.tuples(st.just("plain"), st.sampled_from(["alice", "bob", ""])),
    ),
    max_size=8,
)


@settings(max_examples=300, deadline=None)
@given(_STEPS, st.integers(0, 1))
def test_no_step_sequence_authenticates_without_the_password(
    steps: list[tuple[str, object]], version: int
) -> None:
    s = _session()
    for kind, arg in steps:
        try:
            if kind == "handshake":
                s.handshake(str(arg), version)
            elif kind == "token":
                s.authenticate(bytes(arg))  # type: ignore[arg-type]
            else:
                s.authenticate(plain_client_token(str(arg) or "x", "wrong-pw"))
        except (SaslAuthenticationError, IllegalSaslStateError, ValueError):
            pass
        assert s.state is not SaslState.AUTHENTICATED
        assert s.principal is None


def test_credentials_in_the_data_dir_are_hashed(tmp_path: Path) -> None:
    store = LocalMetadataStore(tmp_path)
    store.load()
    store.alter_scram_credentials("bob", {"SCRAM-SHA-256": CRED})
    again = LocalMetadataStore(tmp_path)
    again.load()
    assert again.user_scram_credentials("bob") == {"SCRAM-SHA-256": CRED}
    assert "bob-pw" not in (tmp_path / "kafkalite-scram-credentials.json").read_text()
    again.alter_scram_credentials("bob", {}, ["SCRAM-SHA-256"])
    assert again.scram_credentials() == {}


def test_zookeeper_user_paths_are_sanitized_as_kafka_does() -> None:
    assert zd.user_config_path("alice") == "/config/users/alice"
    assert zd.user_config_path("CN=a b,O=x") == "/config/users/CN%3Da%20b%2CO%3Dx"
    assert zd.desanitize_entity_name("CN%3Da%20b%2CO%3Dx") == "CN=a b,O=x"
    assert zd.decode_config_change("p", zd.encode_config_change("users/alice")) == "users/alice"
