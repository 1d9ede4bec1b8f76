"""Kafka's broker property table: names, types, defaults and docs, assembled in one order, and which are read-only.

Its families live beside it (security_, coordinator_, cluster_config_defs, config_synonyms); the typed view is broker.config.
"""

from __future__ import annotations

from dataclasses import replace

from kafkalite.broker.config.cluster_config_defs import CLUSTER_CONFIG_DEFS
from kafkalite.broker.config.config_synonyms import (
    BROKER_SYNONYM_GROUPS,
    CONNECTION_QUOTA_CONFIGS,
    DYNAMIC_BROKER_CONFIGS,
    IGNORED_KAFKA_CONFIGS,
    REPLICATION_THROTTLE_CONFIGS,
    STATIC_KAFKA_CONFIGS,
    TOPIC_CONFIGS,
    broker_synonyms,
)
from kafkalite.broker.config.config_types import (
    _PY,
    LONG_MAX,
    SOURCE_DEFAULT,
    SOURCE_DYNAMIC_BROKER,
    SOURCE_DYNAMIC_DEFAULT_BROKER,
    SOURCE_STATIC_BROKER,
    SOURCE_TOPIC,
    T_BOOLEAN,
    T_DOUBLE,
    T_INT,
    T_LIST,
    T_LONG,
    T_SHORT,
    T_STRING,
    ConfigDef,
)
from kafkalite.broker.config.config_types import define as _d
from kafkalite.broker.config.coordinator_config_defs import (
    SHARE_COORDINATOR_CONFIG_DEFS,
    TRANSACTION_CONFIG_DEFS,
)
from kafkalite.broker.config.group_config_defs import GROUP_COORDINATOR_CONFIG_DEFS
from kafkalite.broker.config.remote_log_config_defs import REMOTE_LOG_CONFIG_DEFS
from kafkalite.broker.config.security_config_defs import (
    SASL_CONFIG_DEFS,
    SECURITY_CONFIG_DEFS,
    SENSITIVE_SUFFIXES,
    SSL_CONFIG_DEFS,
    is_sensitive_config,
)

# the vocabulary, re-exported: broker.config and others import it from here
__all__ = [
    "_PY",
    "LONG_MAX",
    "SOURCE_DEFAULT",
    "SOURCE_DYNAMIC_BROKER",
    "SOURCE_DYNAMIC_DEFAULT_BROKER",
    "SOURCE_STATIC_BROKER",
    "SOURCE_TOPIC",
    "T_BOOLEAN",
    "T_DOUBLE",
    "T_INT",
    "T_LIST",
    "T_LONG",
    "T_SHORT",
    "T_STRING",
    "ConfigDef",
    "GROUP_COORDINATOR_CONFIG_DEFS",
    "BROKER_CONFIGS",
    "DYNAMIC_BROKER_CONFIGS",
    "CONNECTION_QUOTA_CONFIGS",
    "REPLICATION_THROTTLE_CONFIGS",
    "STATIC_KAFKA_CONFIGS",
    "IGNORED_KAFKA_CONFIGS",
    "BROKER_SYNONYM_GROUPS",
    "TOPIC_CONFIGS",
    "SSL_CONFIG_DEFS",
    "SASL_CONFIG_DEFS",
    "SENSITIVE_SUFFIXES",
    "broker_synonyms",
    "is_read_only_broker_config",
    "is_sensitive_config",
]


