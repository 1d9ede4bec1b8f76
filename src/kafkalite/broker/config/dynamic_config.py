"""Dynamic broker configs (Kafka's KIP-226): per-broker and cluster-default `log.*` settings altered at runtime.

Persisted atomically under `<first log dir>/broker-configs/`; precedence per-broker > cluster default > static > default.
"""

from __future__ import annotations

import logging
import os
import ssl
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from kafkalite.broker.config.broker_config import (
    BROKER_CONFIGS,
    SOURCE_DEFAULT,
    SOURCE_DYNAMIC_BROKER,
    SOURCE_DYNAMIC_DEFAULT_BROKER,
    SOURCE_STATIC_BROKER,
    BrokerConfig,
    ConfigError,
    broker_synonyms,
    check_value,
    coerce,
    is_read_only_broker_config,
    listener_override_def,
)
from kafkalite.broker.config.config_synonyms import described_synonyms
from kafkalite.broker.network.connection_quotas import ConnectionLimits
from kafkalite.protocol.errors import ErrorCode
from kafkalite.storage.config import LogConfig
from kafkalite.storage.errors import InvalidConfig

if TYPE_CHECKING:
    from kafkalite.broker.server import BrokerServer

log = logging.getLogger("kafkalite.broker.dynamic_config")

CONFIG_DIR = "broker-configs"
CLUSTER_DEFAULT_FILE = "cluster-default.properties"

Synonym = tuple[str, str | None, int]


class DynamicConfigError(Exception):
    """A refused change: the Kafka error code and a message for the client."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = int(code)
        self.message = message


# -- properties files with Java-style escapes (values may hold any character) --------------------

_ESCAPES = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "=": "\\=", ":": "\\:", "#": "\\#"}
_UNESCAPES = {"n": "\n", "r": "\r", "t": "\t"}


def _escape(text: str) -> str:
    return "".join(_ESCAPES.get(ch, ch) for ch in text)


def _split_line(line: str) -> tuple[str, str] | None:
    """`key=value` with backslash escapes; None for a line without an unescaped separator."""
    key: list[str] = []
    out = key
    value: list[str] = []
    i = 0
    while i < len(line):
        ch = line[i]
        if ch == "\\" and i + 1 < len(line):
            nxt = line[i + 1]
            out.append(_UNESCAPES.get(nxt, nxt))
            i += 2
            continue
        if ch == "=" and out is key:
            out = value
        else:
            out.append(ch)
        i += 1
    if out is key:
        return None
    return "".join(key), "".join(value)


def read_properties(path: Path) -> dict[str, str]:
    props: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.lstrip().startswith(("#", "!")):
            continue
        kv = _split_line(line)
        if kv is not None:
            props[kv[0]] = kv[1]
    return props


def write_properties_atomically(path: Path, props: Mapping[str, str]) -> None:
    """Write to a temp file, fsync it, rename over `path`, fsync the directory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    text = "".join(f"{_escape(k)}={_escape(v)}\n" for k, v in sorted(props.items()))
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


# -- the dynamic layer ----------------------------------------------------------------------------


def _overlay(props: dict[str, str], layer: Mapping[str, str]) -> None:
    """Apply `layer` over `props`, dropping the unit synonyms of each name it sets (Kafka does the
    same, so a dynamic `log.retention.ms` is not shadowed by nor shadows a static `log.retention.hours`)."""
    for k, v in layer.items():
        for syn in broker_synonyms(k):
            props.pop(syn, None)
        props[k] = v


