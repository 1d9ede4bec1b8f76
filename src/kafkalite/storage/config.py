"""LogConfig: the per-topic log settings under Kafka's topic-property names, with Kafka's defaults.

Parses/prints `segment.bytes`-style properties (topic overrides and broker `log.*` defaults) for the
broker's CreateTopics / DescribeConfigs / AlterConfigs paths.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kafkalite.storage.errors import InvalidConfig

LONG_MAX = 2**63 - 1

CLEANUP_POLICIES = ("delete", "compact")
SUBJECT_NAME_STRATEGIES = ("TopicNameStrategy", "RecordNameStrategy", "TopicRecordNameStrategy")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")


@dataclass(slots=True)
class LogConfig:
    """Per-log settings; field names are Kafka topic-property names in snake_case."""

    segment_bytes: int = 1024 * 1024 * 1024
    segment_ms: int = 7 * 24 * 3600 * 1000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    retention_ms: int = 7 * 24 * 3600 * 1000
    retention_bytes: int = -1
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    cleanup_policy: str = "delete"
    delete_retention_ms: int = 24 * 3600 * 1000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5
    max_message_bytes: int = 1048588
    message_timestamp_type: str = "CreateTime"
    message_timestamp_difference_max_ms: int = LONG_MAX
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = LONG_MAX
    file_delete_delay_ms: int = 60000
    compression_type: str = "producer"
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    preallocate: bool = False
    message_downconversion_enable: bool = True
    # deprecated in Kafka 3.x and ignored once inter.broker.protocol.version is 3.0 or later, as here
    message_format_version: str = "3.0-IV1"
    # KIP-73 replication throttles: "partition:broker,..." or "*" (read by cluster.replication_quota)
    leader_replication_throttled_replicas: str = ""
    follower_replication_throttled_replicas: str = ""
    # -- KIP-405 tiered storage (KIP-950 for the disable policy); -2: the local part follows retention.*
    remote_storage_enable: bool = False
    local_retention_ms: int = -2
    local_retention_bytes: int = -2
    remote_log_copy_disable: bool = False
    remote_log_delete_on_disable: bool = False
    # -- Schema Registry validation on produce (Confluent Server's names; kafkalite.schemas) --
    confluent_key_schema_validation: bool = False
    confluent_value_schema_validation: bool = False
    confluent_key_subject_name_strategy: str = (
        "io.confluent.kafka.serializers.subject.TopicNameStrategy"
    )
    confluent_value_subject_name_strategy: str = (
        "io.confluent.kafka.serializers.subject.TopicNameStrategy"
    )
    kafkalite_schema_payload_validation: bool = False

    # -- derived views -------------------------------------------------------------------------
    @property
    def compact(self) -> bool:
        return "compact" in _policies(self.cleanup_policy)

    @property
    def max_segment_ms(self) -> int:
        """How long the active segment may stay open: segment.ms, or max.compaction.lag.ms when
        that is shorter on a compacted log (KIP-354: a record must become cleanable in time)."""
        if self.compact:
            return min(self.segment_ms, self.max_compaction_lag_ms)
        return self.segment_ms

    @property
    def delete(self) -> bool:
        return "delete" in _policies(self.cleanup_policy)

    @property
    def local_retention_ms_effective(self) -> int:
        """How long segments stay on local disk: local.retention.ms, or retention.ms when -2."""
        return self.retention_ms if self.local_retention_ms == -2 else self.local_retention_ms

    @property
    def local_retention_bytes_effective(self) -> int:
        """The local part's size bound: local.retention.bytes, or retention.bytes when -2."""
        return (
            self.retention_bytes if self.local_retention_bytes == -2 else self.local_retention_bytes
        )

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    # -- property-name conversions ------------------------------------------------------------
    @classmethod
    def from_properties(cls, props: Mapping[str, str], base: LogConfig | None = None) -> LogConfig:
        """A copy of `base` (defaults if None) with Kafka topic properties applied; InvalidConfig on junk."""
        values: dict[str, Any] = {}
        for name, raw in props.items():
            spec = _SPECS.get(name)
            if spec is None:
                raise InvalidConfig(f"unknown topic config {name!r}")
            values[spec.field] = spec.parse(name, raw)
        cfg = dataclasses.replace(base if base is not None else cls(), **values)
        cfg.validate()
        return cfg

    @classmethod
    def from_broker_properties(
        cls, props: Mapping[str, str], base: LogConfig | None = None
    ) -> LogConfig:
        """Broker-wide defaults from server.properties names (`log.segment.bytes`, `log.retention.hours`...)."""
        topic_props: dict[str, str] = {}
        # lower-precedence units first so the finer-grained name wins, as in Kafka
        for bname, (tname, scale) in _BROKER_NAMES.items():
            if bname in props:
                value = props[bname]
                if scale != 1:
                    try:
                        value = str(int(value) * scale)
                    except ValueError as e:
                        raise InvalidConfig(f"{bname}={value!r} is not an integer") from e
                topic_props[tname] = value
        return cls.from_properties(topic_props, base)

    def to_properties(self) -> dict[str, str]:
        """Every setting under its Kafka property name, as strings."""
        return {name: spec.show(getattr(self, spec.field)) for name, spec in _SPECS.items()}

    def overrides_from(self, base: LogConfig) -> dict[str, str]:
        """The properties where this config differs from `base`."""
        mine, theirs = self.to_properties(), base.to_properties()
        return {k: v for k, v in mine.items() if theirs.get(k) != v}

    def validate(self) -> None:
        if self.segment_bytes < 14:
            raise InvalidConfig("segment.bytes must be at least 14")
        if self.segment_ms < 1:
            raise InvalidConfig("segment.ms must be at least 1")
        if self.segment_index_bytes < 8:
            raise InvalidConfig("segment.index.bytes must be at least 8")
        if self.index_interval_bytes < 0:
            raise InvalidConfig("index.interval.bytes must be non-negative")
        if self.flush_messages < 1 or self.flush_ms < 0:
            raise InvalidConfig("flush.messages must be >= 1 and flush.ms >= 0")
        if not 0.0 <= self.min_cleanable_dirty_ratio <= 1.0:
            raise InvalidConfig("min.cleanable.dirty.ratio must be in [0, 1]")
        if self.max_message_bytes < 0:
            raise InvalidConfig("max.message.bytes must be non-negative")
        if self.retention_ms < -1:
            raise InvalidConfig("retention.ms must be >= -1")
        for p in _policies(self.cleanup_policy):
            if p not in CLEANUP_POLICIES:
                raise InvalidConfig(f"cleanup.policy {self.cleanup_policy!r} is not delete/compact")
        if self.message_timestamp_type not in TIMESTAMP_TYPES:
            raise InvalidConfig(f"message.timestamp.type {self.message_timestamp_type!r}")
        if self.compression_type not in COMPRESSION_TYPES:
            raise InvalidConfig(f"compression.type {self.compression_type!r}")
        if self.min_insync_replicas < 1:
            raise InvalidConfig("min.insync.replicas must be at least 1")
        if not is_message_format_version(self.message_format_version):
            raise InvalidConfig(
                f"message.format.version={self.message_format_version!r}: Version "
                f"`{self.message_format_version}` is not a valid version (a Kafka release such "
                "as 2.8 or 3.0-IV1)"
            )
        validate_remote_storage(self)
        for strategy in (
            self.confluent_key_subject_name_strategy,
            self.confluent_value_subject_name_strategy,
        ):
            if strategy.rsplit(".", 1)[-1] not in SUBJECT_NAME_STRATEGIES:
                raise InvalidConfig(
                    f"subject name strategy {strategy!r}: expected one of "
                    f"{', '.join(SUBJECT_NAME_STRATEGIES)}"
                )
        for name in (LEADER_THROTTLED_REPLICAS, FOLLOWER_THROTTLED_REPLICAS):
            value = getattr(self, _SPECS[name].field)
            if not valid_throttled_replicas(value):
                raise InvalidConfig(
                    f"{name}={value!r}: {name} must be the literal '*' or a list of replicas in "
                    "the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],..."
                )


