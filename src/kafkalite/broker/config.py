"""Broker configuration under Kafka's property names: defaults, types, docs, parsing of server.properties.

Also maps broker-level `log.*` settings to the topic-level names a `LogConfig` and DescribeConfigs use.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafkalite.broker.config_defs import (
    _PY,
    BROKER_CONFIGS,
    BROKER_SYNONYM_GROUPS,
    DYNAMIC_BROKER_CONFIGS,
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
)
from kafkalite.broker.group_config_defs import broker_group_configs_error

log = logging.getLogger("kafkalite.broker.config")

# the table's names, re-exported: callers import them from here
__all__ = [
    "BROKER_CONFIGS",
    "BROKER_SYNONYM_GROUPS",
    "DYNAMIC_BROKER_CONFIGS",
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
    "coerce",
    "is_read_only_broker_config",
    "listener_override_def",
    "load_properties_file",
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
    try:
        v = coerce(defn.type, value)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{defn.name}={value!r}: {exc}") from None
    if defn.at_least is not None and v < defn.at_least:
        raise ConfigError(f"{defn.name}={value!r}: Value must be at least {defn.at_least}")
    if defn.at_most is not None and v > defn.at_most:
        raise ConfigError(f"{defn.name}={value!r}: Value must be no more than {defn.at_most}")


def coerce(type_: int, value: str) -> Any:
    kind = _PY.get(type_, "str")
    if kind == "bool":
        v = value.strip().lower()
        if v not in ("true", "false"):
            raise ValueError("expected true or false")
        return v == "true"
    if kind == "int":
        return int(value)
    if kind == "float":
        return float(value)
    if kind == "list":
        return [x.strip() for x in value.split(",") if x.strip()]
    return value


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
        host = host.strip("[]")
        return Listener(name.upper(), host, int(port))

    def url(self) -> str:
        return f"{self.name}://{self.host}:{self.port}"


def _check_level(name: str, value: str) -> None:
    from kafkalite.broker.log_config import LogLevelError, level_of

    try:
        level_of(value)
    except LogLevelError as exc:
        raise ConfigError(f"{name}: {exc}") from None


class BrokerConfig:
    """Typed view over Kafka-named properties. Unknown names are kept (and logged) for other components."""

    def __init__(self, props: Mapping[str, str] | None = None) -> None:
        self.props: dict[str, str] = {}
        for k, v in (props or {}).items():
            self.props[str(k)] = str(v)
        for k, v in self.props.items():
            defn = BROKER_CONFIGS.get(k) or listener_override_def(k)
            if defn is not None:
                _check(defn, v)
            elif k.startswith("log.level."):
                _check_level(k, v)
            if k == "log.level":
                _check_level(k, v)
            elif k == "log.format" and v.strip().lower() not in ("text", "json"):
                raise ConfigError(f"log.format={v!r}: use text or json")
            elif k not in TOPIC_CONFIGS:
                log.info(
                    "config %s=%s is not a broker setting kafkalite knows; kept as given", k, v
                )
        if self.broker_id < 0:
            raise ConfigError("broker.id must be >= 0")
        why = broker_group_configs_error(self.props)
        if why is not None:
            raise ConfigError(why)
        self.check_listeners()

    @classmethod
    def from_sources(
        cls, file: str | Path | None = None, overrides: Iterable[str] = (), **extra: Any
    ) -> BrokerConfig:
        props: dict[str, str] = load_properties_file(file) if file else {}
        for item in overrides:
            if "=" not in item:
                raise ConfigError(f"--override expects key=value, got {item!r}")
            k, v = item.split("=", 1)
            props[k.strip()] = v.strip()
        for k, v in extra.items():
            props[k.replace("_", ".")] = str(v)
        return cls(props)

    def with_overrides(self, **props: Any) -> BrokerConfig:
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
        for a in map(Listener.parse, self.get("advertised.listeners") or []):
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
    def queued_max_bytes(self) -> int:
        v = int(self.get("queued.max.request.bytes"))
        return v if v > 0 else 16 * 1024 * 1024

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
        if k == "cleanup.policy" and not set(coerce(T_LIST, v)) <= {"delete", "compact"}:
            return f"Invalid value {v} for configuration {k}"
    return None