class DynamicBrokerConfig:
    """The dynamic per-broker and cluster-default layers over the static server.properties."""

    def __init__(self, static: BrokerConfig, data_dir: Path) -> None:
        self.static = static
        self.broker_id = static.broker_id
        self.directory = Path(data_dir) / CONFIG_DIR
        self.per_broker: dict[str, str] = {}
        self.cluster_default: dict[str, str] = {}
        self._lock = threading.Lock()

    def _path(self, per_broker: bool) -> Path:
        name = f"broker-{self.broker_id}.properties" if per_broker else CLUSTER_DEFAULT_FILE
        return self.directory / name

    # -- startup
    def load(self) -> None:
        """Read both layers; entries that are read-only or invalid are dropped with an error logged."""
        for per_broker in (False, True):
            path = self._path(per_broker)
            props = read_properties(path) if path.is_file() else {}
            kept: dict[str, str] = {}
            for k, v in props.items():
                try:
                    self._check_names_and_types({k: v})
                except DynamicConfigError as exc:
                    log.error("ignoring dynamic broker config %s=%s from %s: %s", k, v, path, exc)
                    continue
                kept[k] = v
            if per_broker:
                self.per_broker = kept
            else:
                self.cluster_default = kept
        try:
            self.log_config()
        except InvalidConfig as exc:
            log.error("dynamic broker configs do not combine (%s); ignoring them all", exc)
            self.per_broker, self.cluster_default = {}, {}
        if self.per_broker or self.cluster_default:
            log.info(
                "dynamic broker configs: cluster default %s, broker %d %s",
                self.cluster_default,
                self.broker_id,
                self.per_broker,
            )

    # -- views
    def layer(self, per_broker: bool) -> dict[str, str]:
        return dict(self.per_broker if per_broker else self.cluster_default)

    def effective_props(
        self,
        cluster_default: Mapping[str, str] | None = None,
        per_broker: Mapping[str, str] | None = None,
    ) -> dict[str, str]:
        """server.properties with the cluster-default then the per-broker layer applied over it."""
        props = dict(self.static.props)
        _overlay(props, self.cluster_default if cluster_default is None else cluster_default)
        _overlay(props, self.per_broker if per_broker is None else per_broker)
        return props

    def log_config(
        self,
        cluster_default: Mapping[str, str] | None = None,
        per_broker: Mapping[str, str] | None = None,
    ) -> LogConfig:
        """Broker-wide log defaults (what a topic without overrides gets); InvalidConfig on junk."""
        return LogConfig.from_broker_properties(self.effective_props(cluster_default, per_broker))

    def synonyms(self, name: str, per_broker: bool = True) -> list[Synonym]:
        """Where `name`'s value can come from, highest precedence first (Kafka's synonym order)."""
        names = described_synonyms(name)
        layers: list[tuple[Mapping[str, str], int]] = [
            (self.cluster_default, SOURCE_DYNAMIC_DEFAULT_BROKER),
        ]
        if per_broker:
            layers.insert(0, (self.per_broker, SOURCE_DYNAMIC_BROKER))
            layers.append((self.static.props, SOURCE_STATIC_BROKER))
        out: list[Synonym] = []
        for layer, source in layers:
            out.extend((n, layer[n], source) for n in names if n in layer)
        if per_broker:
            for n in names:
                defn = BROKER_CONFIGS.get(n)
                if defn is not None and defn.default is not None:
                    out.append((n, defn.default, SOURCE_DEFAULT))
        # a more specific spelling set above this one is its own entry, not this one's source
        while out and out[0][0] != name:
            out.pop(0)
        return out

    # -- changes
    def _check_names_and_types(self, new: Mapping[str, str]) -> None:
        static = sorted(k for k in new if is_read_only_broker_config(k))
        if static:
            raise DynamicConfigError(
                ErrorCode.INVALID_REQUEST,
                "Cannot update these configs dynamically: "
                f"{', '.join(static)} (read-only: set them in server.properties and restart)",
            )
        for k, v in new.items():
            defn = BROKER_CONFIGS.get(k)
            if defn is None:
                continue
            try:
                coerce(defn.type, v, defn.allowed())
            except (TypeError, ValueError) as exc:
                raise DynamicConfigError(
                    ErrorCode.INVALID_REQUEST, f"Invalid value {v} for configuration {k}: {exc}"
                ) from None
            try:
                check_value(defn, v)
            except ConfigError as exc:
                why = str(exc).split(": ", 1)[-1]
                raise DynamicConfigError(
                    ErrorCode.INVALID_REQUEST, f"Invalid value {v} for configuration {k}: {why}"
                ) from None

    def check(self, resource_name: str, new: Mapping[str, str]) -> None:
        """Raise DynamicConfigError unless `new` may become the resource's whole dynamic set."""
        per_broker = resource_name != ""
        self._check_names_and_types(new)
        try:
            if per_broker:
                self.log_config(per_broker=new)
            else:
                # the default must hold on its own too, not only where this broker overrides it
                self.log_config(cluster_default=new, per_broker={})
                self.log_config(cluster_default=new)
        except InvalidConfig as exc:
            raise DynamicConfigError(
                ErrorCode.INVALID_REQUEST,
                f"Invalid config value for resource ConfigResource(type=BROKER, "
                f"name='{resource_name}'): {exc}",
            ) from None
        self._check_connection_limits(resource_name, new)
        unknown = sorted(k for k in new if k not in BROKER_CONFIGS)
        if unknown:
            # Kafka keeps custom (unknown) broker properties; they change nothing here
            log.info("dynamic broker configs %s are not kafkalite settings; kept as given", unknown)

    def _check_connection_limits(self, resource_name: str, new: Mapping[str, str]) -> None:
        """max.connections* / max.connection.creation.rate (and per listener) must parse."""
        try:
            if resource_name:
                ConnectionLimits.from_props(self.effective_props(per_broker=new))
            else:
                ConnectionLimits.from_props(self.effective_props(cluster_default=new))
        except ConfigError as exc:
            raise DynamicConfigError(
                ErrorCode.INVALID_REQUEST,
                f"Invalid config value for resource ConfigResource(type=BROKER, "
                f"name='{resource_name}'): {exc}",
            ) from None

    def connection_limits(self) -> ConnectionLimits:
        """The connection quotas the effective (static + dynamic) properties set."""
        return ConnectionLimits.from_props(self.effective_props())

    def replace(self, resource_name: str, new: Mapping[str, str]) -> LogConfig:
        """Make `new` the resource's whole dynamic set (validated), persist it; the new log defaults."""
        self.check(resource_name, new)
        per_broker = resource_name != ""
        props = {str(k): str(v) for k, v in new.items()}
        with self._lock:
            write_properties_atomically(self._path(per_broker), props)
            if per_broker:
                self.per_broker = props
            else:
                self.cluster_default = props
            return self.log_config()