# Kafka's release versions a message.format.version may name (MetadataVersion's strings), each also
# with an internal version suffix such as "-IV1"
_RELEASES = re.compile(
    r"(0\.8\.[0-2]|0\.9\.0|0\.10\.[0-2]|0\.11\.0|1\.[01]|2\.[0-8]|3\.[0-9])(\.\d+)?(-IV\d+)?"
)


def validate_remote_storage(cfg: LogConfig) -> None:
    """Kafka's checks of a topic with remote.storage.enable=true (LogConfig.validateTopicLogConfigValues):
    not compacted, and the local part no larger nor longer-lived than the whole log."""
    for name in ("local.retention.ms", "local.retention.bytes"):
        value = getattr(cfg, _SPECS[name].field)
        if value < -2:
            raise InvalidConfig(
                f"Invalid value {value} for configuration {name}: Value must be at least -2"
            )
    if not cfg.remote_storage_enable:
        return
    if cfg.compact:
        raise InvalidConfig("Remote log storage is unsupported for the compacted topics")
    for local_name, whole_name in (
        ("local.retention.bytes", "retention.bytes"),
        ("local.retention.ms", "retention.ms"),
    ):
        whole = getattr(cfg, _SPECS[whole_name].field)
        local = getattr(cfg, _SPECS[local_name].field)
        if whole == -1 or local == -2:
            continue
        if local == -1:
            raise InvalidConfig(
                f"Invalid value -1 for configuration {local_name}: Value must not be -1 as "
                f"{whole_name} value is set as {whole}."
            )
        if local > whole:
            raise InvalidConfig(
                f"Invalid value {local} for configuration {local_name}: Value must not be more "
                f"than {whole_name} property value: {whole}"
            )


