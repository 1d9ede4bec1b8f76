"""The broker's cluster-mode properties: ZooKeeper, replication, throttles, controlled shutdown, leader balance.

broker.config_defs assembles them into the one table.
"""

from __future__ import annotations

from kafkalite.broker.config.config_types import (
    LONG_MAX,
    T_BOOLEAN,
    T_INT,
    T_LONG,
    T_STRING,
    ConfigDef,
)
from kafkalite.broker.config.config_types import define as _d

CLUSTER_CONFIG_DEFS: tuple[ConfigDef, ...] = (
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
)
