"""Topic properties and their broker synonyms, the broker properties AlterConfigs may change at runtime,
and Kafka's own settings kafkalite ignores or knows to be static.
"""

from __future__ import annotations

from kafkalite.broker.config.config_types import (
    T_BOOLEAN,
    T_DOUBLE,
    T_INT,
    T_LIST,
    T_LONG,
    T_STRING,
)

# topic property -> (broker synonym(s), most specific first, type)
TOPIC_CONFIGS: dict[str, tuple[tuple[str, ...], int]] = {
    "cleanup.policy": (("log.cleanup.policy",), T_LIST),
    "compression.type": (("compression.type",), T_STRING),
    "delete.retention.ms": (("log.cleaner.delete.retention.ms",), T_LONG),
    "file.delete.delay.ms": (("log.segment.delete.delay.ms",), T_LONG),
    "flush.messages": (("log.flush.interval.messages",), T_LONG),
    "flush.ms": (("log.flush.interval.ms",), T_LONG),
    "index.interval.bytes": (("log.index.interval.bytes",), T_INT),
    "max.message.bytes": (("message.max.bytes",), T_INT),
    "message.timestamp.difference.max.ms": (("log.message.timestamp.difference.max.ms",), T_LONG),
    "message.timestamp.type": (("log.message.timestamp.type",), T_STRING),
    "message.downconversion.enable": (("log.message.downconversion.enable",), T_BOOLEAN),
    "message.format.version": (("log.message.format.version",), T_STRING),
    "max.compaction.lag.ms": (("log.cleaner.max.compaction.lag.ms",), T_LONG),
    "min.cleanable.dirty.ratio": (("log.cleaner.min.cleanable.ratio",), T_DOUBLE),
    "min.compaction.lag.ms": (("log.cleaner.min.compaction.lag.ms",), T_LONG),
    "min.insync.replicas": (("min.insync.replicas",), T_INT),
    "preallocate": (("log.preallocate",), T_BOOLEAN),
    "retention.bytes": (("log.retention.bytes",), T_LONG),
    "local.retention.ms": (("log.local.retention.ms",), T_LONG),
    "local.retention.bytes": (("log.local.retention.bytes",), T_LONG),
    "retention.ms": (("log.retention.ms", "log.retention.minutes", "log.retention.hours"), T_LONG),
    "segment.bytes": (("log.segment.bytes",), T_INT),
    "segment.index.bytes": (("log.index.size.max.bytes",), T_INT),
    "segment.jitter.ms": (("log.roll.jitter.ms", "log.roll.jitter.hours"), T_LONG),
    "segment.ms": (("log.roll.ms", "log.roll.hours"), T_LONG),
    "unclean.leader.election.enable": (("unclean.leader.election.enable",), T_BOOLEAN),
}

# Broker configs that AlterConfigs may change at runtime: the most specific broker synonym of each
# topic config (Kafka's DynamicLogConfig.ReconfigurableConfigs, all "cluster-wide"). The hours /
# minutes spellings (log.retention.hours, log.roll.hours...) stay read-only, as in Kafka, and so does
# log.message.format.version (Kafka's DynamicLogConfig.ExcludedConfigs).
DYNAMIC_BROKER_CONFIGS: frozenset[str] = frozenset(
    syns[0] for syns, _ in TOPIC_CONFIGS.values()
) - {"log.message.format.version"}

# connection quotas (broker.connection_quotas), dynamic as in Kafka; so are their per-listener
# spellings listener.name.<listener>.max.connections / .max.connection.creation.rate
CONNECTION_QUOTA_CONFIGS: frozenset[str] = frozenset(
    {
        "max.connections",
        "max.connections.per.ip",
        "max.connections.per.ip.overrides",
        "max.connection.creation.rate",
    }
)

# replication throttles (cluster.replication_quota), dynamic as in Kafka's DynamicConfig.Broker
REPLICATION_THROTTLE_CONFIGS: frozenset[str] = frozenset(
    {"leader.replication.throttled.rate", "follower.replication.throttled.rate"}
)