def is_message_format_version(value: str) -> bool:
    """Whether `value` names a Kafka release as message.format.version accepts it (Kafka 3.x)."""
    return _RELEASES.fullmatch(value.strip()) is not None


def _policies(value: str) -> list[str]:
    return [p.strip() for p in value.split(",") if p.strip()]


LEADER_THROTTLED_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_THROTTLED_REPLICAS = "follower.replication.throttled.replicas"
_THROTTLED_REPLICA = re.compile(r"[0-9]+:[0-9]+")


def valid_throttled_replicas(value: str) -> bool:
    """Kafka's ThrottledReplicaListValidator: '*', or comma-separated partition:broker pairs."""
    items = [i.strip() for i in value.split(",")]
    if "".join(items) == "*":
        return True
    return all(i == "" or _THROTTLED_REPLICA.fullmatch(i) for i in items)


# -- property table ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Spec:
    field: str
    kind: str  # "int" | "long" | "double" | "boolean" | "string" | "list"
    doc: str
    parse: Callable[[str, str], Any]
    show: Callable[[Any], str]


_INTEGER = re.compile(r"[+-]?[0-9]+")


def _parse_int(name: str, raw: str, kind: str = "LONG") -> int:
    text = str(raw).strip()
    if not _INTEGER.fullmatch(text):
        raise InvalidConfig(
            f"Invalid value {raw} for configuration {name}: Not a number of type {kind} "
            "(expected a whole number)"
        )
    return int(text)


def _parse_int32(name: str, raw: str) -> int:
    value = _parse_int(name, raw, "INT")
    if not -(2**31) <= value < 2**31:
        raise InvalidConfig(
            f"Invalid value {raw} for configuration {name}: Not a number of type INT "
            f"(expected a whole number in {-(2**31)}..{2**31 - 1})"
        )
    return value


def _parse_float(name: str, raw: str) -> float:
    try:
        value = float(str(raw).strip())
    except ValueError:
        value = math.nan
    if math.isnan(value):
        raise InvalidConfig(
            f"Invalid value {raw} for configuration {name}: Not a number of type DOUBLE "
            "(expected a number)"
        )
    return value


def _parse_bool(name: str, raw: str) -> bool:
    v = str(raw).strip().lower()
    if v not in ("true", "false"):
        raise InvalidConfig(
            f"Invalid value {raw} for configuration {name}: Expected value to be either true or false"
        )
    return v == "true"


def _parse_str(name: str, raw: str) -> str:
    return str(raw).strip()


def _parse_list(name: str, raw: str) -> str:
    return ",".join(_policies(str(raw).strip().lower()))


def _show_bool(v: Any) -> str:
    return "true" if v else "false"


def _spec(field: str, kind: str, doc: str) -> _Spec:
    parse: Callable[[str, str], Any]
    show: Callable[[Any], str] = str
    if kind == "int":
        parse = _parse_int32
    elif kind == "long":
        parse = _parse_int
    elif kind == "double":
        parse = _parse_float
    elif kind == "boolean":
        parse, show = _parse_bool, _show_bool
    elif kind == "list":
        parse = _parse_list
    else:
        parse = _parse_str
    return _Spec(field, kind, doc, parse, show)


