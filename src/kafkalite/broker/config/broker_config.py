"""Broker configuration under Kafka's property names: defaults, types, docs, parsing of server.properties.

Also maps broker-level `log.*` settings to the topic-level names a `LogConfig` and DescribeConfigs use.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafkalite.broker.config.config_defs import (
    BROKER_CONFIGS,
    BROKER_SYNONYM_GROUPS,
    DYNAMIC_BROKER_CONFIGS,
    IGNORED_KAFKA_CONFIGS,
    LONG_MAX,
    SASL_CONFIG_DEFS,
    SOURCE_DEFAULT,
    SOURCE_DYNAMIC_BROKER,
    SOURCE_DYNAMIC_DEFAULT_BROKER,
    SOURCE_STATIC_BROKER,
    SOURCE_TOPIC,
    SSL_CONFIG_DEFS,
    STATIC_KAFKA_CONFIGS,
    T_BOOLEAN,
    T_DOUBLE,
    T_INT,
    T_LIST,
    T_LONG,
    T_SHORT,
    T_STRING,
    TOPIC_CONFIGS,
    ConfigDef,
    broker_synonyms,
    is_read_only_broker_config,
    is_sensitive_config,
)
from kafkalite.broker.config.config_synonyms import DEPRECATED_IGNORED_CONFIGS
from kafkalite.broker.config.config_types import coerce
from kafkalite.broker.config.group_config_defs import broker_group_configs_error
from kafkalite.storage.config import LogConfig, is_message_format_version
from kafkalite.storage.errors import InvalidConfig

log = logging.getLogger("kafkalite.broker.config")

# the table's names, re-exported: callers import them from here
__all__ = [
    "BROKER_CONFIGS",
    "DEPRECATED_IGNORED_CONFIGS",
    "BROKER_SYNONYM_GROUPS",
    "DYNAMIC_BROKER_CONFIGS",
    "IGNORED_KAFKA_CONFIGS",
    "LONG_MAX",
    "SOURCE_DEFAULT",
    "SOURCE_DYNAMIC_BROKER",
    "SOURCE_DYNAMIC_DEFAULT_BROKER",
    "SOURCE_STATIC_BROKER",
    "SECURITY_PROTOCOLS",
    "SOURCE_TOPIC",
    "SUPPORTED_SECURITY_PROTOCOLS",
    "STATIC_KAFKA_CONFIGS",
    "T_BOOLEAN",
    "T_DOUBLE",
    "T_INT",
    "T_LIST",
    "T_LONG",
    "T_SHORT",
    "T_STRING",
    "TOPIC_CONFIGS",
    "BrokerConfig",
    "ConfigDef",
    "ConfigError",
    "Listener",
    "broker_synonyms",
    "check_value",
    "closest_config_name",
    "coerce",
    "is_read_only_broker_config",
    "listener_override_def",
    "load_properties_file",
    "log_startup_config",
    "parse_properties_text",
    "validate_topic_configs",
]


_TO_MS = {
    "log.retention.minutes": 60_000,
    "log.retention.hours": 3_600_000,
    "log.roll.hours": 3_600_000,
    "log.roll.jitter.hours": 3_600_000,
}


class ConfigError(ValueError):
    """A property with a value of the wrong type or an impossible combination."""


def parse_properties_text(text: str) -> dict[str, str]:
    """Java-properties subset: `key=value` or `key: value` lines, `#`/`!` comments, trailing `\\` continuations."""
    props: dict[str, str] = {}
    pending = ""
    for raw in text.splitlines():
        line = pending + raw.strip()
        pending = ""
        if not line or line[0] in "#!":
            continue
        if line.endswith("\\"):
            pending = line[:-1]
            continue
        for i, ch in enumerate(line):
            if ch in "=:":
                props[line[:i].strip()] = line[i + 1 :].strip()
                break
        else:
            props[line] = ""
    return props


def load_properties_file(path: str | Path) -> dict[str, str]:
    return parse_properties_text(Path(path).read_text(encoding="utf-8"))


def _check(defn: ConfigDef, value: str) -> None:
    """ConfigError, in one line naming the property, the value and what is allowed, unless `value`
    is of the setting's type and inside its range or choices."""
    try:
        v = coerce(defn.type, value, defn.allowed())
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{defn.name}={value}: {exc}") from None
    if defn.valid is not None:
        allowed = {c.lower() for c in defn.valid}
        for item in v if isinstance(v, list) else [v]:
            if str(item).strip().lower() not in allowed:
                raise ConfigError(f"{defn.name}={value}: use {defn.allowed()}")
    if v is None or isinstance(v, (list, str, bool)):
        return
    if defn.at_least is not None and v < defn.at_least:
        raise ConfigError(f"{defn.name}={value}: Value must be at least {defn.at_least}")
    if defn.at_most is not None and v > defn.at_most:
        raise ConfigError(f"{defn.name}={value}: Value must be no more than {defn.at_most}")


