"""ZkHost: what ZkBroker, this broker's part in a ZooKeeper-mode cluster, reads of the broker it serves
(BrokerServer is one) — named here so ZkBroker sees those components and nothing else of the server.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from kafkalite.broker.config.broker_config import BrokerConfig
    from kafkalite.broker.config.group_configs import GroupConfigManager
    from kafkalite.broker.coordinators.groups import GroupCoordinatorComponent
    from kafkalite.broker.coordinators.schema_registry import SchemaRegistryComponent
    from kafkalite.broker.coordinators.share_coordinator import ShareCoordinatorComponent
    from kafkalite.broker.coordinators.transactions import TransactionCoordinatorComponent
    from kafkalite.broker.network.inter_broker import InterBrokerSettings
    from kafkalite.broker.security.client_quotas import ClientQuotas
    from kafkalite.broker.security.scram_credentials import ScramCredentialCache
    from kafkalite.broker.stats import BrokerStats
    from kafkalite.cluster.delayed_operations import DelayedOperations
    from kafkalite.cluster.metadata_cache import BrokerEndpoint, MetadataCache
    from kafkalite.cluster.replica_manager import ReplicaManager
    from kafkalite.cluster.replication_quota import ReplicationQuotas
    from kafkalite.storage import LogManager


class ZkHost(Protocol):
    """The broker's components ZkBroker uses: the config and how to reach other brokers, the data
    (LogManager and ReplicaManager, made in the broker's start()), the metadata cache, the delayed
    operations, the stores ZooKeeper's change notifications reload, the coordinators that follow
    leadership, the replication throttles and the ISR counters."""

    @property
    def config(self) -> BrokerConfig: ...

    @property
    def inter_broker(self) -> InterBrokerSettings: ...

    @property
    def inter_broker_listener(self) -> str: ...

    def local_endpoint(self) -> BrokerEndpoint: ...

    @property
    def log_manager(self) -> LogManager: ...

    @property
    def replica_manager(self) -> ReplicaManager: ...

    @property
    def metadata_cache(self) -> MetadataCache: ...

    @property
    def delayed(self) -> DelayedOperations: ...

    @property
    def scram_credentials(self) -> ScramCredentialCache: ...

    @property
    def client_quotas(self) -> ClientQuotas: ...

    @property
    def group_configs(self) -> GroupConfigManager: ...

    @property
    def groups(self) -> GroupCoordinatorComponent: ...

    @property
    def transactions(self) -> TransactionCoordinatorComponent: ...

    @property
    def share_coordinator(self) -> ShareCoordinatorComponent: ...

    @property
    def schema_registry(self) -> SchemaRegistryComponent: ...

    @property
    def replication_quotas(self) -> ReplicationQuotas: ...

    @property
    def stats(self) -> BrokerStats: ...