_SPECS: dict[str, _Spec] = {
    "segment.bytes": _spec("segment_bytes", "int", "Size at which the log rolls to a new segment."),
    "segment.ms": _spec("segment_ms", "long", "Time after which the log rolls even if not full."),
    "segment.jitter.ms": _spec(
        "segment_jitter_ms", "long", "Random jitter subtracted from segment.ms."
    ),
    "segment.index.bytes": _spec(
        "segment_index_bytes", "int", "Maximum size of an offset index file."
    ),
    "index.interval.bytes": _spec(
        "index_interval_bytes", "int", "Bytes between offset-index entries."
    ),
    "retention.ms": _spec(
        "retention_ms", "long", "Age after which old segments are deleted (-1: never)."
    ),
    "retention.bytes": _spec(
        "retention_bytes",
        "long",
        "Partition size past which old segments are deleted (-1: no limit).",
    ),
    "flush.messages": _spec("flush_messages", "long", "Messages appended between forced fsyncs."),
    "flush.ms": _spec("flush_ms", "long", "Maximum time data stays unflushed."),
    "cleanup.policy": _spec("cleanup_policy", "list", "delete, compact, or both."),
    "delete.retention.ms": _spec(
        "delete_retention_ms", "long", "How long compaction keeps tombstones."
    ),
    "min.compaction.lag.ms": _spec(
        "min_compaction_lag_ms", "long", "Minimum age before a record may be compacted."
    ),
    "max.compaction.lag.ms": _spec(
        "max_compaction_lag_ms", "long", "Maximum time a record stays uncompacted."
    ),
    "min.cleanable.dirty.ratio": _spec(
        "min_cleanable_dirty_ratio",
        "double",
        "Dirty fraction that makes a log eligible for cleaning.",
    ),
    "max.message.bytes": _spec("max_message_bytes", "int", "Largest record batch size allowed."),
    "message.timestamp.type": _spec(
        "message_timestamp_type", "string", "CreateTime or LogAppendTime."
    ),
    "message.timestamp.difference.max.ms": _spec(
        "message_timestamp_difference_max_ms",
        "long",
        "Allowed skew between record and broker time.",
    ),
    "message.timestamp.before.max.ms": _spec(
        "message_timestamp_before_max_ms", "long", "Allowed age of a record timestamp."
    ),
    "message.timestamp.after.max.ms": _spec(
        "message_timestamp_after_max_ms", "long", "Allowed future skew of a record timestamp."
    ),
    "file.delete.delay.ms": _spec(
        "file_delete_delay_ms", "long", "Delay before a deleted segment's files are removed."
    ),
    "compression.type": _spec(
        "compression_type", "string", "Final compression codec (producer keeps the producer's)."
    ),
    "min.insync.replicas": _spec(
        "min_insync_replicas", "int", "Replicas that must acknowledge acks=all writes."
    ),
    "unclean.leader.election.enable": _spec(
        "unclean_leader_election_enable", "boolean", "Allow out-of-sync replicas to lead."
    ),
    "preallocate": _spec("preallocate", "boolean", "Preallocate segment files."),
    "message.downconversion.enable": _spec(
        "message_downconversion_enable", "boolean", "Down-convert for old fetch versions."
    ),
    "message.format.version": _spec(
        "message_format_version",
        "string",
        "Deprecated (Kafka 3.x): accepted and ignored, as Kafka ignores it once "
        "inter.broker.protocol.version is 3.0 or later; batches are kept as the producer sent them.",
    ),
    LEADER_THROTTLED_REPLICAS: _spec(
        "leader_replication_throttled_replicas",
        "list",
        "Replicas whose replication the leader throttles (leader.replication.throttled.rate): "
        "partitionId:brokerId,... naming the leader broker, or '*' for every replica.",
    ),
    FOLLOWER_THROTTLED_REPLICAS: _spec(
        "follower_replication_throttled_replicas",
        "list",
        "Replicas whose replication the follower throttles (follower.replication.throttled.rate): "
        "partitionId:brokerId,... naming the follower broker, or '*' for every replica.",
    ),
    # -- KIP-405 tiered storage (one block: storage/remote, cluster/remote_log_manager) -------------
    "remote.storage.enable": _spec(
        "remote_storage_enable",
        "boolean",
        "Keep this topic's rolled segments in the remote tier (needs the broker's "
        "remote.log.storage.system.enable=true; not for compacted topics).",
    ),
    "local.retention.ms": _spec(
        "local_retention_ms",
        "long",
        "How long a segment stays on local disk once copied to the remote tier (-2: retention.ms).",
    ),
    "local.retention.bytes": _spec(
        "local_retention_bytes",
        "long",
        "Size of the local part past which copied segments leave local disk (-2: retention.bytes).",
    ),
    "remote.log.copy.disable": _spec(
        "remote_log_copy_disable",
        "boolean",
        "KIP-950: stop copying new segments; the remote ones stay readable and expire by retention.",
    ),
    "remote.log.delete.on.disable": _spec(
        "remote_log_delete_on_disable",
        "boolean",
        "KIP-950: turning remote.storage.enable off deletes the remote segments.",
    ),
    # -- Schema Registry validation on produce --
    "confluent.key.schema.validation": _spec(
        "confluent_key_schema_validation",
        "boolean",
        "Refuse (INVALID_RECORD) a record whose key is not framed with a schema id registered "
        "under its subject.",
    ),
    "confluent.value.schema.validation": _spec(
        "confluent_value_schema_validation",
        "boolean",
        "Refuse (INVALID_RECORD) a record whose value is not framed with a schema id registered "
        "under its subject.",
    ),
    "confluent.key.subject.name.strategy": _spec(
        "confluent_key_subject_name_strategy",
        "string",
        "How a key's subject is named: TopicNameStrategy, RecordNameStrategy or "
        "TopicRecordNameStrategy.",
    ),
    "confluent.value.subject.name.strategy": _spec(
        "confluent_value_subject_name_strategy",
        "string",
        "How a value's subject is named: TopicNameStrategy, RecordNameStrategy or "
        "TopicRecordNameStrategy.",
    ),
    "kafkalite.schema.payload.validation": _spec(
        "kafkalite_schema_payload_validation",
        "boolean",
        "With key/value schema validation on, also check each payload against its schema.",
    ),
}

