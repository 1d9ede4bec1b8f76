"""SASL on a listener: its settings (enabled mechanisms, JAAS users, re-authentication) and the
per-connection authentication state table (SaslHandshake v0/v1, SaslAuthenticate, KIP-368 sessions).
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kafkalite.broker.config.broker_config import SASL_SECURITY_PROTOCOLS, BrokerConfig, ConfigError
from kafkalite.protocol.errors import ErrorCode
from kafkalite.security.jaas import (
    PLAIN_LOGIN_MODULE,
    SCRAM_LOGIN_MODULE,
    AppConfigurationEntry,
    JaasConfigError,
    parse_sasl_jaas_config,
    plain_users,
)
from kafkalite.security.mechanisms import (
    SUPPORTED_MECHANISMS,
    SaslLogin,
    UnsupportedSaslMechanismError,
    create_sasl_server,
)
from kafkalite.security.principal import KafkaPrincipal
from kafkalite.security.sasl import (
    PLAIN,
    IllegalSaslStateError,
    SaslAuthenticationError,
    SaslServer,
)
from kafkalite.security.scram import ScramCredential

log = logging.getLogger("kafkalite.broker.sasl")

API_VERSIONS_KEY = 18
SASL_HANDSHAKE_KEY = 17
SASL_AUTHENTICATE_KEY = 36
# mechanisms Kafka has and kafkalite refuses at startup rather than offering and failing later
UNSUPPORTED_KAFKA_MECHANISMS = frozenset({"GSSAPI", "OAUTHBEARER"})

# (mechanism, user name) -> the stored SCRAM credential, or None
CredentialLookup = Callable[[str, str], ScramCredential | None]


@dataclass(frozen=True)
class SaslListenerSettings:
    """One SASL listener's mechanisms, its PLAIN users, the KIP-368 session lifetime, and the
    logins (per mechanism) other brokers use to reach it."""

    listener: str
    mechanisms: tuple[str, ...]
    plain_users: Mapping[str, str] = field(repr=False)
    reauth_ms: int = 0
    failed_delay_ms: int = 100
    logins: Mapping[str, SaslLogin] = field(default_factory=dict, repr=False)


def _listener_prop(config: BrokerConfig, listener: str, name: str) -> str | None:
    """`listener.name.<listener>.<name>` (Kafka writes the listener in lower case), else `<name>`."""
    for key in (f"listener.name.{listener.lower()}.{name}", f"listener.name.{listener}.{name}"):
        if key in config.props:
            return config.props[key]
    return config.raw(name)


def _jaas_entry(
    config: BrokerConfig, listener: str, mechanism: str
) -> tuple[AppConfigurationEntry, str] | None:
    lower = listener.lower()
    for key in (f"listener.name.{lower}.{mechanism.lower()}.sasl.jaas.config", "sasl.jaas.config"):
        text = config.props.get(key)
        if text:
            try:
                return parse_sasl_jaas_config(text), key
            except JaasConfigError as exc:
                raise ConfigError(f"{key}: {exc}") from None
    return None


def sasl_settings(config: BrokerConfig, listener: str) -> SaslListenerSettings:
    """The settings of SASL listener `listener`; ConfigError when they cannot work (GSSAPI,
    OAUTHBEARER, an unknown mechanism, PLAIN without a PlainLoginModule JAAS config)."""
    raw = _listener_prop(config, listener, "sasl.enabled.mechanisms") or ""
    mechanisms = tuple(m.strip().upper() for m in raw.split(",") if m.strip())
    if not mechanisms:
        raise ConfigError(f"listener {listener}: sasl.enabled.mechanisms is empty")
    for m in mechanisms:
        if m in UNSUPPORTED_KAFKA_MECHANISMS:
            raise ConfigError(
                f"listener {listener}: SASL mechanism {m} in sasl.enabled.mechanisms is not "
                f"supported by kafkalite (supported: {', '.join(SUPPORTED_MECHANISMS)}); "
                "refusing to start"
            )
        if m not in SUPPORTED_MECHANISMS:
            raise ConfigError(
                f"listener {listener}: unknown SASL mechanism {m} in sasl.enabled.mechanisms "
                f"(supported: {', '.join(SUPPORTED_MECHANISMS)})"
            )
    users: dict[str, str] = {}
    logins: dict[str, SaslLogin] = {}
    for m in mechanisms:
        found = _jaas_entry(config, listener, m)
        wanted = PLAIN_LOGIN_MODULE if m == PLAIN else SCRAM_LOGIN_MODULE
        if found is None or found[0].login_module != wanted:
            if m == PLAIN:
                where = f"listener.name.{listener.lower()}.plain.sasl.jaas.config"
                raise ConfigError(
                    f"listener {listener} enables PLAIN but {where} (or sasl.jaas.config) names "
                    f"no {PLAIN_LOGIN_MODULE}; set it, e.g. {PLAIN_LOGIN_MODULE} required "
                    'username="admin" password="..." user_admin="...";'
                )
            continue  # SCRAM users live in the metadata store; the JAAS entry is optional
        entry, _ = found
        if m == PLAIN:
            users = plain_users(entry)
        username, password = entry.options.get("username"), entry.options.get("password")
        if username and password is not None:
            logins[m] = SaslLogin(m, username, password)
    reauth = _listener_prop(config, listener, "connections.max.reauth.ms") or "0"
    return SaslListenerSettings(
        listener,
        mechanisms,
        users,
        int(reauth),
        int(config.get("connection.failed.authentication.delay.ms")),
        logins,
    )


def configure_sasl(config: BrokerConfig) -> dict[str, SaslListenerSettings]:
    """Settings of every SASL listener; the inter-broker login is checked here, before startup."""
    out: dict[str, SaslListenerSettings] = {}
    for lst in config.listeners:
        if config.security_protocol(lst.name) in SASL_SECURITY_PROTOCOLS:
            out[lst.name] = sasl_settings(config, lst.name)
    inter = config.inter_broker_listener_name
    if inter in out and config.zookeeper_connect is not None:
        inter_broker_login(config, out[inter])
    return out


def inter_broker_login(config: BrokerConfig, settings: SaslListenerSettings) -> SaslLogin:
    mech = str(config.get("sasl.mechanism.inter.broker.protocol")).upper()
    if mech not in settings.mechanisms:
        raise ConfigError(
            f"sasl.mechanism.inter.broker.protocol={mech} is not enabled on the inter-broker "
            f"listener {settings.listener} (sasl.enabled.mechanisms: {', '.join(settings.mechanisms)})"
        )
    login = settings.logins.get(mech)
    if login is None:
        raise ConfigError(
            f"inter-broker listener {settings.listener}: the {mech} JAAS config "
            f"(listener.name.{settings.listener.lower()}.{mech.lower()}.sasl.jaas.config) needs "
            "username and password for brokers to log in to each other"
        )
    return login


class SaslState(enum.Enum):
    HANDSHAKE = "HANDSHAKE"  # ApiVersions and SaslHandshake only
    AUTHENTICATE = "AUTHENTICATE"  # after SaslHandshake v1: SaslAuthenticate requests
    RAW_TOKEN = "RAW_TOKEN"  # after SaslHandshake v0: unframed tokens, no request header
    REAUTH_AUTHENTICATE = "REAUTH_AUTHENTICATE"  # KIP-368: SaslAuthenticate on a live session
    AUTHENTICATED = "AUTHENTICATED"
    FAILED = "FAILED"


_VALID_PREVIOUS: dict[SaslState, frozenset[SaslState]] = {
    SaslState.AUTHENTICATE: frozenset({SaslState.HANDSHAKE}),
    SaslState.RAW_TOKEN: frozenset({SaslState.HANDSHAKE}),
    SaslState.REAUTH_AUTHENTICATE: frozenset({SaslState.AUTHENTICATED}),
    SaslState.AUTHENTICATED: frozenset(
        {SaslState.AUTHENTICATE, SaslState.RAW_TOKEN, SaslState.REAUTH_AUTHENTICATE}
    ),
    SaslState.FAILED: frozenset(
        {
            SaslState.HANDSHAKE,
            SaslState.AUTHENTICATE,
            SaslState.RAW_TOKEN,
            SaslState.REAUTH_AUTHENTICATE,
        }
    ),
    SaslState.HANDSHAKE: frozenset(),
}

# the requests each state lets through (RAW_TOKEN frames are not requests at all)
_ALLOWED_KEYS: dict[SaslState, frozenset[int]] = {
    SaslState.HANDSHAKE: frozenset({API_VERSIONS_KEY, SASL_HANDSHAKE_KEY}),
    SaslState.AUTHENTICATE: frozenset({SASL_AUTHENTICATE_KEY}),
    SaslState.REAUTH_AUTHENTICATE: frozenset({SASL_AUTHENTICATE_KEY}),
    SaslState.RAW_TOKEN: frozenset(),
    SaslState.FAILED: frozenset(),
}


class SaslSession:
    """One connection's authentication: a state table checked in `transition`, the mechanism's
    server exchange, and (KIP-368) when the session expires. No I/O: the connection acts on what
    the methods return or raise."""

    def __init__(
        self,
        settings: SaslListenerSettings,
        lookup_credential: CredentialLookup,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self._lookup_credential = lookup_credential
        self._clock = clock
        self.state = SaslState.HANDSHAKE
        self.mechanism: str | None = None
        self.exchange: SaslServer | None = None
        self.principal: KafkaPrincipal | None = None
        self.expires_at: float | None = None  # monotonic seconds; None: the session never expires

    def transition(self, to: SaslState) -> None:
        if self.state not in _VALID_PREVIOUS[to]:
            raise IllegalSaslStateError(
                f"Unexpected SASL state change from {self.state.value} to {to.value}"
            )
        self.state = to

    def rejection(self, api_key: int) -> str | None:
        """Why a request with `api_key` may not be served now (the connection closes), or None."""
        state = self.state
        if state is SaslState.AUTHENTICATED:
            if api_key == SASL_HANDSHAKE_KEY and self.settings.reauth_ms > 0:
                return None  # KIP-368 re-authentication starts
            if self.expires_at is not None and self._clock() >= self.expires_at:
                return (
                    "its SASL session expired (connections.max.reauth.ms="
                    f"{self.settings.reauth_ms}) and it did not re-authenticate"
                )
            return None
        if api_key in _ALLOWED_KEYS[state]:
            return None
        if state is SaslState.FAILED:
            return "its SASL authentication failed"
        return (
            f"request api_key={api_key} arrived in SASL state {state.value}; "
            "only ApiVersions, SaslHandshake and SaslAuthenticate are allowed before authentication"
        )

    @property
    def reauthenticating(self) -> bool:
        return self.state is SaslState.REAUTH_AUTHENTICATE

    def handshake(self, mechanism: str, version: int) -> int:
        """SaslHandshake: the error code to answer (UNSUPPORTED_SASL_MECHANISM names the list)."""
        reauth = self.state is SaslState.AUTHENTICATED
        if reauth and (version < 1 or mechanism != self.mechanism):
            self.state = SaslState.FAILED
            return int(ErrorCode.ILLEGAL_SASL_STATE)
        try:
            self.exchange = create_sasl_server(
                mechanism,
                self.settings.mechanisms,
                lookup_password=self.settings.plain_users.get,
                lookup_credential=lambda user: self._lookup_credential(mechanism, user),
            )
        except UnsupportedSaslMechanismError:
            if not reauth:
                self.state = SaslState.FAILED
            return int(ErrorCode.UNSUPPORTED_SASL_MECHANISM)
        self.mechanism = mechanism
        if reauth:
            self.transition(SaslState.REAUTH_AUTHENTICATE)
        else:
            self.transition(SaslState.AUTHENTICATE if version >= 1 else SaslState.RAW_TOKEN)
        return 0

    def authenticate(self, token: bytes) -> bytes:
        """One client token in, the server's token out. SaslAuthenticationError (message safe to
        send) or IllegalSaslStateError end the session in FAILED."""
        if self.state not in (
            SaslState.AUTHENTICATE,
            SaslState.RAW_TOKEN,
            SaslState.REAUTH_AUTHENTICATE,
        ):
            raise IllegalSaslStateError(
                f"Unexpected SaslAuthenticate request in SASL state {self.state.value}"
            )
        exchange = self.exchange
        assert exchange is not None
        try:
            answer = exchange.evaluate(token)
        except (SaslAuthenticationError, IllegalSaslStateError):
            self.state = SaslState.FAILED
            raise
        if exchange.complete:
            principal = exchange.principal
            assert principal is not None
            if self.reauthenticating and principal != self.principal:
                self.state = SaslState.FAILED
                raise SaslAuthenticationError(
                    f"Cannot change principals during re-authentication from {self.principal}: "
                    f"{principal}"
                )
            self.principal = principal
            self.exchange = None
            self.transition(SaslState.AUTHENTICATED)
            reauth_ms = self.settings.reauth_ms
            self.expires_at = self._clock() + reauth_ms / 1000 if reauth_ms > 0 else None
        return answer

    @property
    def session_lifetime_ms(self) -> int:
        return self.settings.reauth_ms if self.state is SaslState.AUTHENTICATED else 0

    @property
    def username(self) -> str | None:
        """The user the exchange is about, for log lines; never a secret."""
        if self.exchange is not None and self.exchange.authentication_id:
            return self.exchange.authentication_id
        return self.principal.name if self.principal is not None else None