check_value = _check  # for AlterConfigs: the same type, range and choice checks as at startup


def closest_config_name(name: str) -> str | None:
    """The declared broker, topic or ignored-Kafka name closest to a misspelt `name`, or None."""
    known = [*BROKER_CONFIGS, *TOPIC_CONFIGS, *IGNORED_KAFKA_CONFIGS]
    found = difflib.get_close_matches(name, known, n=1, cutoff=0.75)
    return found[0] if found else None


# Kafka's security protocols and their wire ids (UpdateMetadata endpoints)
SECURITY_PROTOCOLS: tuple[str, ...] = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SECURITY_PROTOCOL_IDS: dict[str, int] = {
    "PLAINTEXT": 0,
    "SSL": 1,
    "SASL_PLAINTEXT": 2,
    "SASL_SSL": 3,
}
# what this broker can serve; a listener with any other protocol stops startup
SUPPORTED_SECURITY_PROTOCOLS: frozenset[str] = frozenset(
    {"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}
)
SASL_SECURITY_PROTOCOLS: frozenset[str] = frozenset({"SASL_PLAINTEXT", "SASL_SSL"})
TLS_SECURITY_PROTOCOLS: frozenset[str] = frozenset({"SSL", "SASL_SSL"})
_LISTENER_DEFS = {d.name: d for d in (*SSL_CONFIG_DEFS, *SASL_CONFIG_DEFS)}
_JAAS_DEF = _LISTENER_DEFS["sasl.jaas.config"]


def listener_override_def(name: str) -> ConfigDef | None:
    """The definition behind `listener.name.<listener>.ssl.*` / `.sasl.*` (and the per-mechanism
    `listener.name.<listener>.<mechanism>.sasl.jaas.config`), or None for any other name."""
    if not name.startswith("listener.name."):
        return None
    _, _, rest = name[len("listener.name.") :].partition(".")
    if rest.endswith(".sasl.jaas.config"):
        return _JAAS_DEF
    return _LISTENER_DEFS.get(rest)


@dataclass(frozen=True)
class Listener:
    name: str
    host: str
    port: int

    @staticmethod
    def parse(url: str) -> Listener:
        name, sep, rest = url.partition("://")
        if not sep:
            name, rest = "PLAINTEXT", url
        host, _, port = rest.rpartition(":")
        if not port.isdigit():
            raise ConfigError(f"listener {url!r} needs a port")
        if int(port) > 65535:
            raise ConfigError(f"listener {url}: port {port} is not in 0..65535")
        host = host.strip("[]")
        return Listener(name.upper(), host, int(port))

    def url(self) -> str:
        return f"{self.name}://{self.host}:{self.port}"


def _overlap(host_a: str, host_b: str) -> bool:
    """Whether two listener hosts can collide on one port (the same host, or a wildcard)."""
    wild = ("", "0.0.0.0", "::")
    return host_a == host_b or host_a in wild or host_b in wild


def _unknown_note(name: str) -> str:
    """One line about a property kafkalite does not read: ignored on purpose, or probably misspelt."""
    if name in IGNORED_KAFKA_CONFIGS:
        return f"{name} is a Kafka setting ignored by kafkalite ({IGNORED_KAFKA_CONFIGS[name]})"
    if name in TOPIC_CONFIGS:
        syn = TOPIC_CONFIGS[name][0][0]
        return f"{name} is a topic setting, not a broker one; the broker-wide default is {syn}"
    near = closest_config_name(name)
    hint = f"; did you mean {near}?" if near else ""
    return f"unknown config {name} is not read by kafkalite{hint}"


def _check_level(name: str, value: str) -> None:
    from kafkalite.broker.config.log_config import LogLevelError, level_of

    try:
        level_of(value)
    except LogLevelError as exc:
        raise ConfigError(f"{name}={value}: {exc}") from None


class BrokerConfig:
    """Typed view over Kafka-named properties. Unknown names are kept (and logged) for other components."""

    def __init__(self, props: Mapping[str, str] | None = None) -> None:
        self.props: dict[str, str] = {}
        for k, v in (props or {}).items():
            self.props[str(k)] = str(v)
        # names kafkalite does not read, one line each (logged by log_startup_summary)
        self.warnings: list[str] = []
        for k, v in self.props.items():
            defn = BROKER_CONFIGS.get(k) or listener_override_def(k)
            if defn is not None:
                _check(defn, v)
                if k == "log.level":
                    _check_level(k, v)
                if k == "log.message.format.version" and not is_message_format_version(v):
                    raise ConfigError(
                        f"{k}={v}: Version `{v}` is not a valid version "
                        "(a Kafka release such as 2.8 or 3.0-IV1)"
                    )
                if k in DEPRECATED_IGNORED_CONFIGS:
                    self.warnings.append(DEPRECATED_IGNORED_CONFIGS[k].format(name=k, value=v))
            elif k.startswith("log.level."):
                _check_level(k, v)
            elif k.startswith("listener.name."):
                continue  # per-listener settings kafkalite does not read are checked in check_listeners
            elif k.startswith(("rsm.config.", "rlmm.config.")):
                continue  # the remote storage / metadata managers' own (broker.remote_storage)
            else:
                self.warnings.append(_unknown_note(k))
        if self.broker_id < 0:
            raise ConfigError(f"broker.id={self.broker_id}: must be >= 0")
        why = broker_group_configs_error(self.props)
        if why is not None:
            raise ConfigError(why)
        self.check_listeners()
        self._check_log_settings()

    def _check_log_settings(self) -> None:
        """The log.* defaults must make a valid topic config together; log dirs must be directories."""
        try:
            LogConfig.from_properties(self.topic_defaults())
        except InvalidConfig as exc:
            raise ConfigError(f"log defaults: {exc}") from None
        for d in self.log_dirs:
            if d.exists() and not d.is_dir():
                name = "log.dirs" if self.get("log.dirs") else "log.dir"
                raise ConfigError(f"{name}={d}: not a directory (a file is in the way)")
        lo, hi = (
            int(self.get(n))
            for n in ("group.min.session.timeout.ms", "group.max.session.timeout.ms")
        )
        if lo > hi:
            raise ConfigError(
                f"group.min.session.timeout.ms={lo}: must be <= group.max.session.timeout.ms ({hi})"
            )

    def non_default(self) -> dict[str, str]:
        """The properties set to something other than their built-in default, secrets masked."""
        out: dict[str, str] = {}
        for k, v in sorted(self.props.items()):
            defn = BROKER_CONFIGS.get(k)
            if defn is not None and defn.default == v:
                continue
            out[k] = "[hidden]" if is_sensitive_config(k) else v
        return out

    @classmethod
    def from_sources(
        cls, file: str | Path | None = None, overrides: Iterable[str] = (), **extra: object
    ) -> BrokerConfig:
        props: dict[str, str] = load_properties_file(file) if file else {}
        for item in overrides:
            if "=" not in item:
                raise ConfigError(f"--override expects key=value, got {item!r}")
            k, v = item.split("=", 1)
            props[k.strip()] = v.strip()
        for name, value in extra.items():
            props[name.replace("_", ".")] = str(value)
        return cls(props)

    def with_overrides(self, **props: object) -> BrokerConfig:
        merged = dict(self.props)
        merged.update({k: str(v) for k, v in props.items()})
        return BrokerConfig(merged)

    # -- generic access
    def is_set(self, name: str) -> bool:
        return name in self.props

    def raw(self, name: str) -> str | None:
        if name in self.props:
            return self.props[name]
        defn = BROKER_CONFIGS.get(name)
        return defn.default if defn else None

    def get(self, name: str, default: Any = None) -> Any:
        # untyped on purpose: the value's type is its definition's, found by name at runtime (the
        # properties text is decoded here, the codec boundary of config); typed callers use the
        # properties below
        raw = self.raw(name)
        if raw is None:
            return default
        defn = BROKER_CONFIGS.get(name)
        return coerce(defn.type, raw) if defn else raw

    # -- typed properties used by the broker
    @property
    def broker_id(self) -> int:
        if "node.id" in self.props and "broker.id" not in self.props:
            return int(self.props["node.id"])
        return int(self.get("broker.id"))

    @property
    def zookeeper_connect(self) -> str | None:
        """Set: cluster mode (ZooKeeper); None: a single-node broker."""
        zk = self.get("zookeeper.connect")
        return str(zk).strip() or None if zk else None

    @property
    def listeners(self) -> list[Listener]:
        return [Listener.parse(u) for u in self.get("listeners")]

    @property
    def security_protocol_map(self) -> dict[str, str]:
        """listener.security.protocol.map as {LISTENER NAME: PROTOCOL}."""
        out: dict[str, str] = {}
        for pair in self.get("listener.security.protocol.map"):
            name, sep, proto = pair.partition(":")
            name, proto = name.strip().upper(), proto.strip().upper()
            if not sep or not name or proto not in SECURITY_PROTOCOLS:
                raise ConfigError(
                    f"listener.security.protocol.map: {pair!r} is not NAME:PROTOCOL with PROTOCOL "
                    f"one of {', '.join(SECURITY_PROTOCOLS)}"
                )
            out[name] = proto
        return out

    def security_protocol(self, listener_name: str) -> str:
        """The security protocol of a listener (ConfigError when the map has no entry for it)."""
        proto = self.security_protocol_map.get(listener_name.upper())
        if proto is None:
            raise ConfigError(
                f"listener {listener_name} has no entry in listener.security.protocol.map "
                f"(add {listener_name}:PLAINTEXT or {listener_name}:SSL)"
            )
        return proto

    @property
    def advertised_listeners(self) -> list[Listener]:
        """The advertised address of each listener, in the order of `listeners` (a listener missing
        from advertised.listeners advertises its own address)."""
        adv = {a.name: a for a in map(Listener.parse, self.get("advertised.listeners") or [])}
        return [adv.get(lst.name, lst) for lst in self.listeners]

    @property
    def inter_broker_listener_name(self) -> str:
        """The listener brokers use to reach each other: inter.broker.listener.name, else the first
        listener whose protocol is security.inter.broker.protocol (else the first listener)."""
        names = [lst.name for lst in self.listeners]
        explicit = self.props.get("inter.broker.listener.name")
        if explicit:
            if "security.inter.broker.protocol" in self.props:
                raise ConfigError(
                    "set only one of inter.broker.listener.name and security.inter.broker.protocol"
                )
            if explicit.upper() not in names:
                raise ConfigError(
                    f"inter.broker.listener.name={explicit} is not one of the listeners "
                    f"({', '.join(names)})"
                )
            return explicit.upper()
        wanted = str(self.get("security.inter.broker.protocol")).upper()
        for name in names:
            if self.security_protocol(name) == wanted:
                return name
        if "security.inter.broker.protocol" in self.props or self.zookeeper_connect:
            raise ConfigError(
                f"security.inter.broker.protocol={wanted}: no listener uses that protocol "
                f"({', '.join(names)}); set inter.broker.listener.name"
            )
        return names[0]

    def check_listeners(self) -> None:
        """ConfigError unless every listener has a unique name, a protocol kafkalite serves, and the
        advertised and inter-broker names match listeners. Never falls back to plaintext."""
        listeners = self.listeners
        if not listeners:
            raise ConfigError("listeners is empty")
        names = [lst.name for lst in listeners]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ConfigError(
                f"listeners: the name {dup[0]} is used twice; listener names must be unique"
            )
        for lst in listeners:
            proto = self.security_protocol(lst.name)
            if proto not in SUPPORTED_SECURITY_PROTOCOLS:
                raise ConfigError(
                    f"listener {lst.name} ({lst.url()}) uses security protocol {proto}, which "
                    f"kafkalite does not support yet (supported: "
                    f"{', '.join(sorted(SUPPORTED_SECURITY_PROTOCOLS))}); refusing to start "
                    "rather than serve it without the security it promises"
                )
        bound: dict[int, Listener] = {}
        for lst in listeners:
            other = bound.get(lst.port)
            if other is not None and lst.port != 0 and _overlap(other.host, lst.host):
                raise ConfigError(
                    f"listeners={self.raw('listeners')}: {other.name} and {lst.name} both bind "
                    f"port {lst.port}; give each listener its own port"
                )
            bound[lst.port] = lst
        for a in map(Listener.parse, self.get("advertised.listeners") or []):
            if a.host in ("0.0.0.0", "::", ""):
                raise ConfigError(
                    f"advertised.listeners={self.raw('advertised.listeners')}: {a.host or 'an empty host'} "
                    "is not an address clients can connect to; advertise this host's name or IP "
                    f"(e.g. {a.name}://broker1.example.com:{a.port})"
                )
            if a.name not in names:
                raise ConfigError(
                    f"advertised.listeners names {a.name}, which is not one of the listeners "
                    f"({', '.join(names)})"
                )
        self.inter_broker_listener_name  # noqa: B018  # validates
        for k in self.props:
            if k.startswith("listener.name."):
                lname = k[len("listener.name.") :].split(".", 1)[0].upper()
                if lname not in names:
                    log.warning("%s: there is no listener named %s", k, lname)

    @property
    def log_dirs(self) -> list[Path]:
        dirs = self.get("log.dirs")
        return [Path(d) for d in dirs] if dirs else [Path(self.get("log.dir"))]

    @property
    def num_partitions(self) -> int:
        return int(self.get("num.partitions"))

    @property
    def auto_create_topics(self) -> bool:
        return bool(self.get("auto.create.topics.enable"))

    @property
    def message_max_bytes(self) -> int:
        return int(self.get("message.max.bytes"))

    @property
    def socket_request_max_bytes(self) -> int:
        return int(self.get("socket.request.max.bytes"))

    @property
    def connections_max_idle_ms(self) -> int:
        return int(self.get("connections.max.idle.ms"))

    @property
    def queued_max_request_bytes(self) -> int:
        """KIP-72's memory pool size; -1 (or 0): unbounded."""
        return int(self.get("queued.max.request.bytes"))

    # -- topic-level defaults derived from broker settings
    def topic_default(self, topic_prop: str) -> tuple[str | None, str | None]:
        """(value, broker synonym it came from or None for the built-in default) of a topic property."""
        synonyms, _ = TOPIC_CONFIGS[topic_prop]
        for syn in synonyms:
            if syn in self.props:
                v = self.props[syn]
                if syn in _TO_MS:
                    v = str(int(v) * _TO_MS[syn])
                return v, syn
        # built-in defaults of the most specific synonym that has one
        for syn in synonyms:
            defn = BROKER_CONFIGS[syn]
            if defn.default is not None:
                v = defn.default
                if syn in _TO_MS:
                    v = str(int(v) * _TO_MS[syn])
                return v, None
        if topic_prop == "flush.ms":
            return str(LONG_MAX), None
        return None, None

    def topic_defaults(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for name in TOPIC_CONFIGS:
            v, _ = self.topic_default(name)
            if v is not None:
                out[name] = v
        return out


def log_startup_config(config: BrokerConfig, version: str) -> None:
    """At startup: the version, every property set to something other than its default (secrets
    hidden), and one warning per property kafkalite does not read."""
    settings = config.non_default()
    log.info(
        "kafkalite %s starting; non-default config: %s",
        version,
        ", ".join(f"{k}={v}" for k, v in settings.items()) or "(none: all defaults)",
    )
    for note in config.warnings:
        if " ignored by kafkalite " in note:
            log.info("%s", note)
        else:
            log.warning("%s", note)


def validate_topic_configs(configs: Mapping[str, str | None]) -> str | None:
    """An error message for unknown or ill-typed topic properties, or None."""
    for k, v in configs.items():
        if k not in TOPIC_CONFIGS:
            return f"Unknown topic config name: {k}"
        if v is None:
            continue
        _, type_ = TOPIC_CONFIGS[k]
        try:
            coerce(type_, v)
        except (TypeError, ValueError):
            return f"Invalid value {v} for configuration {k}"
        if k == "message.timestamp.type" and v not in ("CreateTime", "LogAppendTime"):
            return f"Invalid value {v} for configuration {k}: CreateTime or LogAppendTime"
        if k == "cleanup.policy" and not {x.strip() for x in v.split(",") if x.strip()} <= {
            "delete",
            "compact",
        }:
            return f"Invalid value {v} for configuration {k}"
    return None