PROPERTY_TO_FIELD: dict[str, str] = {k: s.field for k, s in _SPECS.items()}
FIELD_TO_PROPERTY: dict[str, str] = {s.field: k for k, s in _SPECS.items()}
TOPIC_CONFIG_DEFAULTS: dict[str, str] = LogConfig().to_properties()
TOPIC_CONFIG_DOCS: dict[str, str] = {k: s.doc for k, s in _SPECS.items()}
TOPIC_CONFIG_TYPES: dict[str, str] = {k: s.kind for k, s in _SPECS.items()}

# broker (server.properties) name -> (topic property, multiplier); later entries win
_BROKER_NAMES: dict[str, tuple[str, int]] = {
    "log.segment.bytes": ("segment.bytes", 1),
    "log.message.format.version": ("message.format.version", 1),
    "log.roll.hours": ("segment.ms", 3600 * 1000),
    "log.roll.ms": ("segment.ms", 1),
    "log.roll.jitter.hours": ("segment.jitter.ms", 3600 * 1000),
    "log.roll.jitter.ms": ("segment.jitter.ms", 1),
    "log.index.size.max.bytes": ("segment.index.bytes", 1),
    "log.index.interval.bytes": ("index.interval.bytes", 1),
    "log.retention.hours": ("retention.ms", 3600 * 1000),
    "log.retention.minutes": ("retention.ms", 60 * 1000),
    "log.retention.ms": ("retention.ms", 1),
    "log.retention.bytes": ("retention.bytes", 1),
    "log.local.retention.ms": ("local.retention.ms", 1),
    "log.local.retention.bytes": ("local.retention.bytes", 1),
    "log.flush.interval.messages": ("flush.messages", 1),
    "log.flush.interval.ms": ("flush.ms", 1),
    "log.cleanup.policy": ("cleanup.policy", 1),
    "log.cleaner.delete.retention.ms": ("delete.retention.ms", 1),
    "log.cleaner.min.compaction.lag.ms": ("min.compaction.lag.ms", 1),
    "log.cleaner.max.compaction.lag.ms": ("max.compaction.lag.ms", 1),
    "log.cleaner.min.cleanable.ratio": ("min.cleanable.dirty.ratio", 1),
    "message.max.bytes": ("max.message.bytes", 1),
    "log.message.timestamp.type": ("message.timestamp.type", 1),
    "log.message.timestamp.difference.max.ms": ("message.timestamp.difference.max.ms", 1),
    "log.segment.delete.delay.ms": ("file.delete.delay.ms", 1),
    "compression.type": ("compression.type", 1),
    "min.insync.replicas": ("min.insync.replicas", 1),
    "unclean.leader.election.enable": ("unclean.leader.election.enable", 1),
    "log.preallocate": ("preallocate", 1),
    "log.message.downconversion.enable": ("message.downconversion.enable", 1),
}
