"""Kafka's broker property table: names, types, defaults and docs, which ones are dynamic, synonyms.

The typed view over a broker's properties (BrokerConfig, parsing of server.properties) is in broker.config.
"""

from __future__ import annotations

from dataclasses import replace

from kafkalite.broker.config_types import (
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
from kafkalite.broker.config_types import define as _d
from kafkalite.broker.group_config_defs import GROUP_COORDINATOR_CONFIG_DEFS

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


# ssl.* settings (Kafka's names, PEM only); `listener.name.<listener>.ssl.*` overrides one listener
SSL_CONFIG_DEFS: tuple[ConfigDef, ...] = (
    _d("ssl.keystore.type", T_STRING, "PEM", "Key store format; only PEM is supported."),
    _d(
        "ssl.keystore.location",
        T_STRING,
        None,
        "PEM file holding the private key and the certificate chain.",
    ),
    _d("ssl.keystore.key", T_STRING, None, "The private key in PEM, inline."),
    _d(
        "ssl.keystore.certificate.chain",
        T_STRING,
        None,
        "The certificate chain in PEM, inline (with ssl.keystore.key).",
    ),
    _d("ssl.key.password", T_STRING, None, "Password of an encrypted private key."),
    _d("ssl.keystore.password", T_STRING, None, "Not used with PEM key stores (ssl.key.password)."),
    _d("ssl.truststore.type", T_STRING, "PEM", "Trust store format; only PEM is supported."),
    _d("ssl.truststore.location", T_STRING, None, "PEM file of trusted CA certificates."),
    _d("ssl.truststore.certificates", T_STRING, None, "Trusted CA certificates in PEM, inline."),
    _d("ssl.truststore.password", T_STRING, None, "Not used with PEM trust stores."),
    _d("ssl.client.auth", T_STRING, "none", "Client certificates: required, requested or none."),
    _d("ssl.enabled.protocols", T_LIST, "TLSv1.2,TLSv1.3", "TLS versions accepted."),
    _d(
        "ssl.principal.mapping.rules",
        T_STRING,
        "DEFAULT",
        "Rules mapping a client certificate's subject to a user name (KIP-371): "
        "RULE:pattern/replacement/[LU], ..., DEFAULT (the whole distinguished name).",
    ),
    _d(
        "ssl.protocol",
        T_STRING,
        "TLSv1.3",
        "Accepted for compatibility (ssl.enabled.protocols rules).",
    ),
    _d(
        "ssl.cipher.suites",
        T_LIST,
        None,
        "TLS 1.2 cipher suites (IANA or OpenSSL names); empty: OpenSSL's defaults.",
    ),
    _d(
        "ssl.endpoint.identification.algorithm",
        T_STRING,
        "https",
        "https: brokers check the host name of the broker they connect to; empty: no check.",
    ),
)

# sasl.* settings; `listener.name.<listener>.` overrides them for one listener, and the JAAS config
# is looked up as `listener.name.<listener>.<mechanism>.sasl.jaas.config` first (names in lower case)
SASL_CONFIG_DEFS: tuple[ConfigDef, ...] = (
    _d(
        "sasl.enabled.mechanisms",
        T_LIST,
        "PLAIN",
        "SASL mechanisms offered on SASL listeners: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 "
        "(Kafka's default is GSSAPI, which kafkalite does not offer).",
    ),
    _d(
        "sasl.jaas.config",
        T_STRING,
        None,
        "JAAS login module config: PlainLoginModule's user_<name> options are the PLAIN users; "
        "username/password are what this broker logs in with to others.",
    ),
    _d(
        "connections.max.reauth.ms",
        T_LONG,
        "0",
        "KIP-368: lifetime of a SASL session; past it the client must re-authenticate or is "
        "disconnected (0: sessions never expire).",
        at_least=0,
    ),
)


# settings whose values DescribeConfigs never shows (Kafka's PASSWORD type)
SENSITIVE_SUFFIXES: tuple[str, ...] = (
    "ssl.key.password",
    "ssl.keystore.password",
    "ssl.truststore.password",
    "ssl.keystore.key",
    "sasl.jaas.config",
)


def is_sensitive_config(name: str) -> bool:
    return name.endswith(SENSITIVE_SUFFIXES)


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
            "Unsent response bytes per connection before reading pauses (-1: 16 MiB).",
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
        # -- transactions
        _d(
            "transaction.state.log.num.partitions",
            T_INT,
            "50",
            "Partitions of __transaction_state.",
            at_least=1,
        ),
        _d(
            "transaction.state.log.replication.factor",
            T_SHORT,
            "3",
            "Replication of __transaction_state in a cluster (a single-node broker has one replica).",
            at_least=1,
        ),
        _d(
            "transaction.state.log.min.isr",
            T_INT,
            "2",
            "min.insync.replicas of __transaction_state (capped by its replication factor).",
            at_least=1,
        ),
        _d(
            "transaction.state.log.segment.bytes",
            T_INT,
            "104857600",
            "segment.bytes of __transaction_state.",
            at_least=1,
        ),
        # -- the share coordinator (KIP-932)
        _d(
            "share.coordinator.state.topic.num.partitions",
            T_INT,
            "50",
            "Partitions of __share_group_state.",
            at_least=1,
        ),
        _d(
            "share.coordinator.state.topic.replication.factor",
            T_SHORT,
            "3",
            "Replication of __share_group_state in a cluster (a single-node broker has one replica).",
            at_least=1,
        ),
        _d(
            "share.coordinator.state.topic.min.isr",
            T_SHORT,
            "2",
            "min.insync.replicas of __share_group_state (capped by its replication factor).",
            at_least=1,
        ),
        _d(
            "share.coordinator.state.topic.segment.bytes",
            T_INT,
            "104857600",
            "segment.bytes of __share_group_state.",
            at_least=1,
        ),
        _d(
            "share.coordinator.write.timeout.ms",
            T_INT,
            "5000",
            "How long a share-state write waits for the ISR of its __share_group_state partition.",
            at_least=1,
        ),
        _d(
            "transaction.max.timeout.ms",
            T_INT,
            "900000",
            "Largest transaction.timeout.ms a producer may ask for (INVALID_TRANSACTION_TIMEOUT above).",
            at_least=1,
        ),
        _d(
            "transactional.id.expiration.ms",
            T_INT,
            "604800000",
            "A transactional id idle this long (no transaction) is forgotten.",
            at_least=1,
        ),
        _d(
            "transaction.abort.timed.out.transaction.cleanup.interval.ms",
            T_INT,
            "10000",
            "How often the coordinator aborts transactions past their timeout.",
            at_least=1,
        ),
        _d(
            "transaction.remove.expired.transaction.cleanup.interval.ms",
            T_INT,
            "3600000",
            "How often the coordinator forgets expired transactional ids.",
            at_least=1,
        ),
        # -- SASL authentication (listener.name.<listener>. overrides these per listener)
        *SASL_CONFIG_DEFS,
        _d(
            "sasl.mechanism.inter.broker.protocol",
            T_STRING,
            "PLAIN",
            "SASL mechanism brokers use to log in to each other on a SASL inter-broker listener.",
        ),
        _d(
            "connection.failed.authentication.delay.ms",
            T_INT,
            "100",
            "How long a failed SASL authentication waits before its connection closes.",
            at_least=0,
        ),
        # -- client quotas (the quotas themselves are set with AlterClientQuotas)
        _d(
            "quota.window.num",
            T_INT,
            "11",
            "Samples kept to measure a client's rate against its quota.",
            at_least=1,
        ),
        _d("quota.window.size.seconds", T_INT, "1", "Span of each quota sample.", at_least=1),
        # -- authorization (ACLs)
        _d(
            "authorizer.class.name",
            T_STRING,
            "",
            "Kafka's ACL authorizer (kafka.security.authorizer.AclAuthorizer, "
            "kafka.security.auth.SimpleAclAuthorizer or "
            "org.apache.kafka.metadata.authorizer.StandardAuthorizer) turns ACL checks on; "
            "empty: every request is allowed and the ACL APIs answer SECURITY_DISABLED.",
        ),
        _d(
            "super.users",
            T_STRING,
            "",
            "Principals allowed everything, separated by ';' (User:admin;User:broker).",
        ),
        _d(
            "allow.everyone.if.no.acl.found",
            T_BOOLEAN,
            "false",
            "Allow an action on a resource that has no ACL at all.",
        ),
        # -- cluster mode (ZooKeeper)
        _d(
            "zookeeper.connect",
            T_STRING,
            None,
            "host:port[,host:port...][/chroot] of ZooKeeper; set = cluster mode, unset = single node.",
        ),
        _d(
            "zookeeper.session.timeout.ms",
            T_INT,
            "18000",
            "ZooKeeper session timeout: a broker silent this long is declared dead.",
            at_least=1,
        ),
        _d(
            "zookeeper.connection.timeout.ms",
            T_INT,
            None,
            "How long to wait for a ZooKeeper connection (default: the session timeout).",
            at_least=1,
        ),
        _d(
            "broker.rack",
            T_STRING,
            None,
            "Rack of this broker, for rack-aware replica placement and follower fetching (KIP-392).",
        ),
        _d(
            "replica.selector.class",
            T_STRING,
            None,
            "KIP-392: how the leader picks the replica a consumer reads from. Unset (Kafka's null) or "
            "org.apache.kafka.common.replica.LeaderSelector: the leader; "
            "org.apache.kafka.common.replica.RackAwareReplicaSelector: an in-sync replica in the "
            "consumer's client.rack. Other classes are refused.",
            valid=(
                "org.apache.kafka.common.replica.LeaderSelector",
                "org.apache.kafka.common.replica.RackAwareReplicaSelector",
            ),
        ),
        _d(
            "replica.lag.time.max.ms",
            T_LONG,
            "30000",
            "A follower that has not caught up for this long leaves the ISR.",
            at_least=1,
        ),
        _d("num.replica.fetchers", T_INT, "1", "Fetcher loops per source broker.", at_least=1),
        _d(
            "replica.fetch.max.bytes",
            T_INT,
            "1048576",
            "Bytes per partition in a follower fetch.",
            at_least=0,
        ),
        _d(
            "replica.fetch.response.max.bytes",
            T_INT,
            "10485760",
            "Bytes of a whole follower fetch response.",
            at_least=0,
        ),
        _d(
            "replica.fetch.wait.max.ms",
            T_INT,
            "500",
            "Long-poll time of a follower fetch.",
            at_least=0,
        ),
        _d("replica.fetch.min.bytes", T_INT, "1", "Bytes a follower fetch waits for.", at_least=0),
        _d(
            "replica.fetch.backoff.ms",
            T_INT,
            "1000",
            "Pause after a failed follower fetch.",
            at_least=0,
        ),
        # -- replication throttles (KIP-73): dynamic, per broker; the throttled replicas are topic configs
        _d(
            "leader.replication.throttled.rate",
            T_LONG,
            str(LONG_MAX),
            "Bytes/s this broker as leader sends to the replicas its topics list in "
            "leader.replication.throttled.replicas (while they are out of the ISR); "
            "the default means no throttle.",
            at_least=0,
        ),
        _d(
            "follower.replication.throttled.rate",
            T_LONG,
            str(LONG_MAX),
            "Bytes/s this broker as follower copies for the replicas its topics list in "
            "follower.replication.throttled.replicas (while they have not caught up); "
            "the default means no throttle.",
            at_least=0,
        ),
        _d(
            "replication.quota.window.num",
            T_INT,
            "11",
            "Samples kept to measure the replication byte rates against their throttles.",
            at_least=1,
        ),
        _d(
            "replication.quota.window.size.seconds",
            T_INT,
            "1",
            "Span of each replication throttle sample.",
            at_least=1,
        ),
        _d(
            "controlled.shutdown.enable",
            T_BOOLEAN,
            "true",
            "On SIGTERM, move leadership away (ControlledShutdown) before stopping.",
        ),
        _d(
            "controlled.shutdown.max.retries",
            T_INT,
            "3",
            "ControlledShutdown attempts before stopping anyway.",
            at_least=0,
        ),
        _d(
            "controlled.shutdown.retry.backoff.ms",
            T_LONG,
            "5000",
            "Pause between ControlledShutdown attempts.",
            at_least=0,
        ),
        # leader balance (the controller's periodic preferred leader election)
        _d(
            "auto.leader.rebalance.enable",
            T_BOOLEAN,
            "true",
            "The controller moves leadership back to preferred replicas when a broker's leaders "
            "are out of balance.",
        ),
        _d(
            "leader.imbalance.per.broker.percentage",
            T_INT,
            "10",
            "Percent of a broker's preferred partitions led elsewhere that triggers a rebalance.",
            at_least=0,
        ),
        _d(
            "leader.imbalance.check.interval.seconds",
            T_LONG,
            "300",
            "How often the controller checks the leader imbalance.",
            at_least=1,
        ),
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
    "max.compaction.lag.ms": (("log.cleaner.max.compaction.lag.ms",), T_LONG),
    "min.cleanable.dirty.ratio": (("log.cleaner.min.cleanable.ratio",), T_DOUBLE),
    "min.compaction.lag.ms": (("log.cleaner.min.compaction.lag.ms",), T_LONG),
    "min.insync.replicas": (("min.insync.replicas",), T_INT),
    "preallocate": (("log.preallocate",), T_BOOLEAN),
    "retention.bytes": (("log.retention.bytes",), T_LONG),
    "retention.ms": (("log.retention.ms", "log.retention.minutes", "log.retention.hours"), T_LONG),
    "segment.bytes": (("log.segment.bytes",), T_INT),
    "segment.index.bytes": (("log.index.size.max.bytes",), T_INT),
    "segment.jitter.ms": (("log.roll.jitter.ms", "log.roll.jitter.hours"), T_LONG),
    "segment.ms": (("log.roll.ms", "log.roll.hours"), T_LONG),
    "unclean.leader.election.enable": (("unclean.leader.election.enable",), T_BOOLEAN),
}

# Broker configs that AlterConfigs may change at runtime: the most specific broker synonym of each
# topic config (Kafka's DynamicLogConfig.ReconfigurableConfigs, all "cluster-wide"). The hours /
# minutes spellings (log.retention.hours, log.roll.hours...) stay read-only, as in Kafka.
DYNAMIC_BROKER_CONFIGS: frozenset[str] = frozenset(syns[0] for syns, _ in TOPIC_CONFIGS.values())

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
    "log.message.format.version": "batches are stored as the producer sent them",
    "inter.broker.protocol.version": "brokers speak the newest protocol versions they share",
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
