"""The transaction and share coordinators' broker properties, under Kafka's names.

broker.config_defs assembles them into the one table; the group coordinator's are in broker.group_config_defs.
"""

from __future__ import annotations

from kafkalite.broker.config.config_types import (
    T_BOOLEAN,
    T_INT,
    T_SHORT,
    ConfigDef,
)
from kafkalite.broker.config.config_types import define as _d

TRANSACTION_CONFIG_DEFS: tuple[ConfigDef, ...] = (
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
)

SHARE_COORDINATOR_CONFIG_DEFS: tuple[ConfigDef, ...] = (
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
        "share.coordinator.snapshot.update.records.per.snapshot",
        T_INT,
        "500",
        "ShareUpdate records (deltas) written for a share-partition before its state is written "
        "whole again as a ShareSnapshot (0: a snapshot every time).",
        at_least=0,
        at_most=500,
    ),
    _d(
        "share.coordinator.write.timeout.ms",
        T_INT,
        "5000",
        "How long a share-state write waits for the ISR of its __share_group_state partition.",
        at_least=1,
    ),
    _d(
        "transaction.partition.verification.enable",
        T_BOOLEAN,
        "true",
        "KIP-890: before a transaction's first batch on a partition is appended, the leader asks the "
        "transaction coordinator whether the partition is in the transaction (INVALID_TXN_STATE if "
        "not). Read at startup (Kafka's may change at run time).",
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
)
