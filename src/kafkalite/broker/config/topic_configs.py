"""Describing and changing configs for the admin APIs: topic overrides, broker settings, sources and synonyms.

Topic values resolve override -> dynamic/static broker `log.*` synonym -> built-in default, as Kafka reports them.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kafkalite.broker.config.broker_config import (
    BROKER_CONFIGS,
    SOURCE_DEFAULT,
    SOURCE_TOPIC,
    TOPIC_CONFIGS,
    is_read_only_broker_config,
)
from kafkalite.broker.config.config_defs import is_sensitive_config
from kafkalite.broker.config.config_synonyms import DEPRECATED_IGNORED_CONFIGS
from kafkalite.broker.config.dynamic_config import dynamic_configs
from kafkalite.broker.context import RequestContext
from kafkalite.protocol.errors import ErrorCode
from kafkalite.security.acl import AclOperation, ResourceType
from kafkalite.storage import config as storage_config
from kafkalite.storage.config import LogConfig
from kafkalite.storage.errors import InvalidConfig

if TYPE_CHECKING:
    from kafkalite.broker.server import BrokerServer

log = logging.getLogger("kafkalite.broker.configs")

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_BROKER_LOGGER = 8
RESOURCE_GROUP = 32

_KIND_TO_TYPE = {"boolean": 1, "string": 2, "int": 3, "short": 4, "long": 5, "double": 6, "list": 7}


class ConfigEntry:
    __slots__ = ("name", "value", "source", "read_only", "config_type", "doc", "synonyms")

    def __init__(
        self,
        name: str,
        value: str | None,
        source: int,
        read_only: bool,
        config_type: int,
        doc: str | None,
        synonyms: list[tuple[str, str | None, int]],
    ) -> None:
        self.name = name
        self.value = value
        self.source = source
        self.read_only = read_only
        self.config_type = config_type
        self.doc = doc
        self.synonyms = synonyms


def default_log_config(broker: BrokerServer) -> LogConfig:
    """Log defaults for a topic without overrides: dynamic broker configs over server.properties."""
    return dynamic_configs(broker).log_config()


def topic_entries(broker: BrokerServer, overrides: dict[str, str]) -> list[ConfigEntry]:
    """A topic's configs as Kafka describes them: the override (DYNAMIC_TOPIC_CONFIG) first, then the
    synonyms of its broker setting's most specific spelling (`retention.ms` -> `log.retention.ms`),
    each with its own name, unit and value, looked up as a broker describes that setting. Like Kafka,
    a topic setting whose only broker spelling set is a coarser one (`log.retention.minutes`) answers
    DEFAULT_CONFIG with no synonyms, its value still the one that spelling gives."""
    dyn = dynamic_configs(broker)
    base = dyn.log_config().to_properties()
    types = storage_config.TOPIC_CONFIG_TYPES
    docs = storage_config.TOPIC_CONFIG_DOCS
    out = []
    for name in sorted(storage_config.TOPIC_CONFIG_DEFAULTS):
        synonyms: list[tuple[str, str | None, int]] = []
        if name in overrides:
            synonyms.append((name, overrides[name], SOURCE_TOPIC))
        broker_names = TOPIC_CONFIGS.get(name, ((), 0))[0]
        if broker_names:
            synonyms += dyn.synonyms(broker_names[0])
        value = overrides.get(name, base.get(name))
        source = synonyms[0][2] if synonyms else SOURCE_DEFAULT
        out.append(
            ConfigEntry(
                name,
                value,
                source,
                False,
                _KIND_TO_TYPE.get(types.get(name, ""), 0),
                docs.get(name),
                synonyms,
            )
        )
    return out


def broker_entries(broker: BrokerServer, resource_name: str = "") -> list[ConfigEntry]:
    """Configs of a BROKER resource, as Kafka describes them: "" lists only the cluster-wide dynamic
    defaults; "<broker id>" lists every setting with the source its value comes from."""
    dyn = dynamic_configs(broker)
    per_broker = resource_name != ""
    if per_broker:
        names = set(BROKER_CONFIGS) | set(dyn.cluster_default) | set(dyn.per_broker)
    else:
        names = set(dyn.cluster_default)
    out = []
    for name in sorted(names):
        defn = BROKER_CONFIGS.get(name)
        synonyms = dyn.synonyms(name, per_broker)
        value = synonyms[0][1] if synonyms else None
        source = synonyms[0][2] if synonyms else SOURCE_DEFAULT
        read_only = is_read_only_broker_config(name)
        config_type = defn.type if defn is not None else 0
        doc = defn.doc if defn is not None else None
        if is_sensitive_config(name):  # passwords and private keys are never shown (Kafka's way)
            value = None
            synonyms = [(n, None, s) for n, _, s in synonyms]
        out.append(ConfigEntry(name, value, source, read_only, config_type, doc, synonyms))
    return out


def check_topic_overrides(broker: BrokerServer, overrides: dict[str, str]) -> str | None:
    """Why these topic overrides are invalid, or None."""
    remote = str(overrides.get("remote.storage.enable", "")).strip().lower() == "true"
    if remote and not broker.config.get("remote.log.storage.system.enable"):
        return (  # KIP-405, checked first as Kafka does, in its words
            "Tiered Storage functionality is disabled in the broker. Topic cannot be configured "
            "with remote log storage."
        )
    try:
        LogConfig.from_properties(overrides, default_log_config(broker))
    except InvalidConfig as exc:
        return str(exc)
    return None


def apply_topic_overrides(broker: BrokerServer, topic: str, overrides: dict[str, str]) -> None:
    """Persist new overrides (metadata store and log manager) and apply them to the topic's logs."""
    broker.metadata_store.set_configs(topic, overrides)
    broker.log_manager.set_topic_config(topic, overrides)
    warn_ignored_topic_configs(topic, overrides)


def warn_ignored_topic_configs(topic: str, overrides: dict[str, str]) -> None:
    """A topic created or altered with a deprecated setting Kafka 3.x accepts and ignores
    (message.format.version): one warning, as Kafka logs."""
    for name, value in overrides.items():
        if name in DEPRECATED_IGNORED_CONFIGS:
            log.warning(
                DEPRECATED_IGNORED_CONFIGS[name].format(name=name, value=value, topic=topic)
            )


def config_access_denied(
    ctx: RequestContext, operation: AclOperation, resource_type: int, name: str
) -> tuple[int, str] | None:
    """Kafka's ACL check of DescribeConfigs / AlterConfigs / IncrementalAlterConfigs on one
    resource: `operation` on the topic or group, or on the cluster for a broker or broker logger.
    The error (code, message) to answer, or None when allowed."""
    if resource_type == RESOURCE_TOPIC and not ctx.authorize(operation, ResourceType.TOPIC, name):
        return int(ErrorCode.TOPIC_AUTHORIZATION_FAILED), "Authorization failed."
    if resource_type == RESOURCE_GROUP and not ctx.authorize(operation, ResourceType.GROUP, name):
        return int(ErrorCode.GROUP_AUTHORIZATION_FAILED), "Authorization failed."
    if resource_type in (RESOURCE_BROKER, RESOURCE_BROKER_LOGGER) and not ctx.authorize_cluster(
        operation
    ):
        return int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED), "Authorization failed."
    return None