# -- glue to the running broker -------------------------------------------------------------------


def dynamic_configs(broker: BrokerServer) -> DynamicBrokerConfig:
    """The broker's dynamic config layers (made with the broker, read from its data dir when it
    starts)."""
    return broker.dynamic_config


def check_broker_resource(broker: BrokerServer, resource_name: str) -> None:
    """Alter*Configs on a BROKER resource: "" (cluster default) or this broker's id."""
    if resource_name == "":
        return
    try:
        node = int(resource_name)
    except ValueError:
        raise DynamicConfigError(
            ErrorCode.INVALID_REQUEST, f"Node id must be an integer, but it is: {resource_name}"
        ) from None
    if node != broker.broker_id:
        raise DynamicConfigError(
            ErrorCode.INVALID_REQUEST,
            f"Unexpected broker id, expected {broker.broker_id}, but received {resource_name}",
        )


def alter_broker(
    broker: BrokerServer, resource_name: str, new: Mapping[str, str], validate_only: bool
) -> tuple[int, str | None]:
    """Replace a BROKER resource's dynamic set (AlterConfigs semantics) and apply it to the logs."""
    tls_contexts = None
    try:
        check_broker_resource(broker, resource_name)
        dyn = dynamic_configs(broker)
        tls_contexts = _check_listener_tls(broker, dyn, resource_name, new)
        if validate_only:
            dyn.check(resource_name, new)
            return 0, None
        cfg = dyn.replace(resource_name, new)
    except DynamicConfigError as exc:
        log.info("broker config change on %r refused: %s", resource_name, exc.message)
        return exc.code, exc.message
    broker.log_manager.update_default_config(cfg)
    broker.connection_quotas.reconfigure(dyn.connection_limits())
    broker.apply_replication_throttles()
    if tls_contexts is not None:
        broker.install_listener_tls(tls_contexts)
    where = f"broker {resource_name}" if resource_name else "cluster default"
    log.info("dynamic broker configs of %s now %s", where, dict(new))
    return 0, None


def _check_listener_tls(
    broker: BrokerServer, dyn: DynamicBrokerConfig, resource_name: str, new: Mapping[str, str]
) -> dict[str, ssl.SSLContext] | None:
    """Listener TLS settings (`listener.name.<name>.ssl.*`) in a change: None when it touches none;
    else the listeners' new TLS contexts, built now so a key store that cannot work is refused
    before anything is stored. Only a broker's own resource may carry them (as in Kafka)."""
    old = dyn.per_broker if resource_name else dyn.cluster_default
    touched = {
        k
        for k in set(new) | set(old)
        if listener_override_def(k) is not None and new.get(k) != old.get(k)
    }
    if not touched:
        return None
    if resource_name == "":
        raise DynamicConfigError(
            ErrorCode.INVALID_REQUEST,
            f"{', '.join(sorted(touched))}: listener TLS settings are per broker; "
            "alter the resource named by the broker id",
        )
    try:
        return dict(broker.build_listener_tls(new))
    except ConfigError as exc:
        raise DynamicConfigError(ErrorCode.INVALID_CONFIG, str(exc)) from None
