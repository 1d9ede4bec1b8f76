"""The broker process: typed components made in its constructor and started in an explicit order, topic
lifecycle, graceful shutdown. Frames are answered by broker.request_handler, listeners are broker.listeners'.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
import ssl
import time
from collections.abc import Callable, Mapping
from typing import Protocol

from kafkalite import __version__
from kafkalite.broker.config.broker_config import (
    TLS_SECURITY_PROTOCOLS,
    BrokerConfig,
    ConfigError,
    Listener,
    listener_override_def,
    log_startup_config,
)
from kafkalite.broker.config.dynamic_config import DynamicBrokerConfig
from kafkalite.broker.config.group_configs import (
    GROUP_CONFIG_DIR,
    GroupConfigManager,
    LocalGroupConfigStore,
    ZkGroupConfigStore,
)
from kafkalite.broker.context import RequestContext
from kafkalite.broker.coordinators.groups import GroupCoordinatorComponent
from kafkalite.broker.coordinators.schema_registry import SchemaRegistryComponent
from kafkalite.broker.coordinators.share_coordinator import ShareCoordinatorComponent
from kafkalite.broker.coordinators.share_partitions import SharePartitionManager
from kafkalite.broker.coordinators.share_persister import SharePersister
from kafkalite.broker.coordinators.transactions import TransactionCoordinatorComponent
from kafkalite.broker.dispatch import DispatchTable, HandlerEntry
from kafkalite.broker.fetch_session import FetchSessionCache
from kafkalite.broker.local_logs import TopicStorageError, drop_local_logs, make_local_logs
from kafkalite.broker.local_topics import (
    LocalTopics,
    recovered_while_serving,
    settle_collector,
)
from kafkalite.broker.network.connection import Connection
from kafkalite.broker.network.connection_quotas import (
    ConnectionLimits,
    ConnectionQuotas,
    close_least_recently_active,
)
from kafkalite.broker.network.inter_broker import InterBrokerSettings
from kafkalite.broker.network.listeners import (
    Acceptor,
    ListenerRuntime,
    bind_listeners,
    build_listener_tls,
    configure_listeners,
    install_listener_tls,
    local_endpoint,
    reap_idle,
)
from kafkalite.broker.network.memory_pool import MemoryPool
from kafkalite.broker.network.open_files import prepare_open_files
from kafkalite.broker.network.request_handler import RequestHandler
from kafkalite.broker.network.tls import client_context, ssl_settings
from kafkalite.broker.remote_storage import start_remote_log_manager
from kafkalite.broker.security.authorizer import Authorizer
from kafkalite.broker.security.client_quotas import ClientQuotas
from kafkalite.broker.security.sasl_auth import (
    SaslListenerSettings,
    configure_sasl,
    inter_broker_login,
)
from kafkalite.broker.security.scram_credentials import ScramCredentialCache
from kafkalite.broker.stats import BrokerStats
from kafkalite.broker.zk_broker import ZkBroker
from kafkalite.cluster.delayed_operations import DelayedOperations
from kafkalite.cluster.metadata import (
    LocalMetadataStore,
    MetadataError,
    MetadataStore,
    TopicInfo,
    ensure_meta_properties,
)
from kafkalite.cluster.metadata_cache import BrokerEndpoint, MetadataCache
from kafkalite.cluster.remote_log_manager import RemoteLogManager
from kafkalite.cluster.replica_manager import ReplicaManager
from kafkalite.cluster.replica_selector import parse_selector
from kafkalite.cluster.replication_quota import ReplicationQuotas
from kafkalite.cluster.zk_metadata_store import ZkMetadataStore
from kafkalite.protocol.server_connection import RequestReceived
from kafkalite.security.mechanisms import SaslLogin
from kafkalite.security.principal import SslPrincipalMapper
from kafkalite.storage import Log, LogManager

# after a crash, a single node with at least this many logs of user topics to recover from their
# files starts serving once the internal topics' logs are recovered: the others come online one by
# one as they are recovered (fewer take well under a second: they are recovered first, as before)
SERVE_WHILE_RECOVERING_FROM = 1_000


log = logging.getLogger("kafkalite.broker")


class BrokerExtension(Protocol):
    """Something above the broker that runs in its event loop (kafkalite.web's HTTP listener): started
    once the broker serves, stopped before it stops."""

    async def start(self, broker: BrokerServer) -> None: ...

    async def stop(self) -> None: ...


class BrokerServer:
    """One broker: typed components created here and started in a fixed order by `start()` —
    metadata store, the authorizer (when `authorizer.class.name` is set), dynamic configs,
    LogManager (recovery), ReplicaManager, LocalTopics and MetadataCache, the listeners, the group
    coordinator — and stopped in the reverse order. The LogManager, ReplicaManager and LocalTopics
    are the only ones made in start(): the log defaults need the dynamic configs read from the data
    dir first, the LogManager's open-files budget comes with raising the process's limit, and the
    other two wrap the LogManager. Components made here reach them (and the metadata store, which
    is ZooKeeper's once started in a cluster) through the Protocols beside each component."""

    log_manager: LogManager
    replica_manager: ReplicaManager
    local_topics: LocalTopics

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.log_dirs = config.log_dirs
        self.metadata_store: MetadataStore = LocalMetadataStore(self.log_dirs[0])
        self.metadata_cache = MetadataCache(self.broker_id)
        self.delayed = DelayedOperations()
        self.stats = BrokerStats()  # counters the metrics endpoint reads
        self.fetch_sessions = FetchSessionCache(
            int(config.get("max.incremental.fetch.session.cache.slots"))
        )
        try:  # KIP-392: which replica a consumer with client.rack is sent to (None: the leader)
            self.replica_selector: str | None = parse_selector(config.get("replica.selector.class"))
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        # listeners and their TLS contexts first: a TLS setting that cannot work stops startup here
        self.listeners: list[ListenerRuntime] = configure_listeners(config)
        self.inter_broker_listener = config.inter_broker_listener_name
        self.inter_broker_ssl_context: ssl.SSLContext | None = None
        if config.security_protocol(self.inter_broker_listener) in TLS_SECURITY_PROTOCOLS:
            self.inter_broker_ssl_context = client_context(
                ssl_settings(config, self.inter_broker_listener)
            )
        # SASL listeners' mechanisms and JAAS users (GSSAPI, OAUTHBEARER, PLAIN without users stop
        # startup here) and the SCRAM credentials, read from the metadata store in start()
        self.sasl_listeners: dict[str, SaslListenerSettings] = configure_sasl(config)
        self.scram_credentials = ScramCredentialCache(self.metadata_store)
        self.inter_broker_sasl_login: SaslLogin | None = None
        if self.inter_broker_listener in self.sasl_listeners and config.zookeeper_connect:
            self.inter_broker_sasl_login = inter_broker_login(
                config, self.sasl_listeners[self.inter_broker_listener]
            )
        self.inter_broker = InterBrokerSettings(
            self.broker_id, self.inter_broker_ssl_context, self.inter_broker_sasl_login
        )
        try:  # client quotas, read from the metadata store in start()
            self.client_quotas = ClientQuotas(
                self.metadata_store,
                int(config.get("quota.window.num")),
                int(config.get("quota.window.size.seconds")),
            )
        except ValueError as exc:
            raise ConfigError(f"quota.window.num / quota.window.size.seconds: {exc}") from None
        # each connection's frames, answered in order (a Connection awaits handle_frame)
        self.requests = RequestHandler(self.client_quotas, self._request_context)
        self.handle_frame = self.requests.handle_frame
        # replication throttles (KIP-73): the rates are dynamic broker configs, applied in start()
        try:
            self.replication_quotas = ReplicationQuotas(
                int(config.get("replication.quota.window.num")),
                int(config.get("replication.quota.window.size.seconds")),
            )
        except ValueError as exc:
            raise ConfigError(f"replication.quota.window.*: {exc}") from None
        # dynamic broker configs (AlterConfigs on a BROKER resource, kept in the data dir), read in
        # start(): they are part of the log defaults from the first log opened
        self.dynamic_config = DynamicBrokerConfig(config, self.log_dirs[0])
        # per-group configs (ConfigResource GROUP): the data dir here, ZooKeeper in cluster mode
        self.group_configs = GroupConfigManager(
            config.props, LocalGroupConfigStore(self.log_dirs[0] / GROUP_CONFIG_DIR)
        )
        self.cluster_mode = config.zookeeper_connect is not None
        self.dispatch = DispatchTable.discover(cluster_mode=self.cluster_mode)
        self.groups = GroupCoordinatorComponent(self)
        # cluster mode (zookeeper.connect set): registration, controller, replication
        self.zk_broker: ZkBroker | None = None
        if config.zookeeper_connect is not None:
            self.zk_broker = ZkBroker(self, config.zookeeper_connect)
        self.transactions = TransactionCoordinatorComponent(self)
        # KIP-932 share-partition state in __share_group_state, and the client the share-partition
        # leaders use to reach it (here or on another broker)
        self.share_coordinator = ShareCoordinatorComponent(self)
        self.share_persister = SharePersister(
            self.share_coordinator, self.metadata_cache, self.inter_broker
        )
        # KIP-932: share sessions and the share-partitions of the partitions this broker leads
        self.share_partitions = SharePartitionManager(self)
        # the Schema Registry's state, replayed from _schemas on demand (served by kafkalite.web)
        self.schema_registry = SchemaRegistryComponent(self)
        # components above the broker (kafkalite.web's HTTP listener) started last, stopped first
        self.extensions: list[BrokerExtension] = []
        self.remote_log_manager: RemoteLogManager | None = (
            None  # KIP-405, when tiered storage is on
        )
        # ACL checks: None (everything allowed) unless authorizer.class.name is set; a bad name
        # fails here, before anything starts. Bound to the metadata store in start().
        self.authorizer: Authorizer | None = Authorizer.from_config(config, self.metadata_store)
        try:
            self.principal_mapper = SslPrincipalMapper(
                str(config.get("ssl.principal.mapping.rules") or "DEFAULT")
            )
        except ValueError as exc:
            raise ConfigError(f"ssl.principal.mapping.rules: {exc}") from None
        self.cluster_id = ""
        self.connections: set[Connection] = set()
        # max.connections(.per.ip), max.connection.creation.rate: the listeners' accept loops
        # consult these (a bad value stops startup here)
        self.connection_quotas = ConnectionQuotas(
            ConnectionLimits.from_props(config.props),
            [lr.name for lr in self.listeners],
            self.inter_broker_listener,
            lambda listener: close_least_recently_active(self.connections, listener),
        )
        # KIP-612: the ip entities' connection_creation_rate, enforced where connections are accepted
        self.client_quotas.on_ip_quotas = self.connection_quotas.update_ip_quotas
        self.advertised: list[Listener] = []
        # KIP-72: queued.max.request.bytes bounds the requests being received or queued
        queued_max = config.queued_max_request_bytes
        self.memory_pool = MemoryPool(queued_max) if queued_max > 0 else None
        self.sendfile_enabled = (
            str(config.get("kafkalite.sendfile.enable", "true")).lower() != "false"
        )
        self.started = asyncio.Event()
        self._servers: list[Acceptor] = []
        self._stopping: asyncio.Event | None = None
        self._reaper: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._groups_started = False
        self._logs_open = False  # the LogManager is made in start() and shut down in stop()

    def _request_context(
        self, event: RequestReceived[HandlerEntry], conn: Connection
    ) -> RequestContext:
        """What a handler sees of one request: this broker, the header, the connection, and when."""
        return RequestContext(self, event.header, event.api_version, conn, time.monotonic_ns())

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        log_startup_config(self.config, __version__)
        self._loop = asyncio.get_running_loop()
        if self._stopping is None:
            self._stopping = asyncio.Event()
        for d in self.log_dirs:
            d.mkdir(parents=True, exist_ok=True)
        zk_cluster_id = None
        if self.zk_broker is not None:
            zk_cluster_id = await self.zk_broker.connect()
            self.metadata_store = ZkMetadataStore(
                self.zk_broker.zk, int(self.config.get("default.replication.factor"))
            )
        self.cluster_id = ensure_meta_properties(self.log_dirs, self.broker_id, zk_cluster_id)
        self.metadata_cache.cluster_id = self.cluster_id
        self.metadata_store.load()
        self.scram_credentials.store = self.metadata_store
        await self.scram_credentials.load()
        self.client_quotas.store = self.metadata_store
        await self.client_quotas.load()
        if self.zk_broker is not None:
            self.group_configs.store = ZkGroupConfigStore(self.zk_broker.zk)
        await self.group_configs.load()
        if self.authorizer is not None:
            self.authorizer.store = self.metadata_store
            await self.authorizer.start()
        # dynamic broker configs (AlterConfigs on a BROKER resource, kept in the data dir) are part of
        # the log defaults from the first log opened
        self.dynamic_config.load()
        if any(listener_override_def(k) for k in self.dynamic_config.per_broker):
            # listener certificates changed at runtime earlier (AlterConfigs) outlive a restart
            self.install_listener_tls(self.build_listener_tls(self.dynamic_config.per_broker))
        self.apply_replication_throttles()
        try:
            self.connection_quotas.reconfigure(self.dynamic_config.connection_limits())
        except ConfigError as exc:
            log.error("ignoring the dynamic connection quotas (%s); the static ones apply", exc)
        default_config = self.dynamic_config.log_config()
        cfg = self.config
        flush_check = int(cfg.get("log.flush.scheduler.interval.ms"))
        self.log_manager = LogManager(
            list(self.log_dirs),
            default_config,
            retention_check_interval_ms=int(cfg.get("log.retention.check.interval.ms")),
            flush_check_interval_ms=min(flush_check, 1000),
            cleaner_enable=bool(cfg.get("log.cleaner.enable")),
            open_files_max=prepare_open_files(cfg),
            recovery_threads=int(cfg.get("num.recovery.threads.per.data.dir")) * len(self.log_dirs),
        )
        self._logs_open = True  # (until stop() shuts the log manager down)
        # the logs and their partitions are millions of objects at 100,000 partitions that live as
        # long as the broker: no collector passes while they are made, and then (with many) they
        # are moved out of the collector's sight once, as `kafkalite serve` does when it is ready
        gc_enabled = gc.isenabled()
        gc.disable()
        recovering = False
        try:
            await asyncio.to_thread(
                self.log_manager.startup,
                recovered_while_serving if self.zk_broker is None else None,
                SERVE_WHILE_RECOVERING_FROM,
            )
            self.replica_manager = ReplicaManager(self.broker_id, self.log_manager, self.delayed)
            self.replica_manager.transaction_verification_enabled = bool(
                self.config.get("transaction.partition.verification.enable")
            )
            self.replica_manager.adopt_loaded_logs(self.log_manager.logs())
            self.local_topics = LocalTopics(
                self.broker_id,
                self.metadata_store,
                self.metadata_cache,
                self.log_manager,
                self.replica_manager,
                self._shutting_down,
            )
            if self.zk_broker is None:
                self.local_topics.reconcile()
            recovering = bool(self.log_manager.loading_partitions())
        finally:
            if not recovering:  # (else once the last log is recovered: no passes until then)
                settle_collector(self.log_manager, gc_enabled)
        self.log_manager.start_background()
        if self.config.get("remote.log.storage.system.enable"):  # KIP-405 (broker.remote_storage)
            self.remote_log_manager = await start_remote_log_manager(self)
        if recovering:
            self.local_topics.recover_later(gc_enabled)
        await self._start_listeners()
        if self.zk_broker is None:
            self.metadata_cache.set_brokers([self.local_endpoint()], self.broker_id)
            self.metadata_cache.initialized = True
        else:
            # until the controller's UpdateMetadata arrives, clients see this broker alone
            self.metadata_cache.set_brokers([self.local_endpoint()], -1)
        await self.groups.start()
        await self.transactions.start()
        await self.share_coordinator.start()
        self.share_partitions.start()
        self._groups_started = True
        if self.zk_broker is not None:
            await self.zk_broker.start()
        self._reaper = self._loop.create_task(
            reap_idle(self.connections, self.config.connections_max_idle_ms)
        )
        for ext in self.extensions:
            await ext.start(self)
        log.info(
            "kafkalite broker %d started: cluster id %s, %d topics, data in %s",
            self.broker_id,
            self.cluster_id,
            len(self.metadata_store.topics()),
            ", ".join(map(str, self.log_dirs)),
        )
        self.started.set()

    def apply_replication_throttles(self) -> None:
        """leader/follower.replication.throttled.rate from the effective (static + dynamic) configs."""
        try:
            changed = self.replication_quotas.reconfigure(self.dynamic_config.effective_props())
        except ValueError as exc:
            log.error("ignoring the replication throttles (%s)", exc)
            return
        if changed:
            log.info("replication throttles: %s", ", ".join(changed))

    async def _start_listeners(self) -> None:
        await bind_listeners(self, self.connection_quotas, self.listeners)
        self._servers = []
        for lr in self.listeners:
            assert lr.server is not None  # bind_listeners bound every one, or raised
            self._servers.append(lr.server)
        self.advertised = [lr.advertised for lr in self.listeners]

    def build_listener_tls(self, per_broker: Mapping[str, str]) -> dict[str, ssl.SSLContext]:
        """The TLS context of every SSL listener with `per_broker` dynamic settings over the static
        ones (TlsConfigError when one cannot work)."""
        return build_listener_tls(self.config, self.listeners, per_broker)

    def install_listener_tls(self, contexts: Mapping[str, ssl.SSLContext]) -> None:
        """New connections on these listeners handshake with the new contexts; open ones keep theirs."""
        install_listener_tls(self.listeners, contexts)

    def local_endpoint(self) -> BrokerEndpoint:
        """This broker as others reach it (the inter-broker listener), with every listener."""
        rack = self.config.get("broker.rack", None)
        return local_endpoint(
            self.broker_id, self.listeners, self.inter_broker_listener, str(rack) if rack else None
        )

    @property
    def port(self) -> int:
        return self.advertised[0].port

    def _shutting_down(self) -> bool:
        return not self._logs_open or (self._stopping is not None and self._stopping.is_set())

    async def stop(self, grace: float = 10.0) -> None:
        """Stop accepting, let in-flight requests finish, close connections, flush and close logs.
        In cluster mode leadership is handed over first (controlled shutdown)."""
        for ext in reversed(self.extensions):
            try:
                await ext.stop()
            except Exception:
                log.exception("stopping %s failed", type(ext).__name__)
        if self.zk_broker is not None and self.started.is_set():
            try:
                await self.zk_broker.controlled_shutdown()
            except Exception:
                log.exception("controlled shutdown failed; stopping anyway")
        for srv in self._servers:
            srv.close()
        for lr in self.listeners:
            for task in list(lr.handshakes):
                task.cancel()
        self.delayed.close()
        deadline = time.monotonic() + grace
        while any(c.busy for c in self.connections) and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        for conn in list(self.connections):
            conn.close()
        for srv in self._servers:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(srv.wait_closed(), 1.0)
        self._servers.clear()
        if self._reaper is not None:
            self._reaper.cancel()
        if self.zk_broker is not None:
            try:
                await self.zk_broker.stop()
            except Exception:
                log.exception("leaving the cluster failed")
        if self._groups_started:
            self._groups_started = False
            try:
                await self.share_partitions.stop()
            except Exception:
                log.exception("stopping the share-partition manager failed")
            try:
                await self.share_persister.close()
                await self.share_coordinator.stop()
            except Exception:
                log.exception("stopping the share coordinator failed")
            try:
                await self.transactions.stop()
            except Exception:
                log.exception("stopping the transaction coordinator failed")
            try:
                await self.groups.stop()
            except Exception:
                log.exception("stopping the group coordinator failed")
        if self.remote_log_manager is not None:
            await self.remote_log_manager.stop()
            self.remote_log_manager = None
        if self._logs_open:
            self._logs_open = False
            await asyncio.to_thread(self.log_manager.shutdown)
            del self.log_manager
        log.info("kafkalite broker %d stopped", self.broker_id)

    def request_stop(self) -> None:
        if self._stopping is not None:
            self._stopping.set()

    async def serve_forever(self, on_started: Callable[[BrokerServer], None] | None = None) -> None:
        """Start, serve until SIGTERM/SIGINT (or request_stop), then stop gracefully.

        The signal handlers go in first, so a signal during startup stops the broker once it is up."""
        loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        installed = []
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(sig, self._on_signal, sig)
                installed.append(sig)
            except (NotImplementedError, RuntimeError, ValueError):
                pass
        try:
            await self.start()
            if on_started is not None and not self._stopping.is_set():
                on_started(self)
            await self._stopping.wait()
        finally:
            for sig in installed:
                loop.remove_signal_handler(sig)
            await self.stop()

    def _on_signal(self, sig: int) -> None:
        log.info("received %s: shutting down", signal.Signals(sig).name)
        self.request_stop()

    # ------------------------------------------------------------------ topics
    def create_topic(
        self,
        name: str,
        partitions: int | None = None,
        configs: dict[str, str] | None = None,
        *,
        replication_factor: int | None = None,
        assignment: dict[int, tuple[int, ...]] | None = None,
    ) -> TopicInfo:
        """Create a topic (raises MetadataError). A single node creates and leads its logs at once;
        in a cluster the controller sees the new assignment in ZooKeeper and tells the replicas."""
        info = self.metadata_store.create_topic(
            name,
            partitions or self.config.num_partitions,
            configs,
            replication_factor=replication_factor,
            assignment=assignment,
        )
        if self.zk_broker is None:
            try:
                make_local_logs(
                    self.replica_manager,
                    self.log_manager,
                    self.log_dirs,
                    info,
                    range(info.partitions),
                )
            except TopicStorageError:
                try:  # nothing of the half-made topic stays: no metadata entry, no logs
                    self.metadata_store.delete_topic(name)
                    self.replica_manager.delete_topic(name)
                except (OSError, MetadataError) as exc:
                    log.error("rolling back topic %s: %s (remove it with DeleteTopics)", name, exc)
                raise
            self.local_topics.publish(info)
        log.info(
            "created topic %s with %d partitions (id %s)", name, info.partitions, info.topic_id
        )
        return info

    def delete_topic(self, name: str) -> TopicInfo:
        info = self.metadata_store.delete_topic(name)
        if self.zk_broker is None:
            self.metadata_cache.remove_topic(name)
            self.replica_manager.delete_topic(name)
            self.stats.forget_topic(name)
            log.info("deleted topic %s", name)
        else:
            log.info("topic %s marked for deletion", name)
        return info

    def add_partitions(
        self, name: str, count: int, assignment: dict[int, tuple[int, ...]] | None = None
    ) -> TopicInfo:
        """Grow a topic (raises MetadataError, TopicStorageError). A single node makes the new
        partitions' logs first and records the new count only once they all exist."""
        if self.zk_broker is not None:
            return self.metadata_store.set_partitions(name, count, assignment)
        current = self.metadata_store.get(name)
        if current is None:
            raise MetadataError(f"Topic '{name}' does not exist")
        new = range(current.partitions, count)
        if count > current.partitions:
            make_local_logs(self.replica_manager, self.log_manager, self.log_dirs, current, new)
        try:
            info = self.metadata_store.set_partitions(name, count, assignment)
        except (MetadataError, OSError):
            drop_local_logs(self.replica_manager, self.log_manager, self.log_dirs, name, new)
            raise
        self.local_topics.publish(info)
        return info

    def get_log(self, topic: str, partition: int) -> Log | None:
        """The log of a partition hosted here (tests and tools; handlers go through the
        ReplicaManager)."""
        return self.log_manager.get_log(topic, partition)