BROKER_CONFIGS: dict[str, ConfigDef] = {
    c.name: c
    for c in [
        _d("broker.id", T_INT, "0", "The id of this broker (node.id is an alias).", at_least=0),
        _d("node.id", T_INT, None, "Alias of broker.id.", at_least=0),
        _d(
            "listeners",
            T_LIST,
            "PLAINTEXT://127.0.0.1:9092",
            "Listener URLs to bind, e.g. PLAINTEXT://0.0.0.0:9092.",
        ),
        _d(
            "log.level",
            T_STRING,
            "INFO",
            "The root log level (TRACE, DEBUG, INFO, WARN, ERROR, FATAL, OFF); log.level.<logger> "
            "sets one logger (e.g. log.level.kafka.request.logger=DEBUG logs every request).",
        ),
        _d(
            "log.format",
            T_STRING,
            "text",
            "Log lines as text or json (one object per line).",
            valid=("text", "json"),
        ),
        _d(
            "http.listeners",
            T_LIST,
            None,
            "HTTP listener URLs for /metrics, the REST API (/v3) and the console, e.g. "
            "http://127.0.0.1:8080; none when unset.",
        ),
        _d(
            "listener.security.protocol.map",
            T_LIST,
            "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
            "Listener name to security protocol, NAME:PROTOCOL pairs.",
        ),
        _d(
            "inter.broker.listener.name",
            T_STRING,
            None,
            "Listener brokers use to reach each other (default: the first whose protocol is "
            "security.inter.broker.protocol).",
        ),
        _d(
            "security.inter.broker.protocol",
            T_STRING,
            "PLAINTEXT",
            "Security protocol between brokers when inter.broker.listener.name is not set.",
            valid=("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"),
        ),
        *SSL_CONFIG_DEFS,
        _d(
            "advertised.listeners",
            T_LIST,
            None,
            "Listener URLs given to clients; defaults to listeners.",
        ),
        _d("log.dirs", T_LIST, None, "Directories holding partition logs; defaults to log.dir."),
        _d("log.dir", T_STRING, "./data", "The data directory when log.dirs is not set."),
        _d("num.partitions", T_INT, "1", "Partitions of an auto-created topic.", at_least=1),
        _d(
            "default.replication.factor",
            T_INT,
            "1",
            "Replication factor of an auto-created topic.",
            at_least=1,
        ),
        _d(
            "auto.create.topics.enable",
            T_BOOLEAN,
            "true",
            "Create unknown topics on Metadata/Produce.",
        ),
        _d("delete.topic.enable", T_BOOLEAN, "true", "Allow DeleteTopics."),
        _d(
            "message.max.bytes",
            T_INT,
            "1048588",
            "Largest record batch a topic accepts (topic: max.message.bytes).",
            at_least=0,
        ),
        _d(
            "socket.request.max.bytes",
            T_INT,
            "104857600",
            "Largest request frame accepted.",
            at_least=1,
        ),
        _d(
            "connections.max.idle.ms",
            T_LONG,
            "600000",
            "Close connections idle for longer than this.",
            at_least=-1,
        ),
        _d(
            "max.connections",
            T_INT,
            "2147483647",
            "Most connections the broker keeps open at once; at the limit listeners stop "
            "accepting until one closes (the inter-broker listener, when there are several, "
            "still accepts and the least recently active client connection is closed). "
            "listener.name.<listener>.max.connections limits one listener.",
            at_least=0,
        ),
        _d(
            "max.connections.per.ip",
            T_INT,
            "2147483647",
            "Most connections from one address; a new one past it is closed at once. May be "
            "0 only with max.connections.per.ip.overrides.",
            at_least=0,
        ),
        _d(
            "max.connections.per.ip.overrides",
            T_STRING,
            "",
            "Per-address (or host name) limits over max.connections.per.ip, e.g. "
            "hostName:100,127.0.0.1:200.",
        ),
        _d(
            "max.connection.creation.rate",
            T_INT,
            "2147483647",
            "New connections per second the broker accepts; past it accepting is delayed "
            "(not on the inter-broker listener when there are several). "
            "listener.name.<listener>.max.connection.creation.rate limits one listener.",
            at_least=0,
        ),
        _d(
            "queued.max.request.bytes",
            T_LONG,
            "-1",
            "Bytes of requests being received or queued before no more requests are read "
            "(KIP-72's memory pool): a request takes its size once its length arrives, and "
            "while the pool is used up connections stop reading until handled requests free "
            "it. -1: unbounded.",
            at_least=-1,
        ),
        _d(
            "kafkalite.sendfile.enable",
            T_BOOLEAN,
            "true",
            "kafkalite's own: send fetched log data to plaintext sockets with sendfile(2).",
        ),
        _d(
            "kafkalite.log.open.files.max",
            T_INT,
            "-1",
            "kafkalite's own (Kafka has no equivalent; it keeps every segment's files open): the "
            "most segment and index files kept open at once, least recently used closed first, so "
            "descriptors are bounded by this and not by the number of partitions. -1: half of the "
            "soft open-files limit (RLIMIT_NOFILE, raised to the hard limit at startup) less 256.",
            at_least=-1,
        ),
        _d("log.segment.bytes", T_INT, "1073741824", "Size of a log segment file.", at_least=14),
        _d("log.roll.hours", T_INT, "168", "Roll a segment after this many hours.", at_least=1),
        _d(
            "log.roll.jitter.ms",
            T_LONG,
            None,
            "Maximum random jitter subtracted from the roll time (overrides log.roll.jitter.hours).",
            at_least=0,
        ),
        _d(
            "log.roll.jitter.hours",
            T_INT,
            "0",
            "Maximum random jitter of the roll time, in hours.",
            at_least=0,
        ),
        _d(
            "log.roll.ms",
            T_LONG,
            None,
            "Roll a segment after this many ms (overrides log.roll.hours).",
            at_least=1,
        ),
        _d("log.retention.hours", T_INT, "168", "Keep log segments this many hours.", at_least=-1),
        _d(
            "log.retention.minutes",
            T_INT,
            None,
            "Retention in minutes (overrides hours).",
            at_least=-1,
        ),
        _d(
            "log.retention.ms",
            T_LONG,
            None,
            "Retention in ms (overrides minutes); -1 keeps forever.",
            at_least=-1,
        ),
        _d(
            "log.retention.bytes",
            T_LONG,
            "-1",
            "Size bound per partition; -1 unbounded.",
            at_least=-1,
        ),
        _d(
            "log.retention.check.interval.ms",
            T_LONG,
            "300000",
            "How often retention runs.",
            at_least=1,
        ),
        _d(
            "log.flush.interval.messages",
            T_LONG,
            str(LONG_MAX),
            "fsync after this many appended messages.",
            at_least=1,
        ),
        _d(
            "log.flush.interval.ms",
            T_LONG,
            None,
            "fsync when data is older than this many ms.",
            at_least=0,
        ),
        _d(
            "log.flush.scheduler.interval.ms",
            T_LONG,
            str(LONG_MAX),
            "How often the flusher checks.",
            at_least=1,
        ),
        _d(
            "log.index.interval.bytes",
            T_INT,
            "4096",
            "Bytes between offset-index entries.",
            at_least=0,
        ),
        _d(
            "log.index.size.max.bytes",
            T_INT,
            "10485760",
            "Max size of an offset index.",
            at_least=8,
        ),
        _d(
            "log.cleanup.policy",
            T_LIST,
            "delete",
            "delete, compact or both.",
            valid=("delete", "compact"),
        ),
        _d("log.cleaner.enable", T_BOOLEAN, "true", "Run the log cleaner for compacted topics."),
        _d(
            "num.recovery.threads.per.data.dir",
            T_INT,
            "1",
            "Threads that load and recover logs at startup after an unclean shutdown (a clean "
            "one loads every log from the shutdown's manifest on the starting thread).",
            at_least=1,
        ),
        _d(
            "log.cleaner.delete.retention.ms",
            T_LONG,
            "86400000",
            "Keep tombstones this long.",
            at_least=0,
        ),
        _d(
            "log.cleaner.min.compaction.lag.ms",
            T_LONG,
            "0",
            "Minimum age before compaction.",
            at_least=0,
        ),
        _d(
            "log.cleaner.max.compaction.lag.ms",
            T_LONG,
            str(LONG_MAX),
            "Maximum time a record stays uncompacted.",
            at_least=1,
        ),
        _d(
            "log.cleaner.min.cleanable.ratio",
            T_DOUBLE,
            "0.5",
            "Dirty ratio that triggers cleaning.",
            at_least=0,
            at_most=1,
        ),
        _d(
            "log.message.timestamp.type",
            T_STRING,
            "CreateTime",
            "CreateTime or LogAppendTime.",
            valid=("CreateTime", "LogAppendTime"),
        ),
        _d(
            "log.message.timestamp.difference.max.ms",
            T_LONG,
            str(LONG_MAX),
            "Max |record ts - now| accepted with CreateTime.",
            at_least=0,
        ),
        _d(
            "log.segment.delete.delay.ms",
            T_LONG,
            "60000",
            "Delay before a deleted segment's file goes.",
            at_least=0,
        ),
        _d(
            "compression.type",
            T_STRING,
            "producer",
            "Topic compression; only 'producer' (keep as sent) is applied.",
            valid=("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"),
        ),
        _d("min.insync.replicas", T_INT, "1", "Minimum ISR for acks=all.", at_least=1),
        _d(
            "unclean.leader.election.enable",
            T_BOOLEAN,
            "false",
            "Allow out-of-sync replicas to become leader.",
        ),
        _d("log.preallocate", T_BOOLEAN, "false", "Preallocate segment files."),
        _d(
            "log.message.format.version",
            T_STRING,
            "3.0-IV1",
            "Deprecated (Kafka 3.x; removed in Kafka 4): accepted and ignored, as Kafka ignores it "
            "once inter.broker.protocol.version is 3.0 or later; batches are kept as sent.",
        ),
        _d(
            "log.message.downconversion.enable",
            T_BOOLEAN,
            "true",
            "Down-convert record batches for old fetch versions.",
        ),
        _d("fetch.max.bytes", T_INT, "57671680", "Upper bound of a fetch response.", at_least=1024),
        _d(
            "group.initial.rebalance.delay.ms",
            T_INT,
            "3000",
            "Delay of the first rebalance of a new group.",
            at_least=0,
        ),
        _d(
            "group.min.session.timeout.ms",
            T_INT,
            "6000",
            "Smallest session timeout a member may ask for.",
            at_least=0,
        ),
        _d(
            "group.max.session.timeout.ms",
            T_INT,
            "1800000",
            "Largest session timeout a member may ask for.",
            at_least=0,
        ),
        *GROUP_COORDINATOR_CONFIG_DEFS,
        _d(
            "group.consumer.assignors",
            T_LIST,
            "uniform,range",
            "KIP-848 server-side assignors (uniform, range); the first is the default.",
        ),
        _d(
            "group.consumer.migration.policy",
            T_STRING,
            "disabled",
            "Online migration of a live group between the classic and the consumer protocol "
            "(Kafka: disabled, upgrade, downgrade, bidirectional). kafkalite converts a group only "
            "once it is empty, in either direction, which is Kafka's 'disabled'; the others are "
            "refused because they are not built.",
            valid=("disabled",),
        ),
        _d(
            "offsets.topic.num.partitions",
            T_INT,
            "50",
            "Partitions of __consumer_offsets.",
            at_least=1,
        ),
        _d(
            "offsets.topic.replication.factor",
            T_SHORT,
            "3",
            "Replication of __consumer_offsets in a cluster (a single-node broker has one replica).",
            at_least=1,
        ),
        _d(
            "offsets.commit.timeout.ms",
            T_INT,
            "5000",
            "How long an offset commit waits for the ISR of its __consumer_offsets partition.",
            at_least=1,
        ),
        *TRANSACTION_CONFIG_DEFS,
        *SHARE_COORDINATOR_CONFIG_DEFS,
        *SECURITY_CONFIG_DEFS,
        *CLUSTER_CONFIG_DEFS,
        *REMOTE_LOG_CONFIG_DEFS,
        _d(
            "offsets.retention.minutes",
            T_INT,
            "10080",
            "Keep committed offsets of empty groups this long.",
            at_least=1,
        ),
        _d(
            "max.incremental.fetch.session.cache.slots",
            T_INT,
            "1000",
            "Incremental fetch sessions kept.",
            at_least=0,
        ),
    ]
}


def is_read_only_broker_config(name: str) -> bool:
    """A broker config that only server.properties (and a restart) can change."""
    if name in DYNAMIC_BROKER_CONFIGS or name in CONNECTION_QUOTA_CONFIGS:
        return False
    if name in REPLICATION_THROTTLE_CONFIGS:
        return False
    if name.startswith("listener.name.") and name.endswith(
        (".max.connections", ".max.connection.creation.rate")
    ):
        return False  # per-listener connection quotas are dynamic, as in Kafka
    if name.startswith("listener.name.") and (
        ".sasl." in name or name.endswith(".connections.max.reauth.ms")
    ):
        return True  # per-listener SASL settings are read at startup only
    return name in BROKER_CONFIGS or name in STATIC_KAFKA_CONFIGS


# the table's dynamic flag: what AlterConfigs may change on a running broker
for _name, _defn in list(BROKER_CONFIGS.items()):
    BROKER_CONFIGS[_name] = replace(_defn, read_only=is_read_only_broker_config(_name))