# Kafka's own broker settings that kafkalite accepts and deliberately ignores, with the reason: a
# server.properties written for Kafka starts, and the log names each of these once
IGNORED_KAFKA_CONFIGS: dict[str, str] = {
    "num.network.threads": "one event loop serves every connection",
    "num.io.threads": "requests are handled on the event loop",
    "background.threads": "background work runs on a few fixed threads",
    "socket.send.buffer.bytes": "sockets keep the operating system's buffer sizes",
    "socket.receive.buffer.bytes": "sockets keep the operating system's buffer sizes",
    "socket.listen.backlog.size": "listeners use a backlog of 1024",
    "log.cleaner.threads": "one cleaner thread",
    "log.cleaner.dedupe.buffer.size": "the cleaner keeps its offset map in memory",
    "log.cleaner.io.buffer.size": "the cleaner sizes its own buffers",
    "log.cleaner.io.max.bytes.per.second": "the cleaner is not throttled",
    "log.cleaner.backoff.ms": "the cleaner checks every 15 seconds",
    "log.flush.offset.checkpoint.interval.ms": "checkpoints are written every minute",
    "log.flush.start.offset.checkpoint.interval.ms": "checkpoints are written every minute",
    "replica.high.watermark.checkpoint.interval.ms": "checkpoints are written every minute",
    "zookeeper.set.acl": "ZooKeeper nodes are written without ACLs",
    "metric.reporters": "metrics are served at /metrics of http.listeners",
    "metrics.num.samples": "metrics are served at /metrics of http.listeners",
    "metrics.sample.window.ms": "metrics are served at /metrics of http.listeners",
    "kafka.metrics.reporters": "metrics are served at /metrics of http.listeners",
    "process.roles": "KRaft is not offered; clusters use ZooKeeper (zookeeper.connect)",
    "controller.quorum.voters": "KRaft is not offered; clusters use ZooKeeper (zookeeper.connect)",
    "controller.listener.names": "KRaft is not offered; clusters use ZooKeeper (zookeeper.connect)",
    "inter.broker.protocol.version": "brokers speak the newest protocol versions they share",
}

# settings Kafka 3.x accepts but ignores with a warning (deprecated; Kafka 4 refuses them)
DEPRECATED_IGNORED_CONFIGS: dict[str, str] = {
    "log.message.format.version": (
        "{name}={value} is ignored: it is deprecated and has no effect once "
        "inter.broker.protocol.version is 3.0 or later, as here (Kafka 4 refuses it)"
    ),
    "message.format.version": (
        "topic config {name}={value} of {topic} is ignored: it is deprecated and has no effect "
        "once inter.broker.protocol.version is 3.0 or later, as here (Kafka 4 refuses it)"
    ),
}

# Kafka broker settings kafkalite does not model but knows to be static (read-only in Kafka).
STATIC_KAFKA_CONFIGS: frozenset[str] = frozenset(
    {
        "process.roles",
        "controller.quorum.voters",
        "controller.listener.names",
        "log.message.format.version",
        "inter.broker.protocol.version",
    }
)

# names that spell the same setting in different units, most specific first
BROKER_SYNONYM_GROUPS: tuple[tuple[str, ...], ...] = tuple(
    syns for syns, _ in TOPIC_CONFIGS.values() if len(syns) > 1
)


def broker_synonyms(name: str) -> tuple[str, ...]:
    """The broker names meaning the same setting as `name`, most specific first (just `name` if none)."""
    for group in BROKER_SYNONYM_GROUPS:
        if name in group:
            return group
    return (name,)


def described_synonyms(name: str) -> tuple[str, ...]:
    """The names DescribeConfigs looks up for `name`'s synonyms (Kafka's brokerConfigSynonyms): its
    unit spellings, and for log.flush.interval.ms the setting that stands in when it is unset,
    log.flush.scheduler.interval.ms (which is not an alias: it keeps its own meaning elsewhere)."""
    if name == "log.flush.interval.ms":
        return (name, "log.flush.scheduler.interval.ms")
    return broker_synonyms(name)
