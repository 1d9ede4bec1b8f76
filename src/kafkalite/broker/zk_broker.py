"""ZkBroker: this broker's part in a ZooKeeper-mode cluster — registration, the controller's requests
(LeaderAndIsr, UpdateMetadata, StopReplica) applied to ReplicaManager, MetadataCache and fetchers,
ISR shrink/expand proposals (AlterPartition) and controlled shutdown (ControlledShutdown).

The controller's decisions live in cluster.controller; this is the broker's edge of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
import uuid
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from kafkalite.cluster import zk_data as zd
from kafkalite.cluster.channel import BrokerChannel, ChannelError
from kafkalite.cluster.controller.leader_balance import LeaderBalanceConfig
from kafkalite.cluster.kafka_controller import KafkaController
from kafkalite.cluster.metadata_cache import BrokerEndpoint, PartitionMetadata, TopicMetadata
from kafkalite.cluster.partition import LeaderAndIsrState, Partition
from kafkalite.cluster.replica_fetcher import FetcherConfig, ReplicaFetcherManager
from kafkalite.cluster.zk import KafkaZkClient, asyncio_callback
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.cluster import (
    AlterPartitionRequest,
    ControlledShutdownRequest,
)
from kafkalite.protocol.schema import Request, Response

if TYPE_CHECKING:
    from kafkalite.broker.zk_host import ZkHost

log = logging.getLogger("kafkalite.broker.zk_broker")

TopicPartition = tuple[str, int]
R = TypeVar("R", bound=Response)
LEADER_DURING_DELETE = -2  # UpdateMetadata's leader for a topic being deleted
ALTER_PARTITION_VERSION = 1  # topic names (v2 moved to topic ids)
CONTROLLED_SHUTDOWN_VERSION = 3


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class ControllerRequestCheck:
    """Why a controller request was refused (None: accepted)."""

    error: ErrorCode
    reason: str


class ZkBroker:
    """Everything a broker does only in cluster mode, started after the listeners are up."""

    def __init__(self, server: ZkHost, zookeeper_connect: str) -> None:
        self.server = server
        cfg = server.config
        self.broker_id = server.inter_broker.broker_id
        session_ms = int(cfg.get("zookeeper.session.timeout.ms"))
        conn_ms = cfg.get("zookeeper.connection.timeout.ms")
        self.zk = KafkaZkClient(
            zookeeper_connect,
            session_timeout_ms=session_ms,
            connection_timeout_ms=int(conn_ms) if conn_ms is not None else session_ms,
        )
        self.broker_epoch = -1
        self.controller_id = -1
        self.controller_epoch = -1
        # one connection per purpose, as Kafka: a follower's fetch parked in the leader's purgatory
        # (replica.fetch.wait.max.ms) must not hold up the controller's requests behind it
        # (each with the inter-broker listener's TLS context and SASL login, when it has them)
        self.fetcher_channels = server.inter_broker.channels("fetcher")
        self.controller_channels = server.inter_broker.channels("controller")
        self.to_controller_channels = server.inter_broker.channels("to-controller")
        self.fetchers: ReplicaFetcherManager | None = None
        self.controller: KafkaController | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._pending_isr: dict[TopicPartition, tuple[int, ...]] = {}
        # the ISR size each pending proposal started from: an accepted one is a shrink or an expand
        self._isr_size_before: dict[TopicPartition, int] = {}
        self._alter_wake = asyncio.Event()
        self.lag_time_max_ms = int(cfg.get("replica.lag.time.max.ms"))
        # topic config overrides as ZooKeeper has them (the controller's unclean-election checks
        # read this on the event loop; /config/changes keeps it current)
        self.topic_configs: dict[str, dict[str, str]] = {}
        self._session_lost = False
        self._pid_next = 0
        self._pid_end = -1  # the producer id block claimed in ZooKeeper: [_pid_next, _pid_end]
        self._pid_lock = asyncio.Lock()

    # -- lifecycle ---------------------------------------------------------------------------------
    async def connect(self) -> str:
        """Connect to ZooKeeper; returns the cluster id (created by the first broker)."""
        await asyncio.to_thread(self.zk.start)
        return await asyncio.to_thread(self.zk.get_or_create_cluster_id)

    async def start(self) -> None:
        """Register this broker, start fetchers, the ISR checker and the controller candidacy."""
        server = self.server
        cfg = server.config
        rm = server.replica_manager
        rm.alter_isr = self.propose_isr
        self.fetchers = ReplicaFetcherManager(
            self.broker_id,
            rm,
            self._channel_for,
            FetcherConfig(
                fetch_max_bytes=int(cfg.get("replica.fetch.max.bytes")),
                response_max_bytes=int(cfg.get("replica.fetch.response.max.bytes")),
                fetch_wait_max_ms=int(cfg.get("replica.fetch.wait.max.ms")),
                fetch_min_bytes=int(cfg.get("replica.fetch.min.bytes")),
                backoff_ms=int(cfg.get("replica.fetch.backoff.ms")),
                num_fetchers=int(cfg.get("num.replica.fetchers")),
            ),
            server.replication_quotas.follower,
        )
        me = server.local_endpoint()
        self.broker_epoch = await asyncio.to_thread(
            self.zk.register_broker,
            self.broker_id,
            me.host,
            me.port,
            me.rack,
            me.listeners,
        )
        log.info(
            "registered broker %d in ZooKeeper (broker epoch %d)", self.broker_id, self.broker_epoch
        )
        loop = asyncio.get_running_loop()
        self.zk.add_session_listener(asyncio_callback(loop, self._on_session))
        server.log_manager.dir_failure_listeners.append(
            asyncio_callback(loop, self._on_log_dir_failure)
        )
        self._tasks.append(loop.create_task(self._isr_expiration(), name="isr-expiration"))
        self._tasks.append(loop.create_task(self._alter_partition_sender(), name="alter-partition"))
        self._config_changes_seen = await asyncio.to_thread(self.zk.configs.config_changes)
        await asyncio.to_thread(
            self.zk.watch_children,
            zd.CONFIG_CHANGES,
            asyncio_callback(loop, self._on_config_changes),
        )
        # credentials and quotas altered between the load at start and this watch are not missed
        await self.server.scram_credentials.load()
        await self.server.client_quotas.load()
        await self.server.group_configs.load()
        self.controller = KafkaController(
            self.broker_id,
            self.zk,
            self.controller_channels,
            self._unclean_allowed,
            self.topic_configs,
            server.inter_broker_listener,
            LeaderBalanceConfig(
                enable=bool(cfg.get("auto.leader.rebalance.enable")),
                per_broker_percentage=int(cfg.get("leader.imbalance.per.broker.percentage")),
                check_interval_s=float(cfg.get("leader.imbalance.check.interval.seconds")),
            ),
        )
        await self.controller.start()

    async def stop(self) -> None:
        if self.controller is not None:
            await self.controller.stop()
        tasks = list(self._tasks)
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        self._tasks.clear()
        if self.fetchers is not None:
            await self.fetchers.shutdown()
        for channels in (
            self.fetcher_channels,
            self.controller_channels,
            self.to_controller_channels,
        ):
            await channels.close_all()
        await asyncio.to_thread(self.zk.close)

    def _unclean_allowed(self, topic: str) -> bool:
        """unclean.leader.election.enable of a topic (its override, else the broker's)."""
        override = self.topic_configs.get(topic, {}).get("unclean.leader.election.enable")
        value = (
            override
            if override is not None
            else self.server.config.get("unclean.leader.election.enable")
        )
        return str(value).lower() == "true"

    async def next_producer_id(self) -> int:
        """A producer id unique in the cluster (from this broker's block in ZooKeeper)."""
        async with self._pid_lock:
            if self._pid_next > self._pid_end:
                start, end = await asyncio.to_thread(
                    self.zk.claim_producer_id_block, self.broker_id
                )
                log.info("claimed producer ids %d..%d", start, end)
                self._pid_next, self._pid_end = start, end
            pid = self._pid_next
            self._pid_next += 1
            return pid

    def _spawn(self, coro: Coroutine[object, object, None], name: str) -> None:
        """A background task that stop() cancels, forgotten once it is done."""
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.append(task)
        task.add_done_callback(self._forget_task)

    def _forget_task(self, task: asyncio.Task[None]) -> None:
        if task in self._tasks:
            self._tasks.remove(task)

    # -- a failed log dir (JBOD) ------------------------------------------------------------------------
    def _on_log_dir_failure(self, d: Path) -> None:
        self._spawn(self._report_log_dir_failure(str(d)), "log-dir-failure")

    async def _report_log_dir_failure(self, d: str) -> None:
        """Stop fetching the partitions of the failed dir and tell the controller (a log dir event
        notification), which moves their leadership away and takes them out of their ISRs."""
        offline = [p.key for p in self.server.replica_manager.partitions() if p.offline]
        if self.fetchers is not None:
            self.fetchers.remove_fetchers(offline)
        for key in offline:  # acks=all produces waiting on them answer KAFKA_STORAGE_ERROR now
            self.server.delayed.notify(key)
        log.warning(
            "log dir %s failed: %d partitions offline here; notifying the controller",
            d,
            len(offline),
        )
        for attempt in itertools.count(1):
            try:
                await asyncio.to_thread(self.zk.write_log_dir_event, self.broker_id)
                return
            except Exception as exc:  # ZooKeeper away: the controller must still hear of it
                log.warning("log dir event notification failed (attempt %d): %r", attempt, exc)
                await asyncio.sleep(min(0.5 * attempt, 5.0))

    # -- the ZooKeeper session ------------------------------------------------------------------------
    def _on_session(self, state: str) -> None:
        if state == "lost":
            self._session_lost = True
            log.warning(
                "ZooKeeper session expired: this broker's registration is gone; it keeps serving "
                "what it leads and registers again when ZooKeeper answers"
            )
        elif state == "suspended":
            log.warning("ZooKeeper connection lost; serving on and reconnecting")
        elif state == "connected" and self._session_lost:
            self._session_lost = False
            self._spawn(self._register_again(), "re-register")

    async def _register_again(self) -> None:
        me = self.server.local_endpoint()
        while True:
            try:
                epoch = await asyncio.to_thread(
                    self.zk.register_broker,
                    self.broker_id,
                    me.host,
                    me.port,
                    me.rack,
                    me.listeners,
                )
                break
            except Exception as exc:
                log.warning("registering again in ZooKeeper failed: %r; retrying", exc)
                await asyncio.sleep(1.0)
        log.info(
            "registered broker %d in ZooKeeper again (broker epoch %d -> %d)",
            self.broker_id, self.broker_epoch, epoch,
        )  # fmt: skip
        self.broker_epoch = epoch

    # -- topic config changes (/config/changes) --------------------------------------------------------
    def _on_config_changes(self, children: list[str]) -> None:
        fresh = sorted(c for c in children if c not in self._config_changes_seen)
        self._config_changes_seen = set(children)
        if fresh:
            self._spawn(self._apply_config_changes(fresh), "config-changes")

    async def _apply_config_changes(self, changes: list[str]) -> None:
        entities = await asyncio.to_thread(self.zk.configs.config_change_entities, changes)
        topics: list[str] = []
        users: list[str] = []
        quota_entities = []
        groups: list[str] = []
        for entity in entities:
            kind, _, name = entity.partition("/")
            if kind == "topics" and name:
                topics.append(name)
                continue
            group_id = zd.parse_group_entity_path(entity)
            if group_id is not None:
                groups.append(group_id)
                continue
            quota_entity = zd.parse_quota_entity_path(entity)
            if quota_entity is not None:  # quotas (and, for a user alone, SCRAM credentials)
                quota_entities.append(quota_entity)
                if quota_entity.client_id is None and quota_entity.user is not None:
                    users.append(quota_entity.user)
        if users:  # SCRAM credentials altered through another broker
            await self.server.scram_credentials.reload(users)
        if quota_entities:
            await self.server.client_quotas.reload(quota_entities)
        if groups:  # group configs altered through another broker
            await self.server.group_configs.reload(groups)
        for topic in dict.fromkeys(topics):
            try:
                cfg = await asyncio.to_thread(self.zk.configs.topic_config, topic)
            except Exception as exc:
                log.warning("cannot read the config of topic %s: %r", topic, exc)
                continue
            self.topic_configs[topic] = cfg
            if self.server.replica_manager.hosts_topic(topic):
                try:
                    self.server.log_manager.set_topic_config(topic, cfg)
                    log.info("topic %s: config overrides now %s", topic, cfg)
                except Exception as exc:
                    log.error("topic %s: cannot apply config %s: %s", topic, cfg, exc)

    def _channel_for(self, broker_id: int) -> BrokerChannel | None:
        ep = self.server.metadata_cache.broker(broker_id)
        if ep is None:
            return None
        return self.fetcher_channels.get(broker_id, ep.host, ep.port)

    # -- controller requests -------------------------------------------------------------------------
    async def check_controller_request(
        self, controller_id: int, controller_epoch: int, broker_epoch: int, what: str, peer: str
    ) -> ControllerRequestCheck | None:
        """Kafka's checks on LeaderAndIsr / UpdateMetadata / StopReplica: an older controller epoch
        is stale; so is a broker epoch older than this registration. A request claiming a newer
        epoch must come from the controller ZooKeeper names (clients cannot forge leadership)."""
        if controller_epoch < self.controller_epoch:
            return ControllerRequestCheck(
                ErrorCode.STALE_CONTROLLER_EPOCH,
                f"{what} from {peer}: controller epoch {controller_epoch} is older than "
                f"{self.controller_epoch}",
            )
        if 0 <= broker_epoch < self.broker_epoch:
            return ControllerRequestCheck(
                ErrorCode.STALE_BROKER_EPOCH,
                f"{what} from {peer}: broker epoch {broker_epoch} is older than ours "
                f"({self.broker_epoch})",
            )
        if controller_epoch > self.controller_epoch or controller_id != self.controller_id:
            try:  # (controller id, epoch) as ZooKeeper has them
                current = await asyncio.to_thread(self.zk.read_controller)
            except Exception as exc:
                return ControllerRequestCheck(
                    ErrorCode.STALE_CONTROLLER_EPOCH,
                    f"{what} from {peer}: cannot check controller {controller_id} at epoch "
                    f"{controller_epoch} in ZooKeeper ({exc!r}); ignored",
                )
            if current is None or current != (controller_id, controller_epoch):
                return ControllerRequestCheck(
                    ErrorCode.STALE_CONTROLLER_EPOCH,
                    f"{what} from {peer} claims controller {controller_id} at epoch "
                    f"{controller_epoch}, but ZooKeeper says {current}; ignored",
                )
            self.controller_id, self.controller_epoch = current
        return None

    async def apply_leader_and_isr(
        self,
        states: Mapping[TopicPartition, LeaderAndIsrState],
        topic_ids: Mapping[str, uuid.UUID | None],
    ) -> dict[TopicPartition, ErrorCode]:
        server = self.server
        rm = server.replica_manager
        # a replica created here takes its topic's config overrides from ZooKeeper
        new_topics = {t for (t, p) in states if rm.get_partition(t, p) is None}
        configs: dict[str, dict[str, str]] = {}
        for topic in new_topics:
            try:
                configs[topic] = await asyncio.to_thread(self.zk.configs.topic_config, topic)
            except Exception as exc:
                log.warning("cannot read the config of topic %s: %s", topic, exc)
        self.topic_configs.update(configs)
        change = rm.become_leader_or_follower(self.controller_epoch, states, topic_ids, configs)
        assert self.fetchers is not None
        self.fetchers.remove_fetchers([p.key for p in change.became_leader])
        self.fetchers.add_fetchers(change.became_follower)
        for p in change.became_leader:
            self._pending_isr.pop(p.key, None)
        server.groups.on_leadership_change(change)
        server.transactions.on_leadership_change(change)
        server.share_coordinator.on_leadership_change(change)
        server.schema_registry.on_leadership_change(change)
        return change.errors

    def apply_update_metadata(
        self,
        brokers: list[BrokerEndpoint],
        states: list[PartitionMetadata],
        topic_ids: Mapping[str, uuid.UUID],
    ) -> None:
        cache = self.server.metadata_cache
        cache.set_brokers(brokers, self.controller_id)
        cache.initialized = True
        deleted = {s.topic for s in states if s.leader == LEADER_DURING_DELETE}
        for name in deleted:
            cache.remove_topic(name)
        by_topic: dict[str, list[PartitionMetadata]] = {}
        for s in states:
            if s.topic not in deleted:
                by_topic.setdefault(s.topic, []).append(s)
        for name, parts in by_topic.items():
            tid = topic_ids.get(name)
            existing = cache.topic(name)
            if existing is None or (tid is not None and existing.topic_id != tid):
                cache.put_topic(TopicMetadata(name, tid or uuid.UUID(int=0), ()))
            cache.update_partitions(parts)

    async def apply_stop_replica(
        self, partitions: list[tuple[TopicPartition, bool]]
    ) -> dict[TopicPartition, ErrorCode]:
        assert self.fetchers is not None
        rm = self.server.replica_manager
        self.fetchers.remove_fetchers([tp for tp, _ in partitions])
        out: dict[TopicPartition, ErrorCode] = {}
        for (topic, part), delete in partitions:
            try:
                rm.stop_replica(topic, part, delete)
                out[(topic, part)] = ErrorCode.NO_ERROR
            except Exception as exc:
                log.error("StopReplica of %s-%d failed: %s", topic, part, exc)
                out[(topic, part)] = ErrorCode.KAFKA_STORAGE_ERROR
        await self.fetchers.shutdown_idle()
        return out

    # -- ISR changes (KIP-497) -------------------------------------------------------------------------
    def propose_isr(self, partition: Partition, new_isr: tuple[int, ...]) -> None:
        """Ask the controller to change a partition's ISR; until it answers, the high watermark
        counts the larger set (Partition.pending_isr)."""
        if partition.pending_isr is not None or not partition.is_leader or partition.offline:
            return  # (a replica in a failed log dir no longer leads, whatever it last heard)
        partition.pending_isr = new_isr
        self._pending_isr[partition.key] = new_isr
        self._isr_size_before[partition.key] = len(partition.isr)
        self._alter_wake.set()

    async def _isr_expiration(self) -> None:
        """Every replica.lag.time.max.ms / 2: followers that fell behind leave the ISR."""
        period = max(self.lag_time_max_ms / 2000, 0.05)
        rm = self.server.replica_manager
        while True:
            await asyncio.sleep(period)
            now = _now_ms()
            for p in rm.leader_partitions():
                out = p.out_of_sync_followers(now, self.lag_time_max_ms)
                if out and p.pending_isr is None:
                    shrunk = tuple(r for r in p.isr if r not in out)
                    log.info(
                        "%s-%d: shrinking ISR %s to %s (followers %s lag > %d ms)",
                        p.topic, p.partition, list(p.isr), list(shrunk), sorted(out),
                        self.lag_time_max_ms,
                    )  # fmt: skip
                    self.propose_isr(p, shrunk)

    async def _alter_partition_sender(self) -> None:
        while True:
            await self._alter_wake.wait()
            self._alter_wake.clear()
            if not self._pending_isr:
                continue
            try:
                await self._send_alter_partition()
            except Exception as exc:
                # any failure is retried, also ZooKeeper's while it looks up the controller
                # (unreachable from a zombie leader): a sender that died here left every later
                # ISR change pending, so a leader alone in the ISR never grew it (issue 36)
                log.warning("AlterPartition to the controller failed: %r; retrying", exc)
                self.controller_id = -1  # ask ZooKeeper who the controller is now
                await asyncio.sleep(0.5)
                self._alter_wake.set()

    async def _send_alter_partition(self) -> None:
        rm = self.server.replica_manager
        batch = dict(self._pending_isr)
        T = AlterPartitionRequest.TopicData
        P = T.PartitionData
        by_topic: dict[str, list[AlterPartitionRequest.TopicData.PartitionData]] = {}
        for (topic, part), isr in batch.items():
            p = rm.get_partition(topic, part)
            if p is None or not p.is_leader:
                self._pending_isr.pop((topic, part), None)
                continue
            by_topic.setdefault(topic, []).append(
                P(
                    partition_index=part,
                    leader_epoch=p.leader_epoch,
                    new_isr=list(isr),
                    leader_recovery_state=0,
                    partition_epoch=p.partition_epoch,
                )
            )
        if not by_topic:
            return
        req = AlterPartitionRequest(
            broker_id=self.broker_id,
            broker_epoch=self.broker_epoch,
            topics=[T(topic_name=t, partitions=ps) for t, ps in by_topic.items()],
        )
        resp = await self._send_to_controller(req, ALTER_PARTITION_VERSION)
        if resp.error_code:
            raise ChannelError(f"controller answered {ErrorCode.name_of(resp.error_code)}")
        for t in resp.topics:
            for r in t.partitions:
                key = (t.topic_name, r.partition_index)
                self._pending_isr.pop(key, None)
                p = rm.get_partition(*key)
                if p is None:
                    continue
                if r.error_code == 0 and p.is_leader and r.leader_epoch == p.leader_epoch:
                    p.apply_isr(tuple(r.isr), r.partition_epoch)
                    before = self._isr_size_before.pop(key, len(r.isr))
                    if len(r.isr) < before:
                        self.server.stats.isr_shrinks += 1
                    elif len(r.isr) > before:
                        self.server.stats.isr_expands += 1
                    log.info(
                        "%s-%d: ISR now %s (partition epoch %d)",
                        key[0], key[1], list(p.isr), p.partition_epoch,
                    )  # fmt: skip
                else:
                    p.pending_isr = None
                    self._isr_size_before.pop(key, None)
                    log.info(
                        "%s-%d: ISR change refused: %s",
                        key[0], key[1], ErrorCode.name_of(r.error_code),
                    )  # fmt: skip

    async def _send_to_controller(self, request: Request[R], version: int) -> R:
        if self.controller_id < 0:
            current = await asyncio.to_thread(self.zk.read_controller)
            if current is None:
                raise ChannelError("no controller is elected")
            self.controller_id, self.controller_epoch = current
        ep = self.server.metadata_cache.broker(self.controller_id)
        if ep is not None:
            host, port = ep.host, ep.port
        else:
            reg = await asyncio.to_thread(
                self.zk.broker_endpoint, self.controller_id, self.server.inter_broker_listener
            )
            if reg is None:
                raise ChannelError(f"controller {self.controller_id} is not registered")
            host, port = reg
        ch = self.to_controller_channels.get(self.controller_id, host, port)
        response: R = await ch.send(request, version)
        return response

    # -- controlled shutdown -------------------------------------------------------------------------------
    async def controlled_shutdown(self) -> bool:
        """Ask the controller to move leadership off this broker before it stops; True when it
        leads nothing any more."""
        cfg = self.server.config
        if not bool(cfg.get("controlled.shutdown.enable")):
            return False
        retries = int(cfg.get("controlled.shutdown.max.retries"))
        backoff = int(cfg.get("controlled.shutdown.retry.backoff.ms")) / 1000
        for attempt in range(1, retries + 1):
            try:
                self.controller_id = -1  # ask ZooKeeper who it is now
                resp = await self._send_to_controller(
                    ControlledShutdownRequest(
                        broker_id=self.broker_id, broker_epoch=self.broker_epoch
                    ),
                    CONTROLLED_SHUTDOWN_VERSION,
                )
            except (TimeoutError, ChannelError, OSError) as exc:
                log.warning("controlled shutdown attempt %d failed: %s", attempt, exc)
                await asyncio.sleep(backoff)
                continue
            remaining = [(r.topic_name, r.partition_index) for r in resp.remaining_partitions]
            if resp.error_code == 0 and not remaining:
                log.info("controlled shutdown complete: this broker leads no partition")
                return True
            log.info(
                "controlled shutdown attempt %d: %s, %d partition(s) still led here",
                attempt, ErrorCode.name_of(resp.error_code), len(remaining),
            )  # fmt: skip
            await asyncio.sleep(backoff)
        log.warning(
            "controlled shutdown did not finish after %d attempts; stopping anyway", retries
        )
        return False
