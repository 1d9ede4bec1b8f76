"""KafkaController: the I/O edge of the controller — competes for /controller, turns ZooKeeper watches
and broker requests into events for ControllerMachine, one at a time, and carries out its effects:
partition-state writes, LeaderAndIsr / UpdateMetadata / StopReplica requests, replies.

Watches arrive on kazoo's thread and are hopped onto the event loop; every ZooKeeper call runs in a
worker thread; requests to each broker go out in order from one queue per broker.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections import deque
from collections.abc import Callable
from typing import Any

from kazoo.exceptions import KazooException

from kafkalite.cluster import zk_data as zd
from kafkalite.cluster.channel import ChannelError, ChannelManager
from kafkalite.cluster.controller.events import LeaderAndIsrResponseReceived, LogDirEventNotified
from kafkalite.cluster.controller.leader_balance import LeaderBalanceConfig
from kafkalite.cluster.controller.machine import (
    AlterPartitionItem,
    AlterPartitionRequested,
    BrokerInfo,
    BrokersChanged,
    ControlledShutdownRequested,
    ControllerMachine,
    DeleteTopicZNodes,
    Effect,
    Event,
    LeaderElectionRequested,
    LeaderImbalanceCheck,
    LegacyReassignmentRequested,
    PartitionStatesReloaded,
    PartitionStatesWritten,
    ReadPartitionStates,
    ReassignmentRequested,
    ReplyAlterPartition,
    ReplyControlledShutdown,
    ReplyLeaderElection,
    ReplyReassignment,
    SendLeaderAndIsr,
    SendStopReplica,
    SendUpdateMetadata,
    Startup,
    TopicDeletionRequested,
    TopicInfo,
    TopicsChanged,
    WriteLegacyReassignments,
    WritePartitionStates,
    WriteTopicAssignment,
)
from kafkalite.cluster.controller.reassignment import ReplicaAssignment
from kafkalite.cluster.controller.states import LeaderIsr
from kafkalite.cluster.controller_requests import (
    LEADER_AND_ISR_VERSION,
    STOP_REPLICA_VERSION,
    UPDATE_METADATA_VERSION,
    broker_epoch,
    leader_and_isr_request,
    stop_replica_request,
    storage_errors,
    update_metadata_request,
)
from kafkalite.cluster.zk import ControllerMovedError, KafkaZkClient, ZkError, asyncio_callback
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.cluster import (
    LeaderAndIsrRequest,
)

log = logging.getLogger("kafkalite.cluster.controller")

TopicPartition = tuple[str, int]
REPLY_TIMEOUT_S = 30.0

_ELECT = "elect"
_BROKERS = "brokers"
_TOPICS = "topics"
_DELETIONS = "deletions"
_LEGACY_REASSIGN = "reassign_partitions"
_PREFERRED_ELECTION = "preferred_replica_election"
_LOG_DIR_EVENTS = "log_dir_events"


class KafkaController:
    def __init__(
        self,
        broker_id: int,
        zk: KafkaZkClient,
        channels: ChannelManager,
        unclean: Callable[[str], bool],
        topic_configs: dict[str, dict[str, str]] | None = None,
        inter_broker_listener: str | None = None,
        leader_balance: LeaderBalanceConfig | None = None,
    ) -> None:
        self.broker_id = broker_id
        # the listener every broker reaches the others on (its endpoint in each registration)
        self.inter_broker_listener = inter_broker_listener
        self.zk = zk
        self.channels = channels
        self.machine = ControllerMachine(broker_id, unclean)
        # topic overrides read from ZooKeeper when a topic first appears (`unclean` consults them)
        self.topic_configs = topic_configs if topic_configs is not None else {}
        self.active = False
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._replies: dict[int, asyncio.Future[Any]] = {}
        self._ids = itertools.count(1)
        self._outbox: dict[int, asyncio.Queue[Any]] = {}
        self._senders: dict[int, asyncio.Task[None]] = {}
        self._watching = False
        self._topic_watches: set[str] = set()
        self._epoch_zk_version = -1
        self._resign = False
        self.leader_balance = leader_balance or LeaderBalanceConfig()
        self._timer: asyncio.Task[None] | None = None

    @property
    def epoch(self) -> int:
        return self.machine.epoch

    # -- lifecycle ----------------------------------------------------------------------------------
    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._task = loop.create_task(self._run(), name=f"controller-{self.broker_id}")
        if self.leader_balance.enable:
            self._timer = loop.create_task(self._rebalance_timer(), name="leader-rebalance")
        self.zk.add_session_listener(asyncio_callback(loop, self._on_session))
        await asyncio.to_thread(
            self.zk.watch_data, zd.CONTROLLER, asyncio_callback(loop, self._on_controller_znode)
        )

    async def stop(self) -> None:
        if self.active:
            self.active = False
            with contextlib.suppress(Exception):
                await asyncio.to_thread(self.zk.resign_controller, self.broker_id)
        tasks = [t for t in (self._task, self._timer, *self._senders.values()) if t is not None]
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        for fut in self._replies.values():
            if not fut.done():
                fut.cancel()

    def _on_controller_znode(self, data: bytes | None) -> None:
        if data is None:
            self._queue.put_nowait(_ELECT)  # nobody leads: try
        elif self.active:
            try:
                if zd.decode_controller(data) != self.broker_id:
                    self._queue.put_nowait(_ELECT)  # someone else took over: step down
            except zd.ZkDataError:
                pass

    def _enqueue(self, what: Any) -> Callable[..., None]:
        def put(*_args: Any) -> None:
            self._queue.put_nowait(what)

        return put

    # -- the event loop --------------------------------------------------------------------------------
    async def _run(self) -> None:
        while True:
            item = await self._queue.get()
            try:
                await self._process(item)
            except asyncio.CancelledError:
                raise
            except ControllerMovedError as exc:
                self._step_down(str(exc))
            except (ZkError, KazooException) as exc:
                # ZooKeeper failed under the event: what the machine knows may now be stale, so
                # give up the office and win it again (a full reload) once ZooKeeper answers
                if self.active:
                    self._step_down(f"ZooKeeper failed while handling {item!r}: {exc!r}")
                    self._retry_election_later()
                else:
                    log.warning("controller event %r: ZooKeeper failed: %r", item, exc)
                    if item == _ELECT:
                        self._retry_election_later()  # the election itself failed: try again
            except Exception:
                log.exception("controller event %r failed", item)

    def _step_down(self, why: str) -> None:
        if self.active:
            log.warning("broker %d steps down as controller: %s", self.broker_id, why)
        self.active = False
        self._resign = True
        for rid in list(self._replies):
            self._resolve(rid, None)

    def _retry_election_later(self, delay: float = 1.0) -> None:
        loop = asyncio.get_running_loop()
        loop.call_later(delay, self._queue.put_nowait, _ELECT)

    def _on_session(self, state: str) -> None:
        if state == "lost":
            self._step_down("its ZooKeeper session expired")
        elif state == "connected":
            self._queue.put_nowait(_ELECT)

    async def _process(self, item: Any) -> None:
        if item == _ELECT:
            await self._elect()
            return
        if not self.active:
            if isinstance(
                item,
                (
                    ControlledShutdownRequested,
                    AlterPartitionRequested,
                    ReassignmentRequested,
                    LeaderElectionRequested,
                ),
            ):
                self._resolve(item.request_id, None)
            return
        event: Event
        if item == _BROKERS:
            event = BrokersChanged(await self._load_brokers())
        elif item == _TOPICS:
            event = TopicsChanged(await self._load_topics())
        elif item == _DELETIONS:
            names = await asyncio.to_thread(self.zk.topics_to_delete)
            if not names:
                return
            event = TopicDeletionRequested(frozenset(names))
        elif item == _LEGACY_REASSIGN:
            data = await asyncio.to_thread(self.zk.reassignment_request)
            if data is None:
                return
            try:
                targets = zd.decode_reassignment_request(data)
            except zd.ZkDataError as exc:
                log.error("ignoring and deleting %s: %s", zd.REASSIGN_PARTITIONS, exc)
                await asyncio.to_thread(
                    self.zk.write_reassignment_request, {}, self._epoch_zk_version
                )
                return
            event = LegacyReassignmentRequested(targets)
        elif item == _PREFERRED_ELECTION:
            await self._preferred_replica_election()
            return
        elif item == _LOG_DIR_EVENTS:
            failed = await asyncio.to_thread(self.zk.take_log_dir_events)
            if not failed:
                return
            log.warning("log dir failures reported by brokers %s", sorted(failed))
            event = LogDirEventNotified(frozenset(failed))
        else:
            event = item
        await self._execute(self.machine.handle(event))

    async def _elect(self) -> None:
        try:
            current = await asyncio.to_thread(self.zk.read_controller)
        except (ZkError, KazooException) as exc:
            log.debug("controller election waits for ZooKeeper: %r", exc)
            self._retry_election_later()
            return
        if self.active:
            if current is not None and current[0] == self.broker_id:
                return
            log.warning("broker %d is no longer the controller", self.broker_id)
            self.active = False
            return
        if current is not None and current[0] == self.broker_id and self._resign:
            # still ours in ZooKeeper, but this broker stepped down (a ZooKeeper failure under an
            # event): resign and run again, so the next term starts from a fresh epoch and reload
            await asyncio.to_thread(self.zk.resign_controller, self.broker_id)
            current = None
        if current is not None:
            return
        self._resign = False
        won = await asyncio.to_thread(self.zk.try_elect_controller, self.broker_id)
        if won is None:
            return
        epoch, self._epoch_zk_version = won
        log.info("broker %d is the controller (controller epoch %d)", self.broker_id, epoch)
        brokers = await self._load_brokers()
        topics = await self._load_topics()
        tps = [(t.name, p) for t in topics.values() for p in t.assignment]
        raw = await asyncio.to_thread(self.zk.partition_states, tps)
        states = {
            tp: LeaderIsr(s.leader, s.leader_epoch, s.isr, s.version) for tp, s in raw.items()
        }
        deleting = frozenset(await asyncio.to_thread(self.zk.topics_to_delete))
        self.active = True
        await self._watch()
        await self._execute(self.machine.handle(Startup(epoch, brokers, topics, states, deleting)))
        self._queue.put_nowait(_LEGACY_REASSIGN)  # a pending /admin/reassign_partitions resumes
        self._queue.put_nowait(_PREFERRED_ELECTION)  # so does /admin/preferred_replica_election

    async def _watch(self) -> None:
        if self._watching:
            return
        self._watching = True
        loop = asyncio.get_running_loop()
        for path, what in (
            (zd.BROKER_IDS, _BROKERS),
            (zd.BROKER_TOPICS, _TOPICS),
            (zd.DELETE_TOPICS, _DELETIONS),
            (zd.LOG_DIR_EVENT_NOTIFICATION, _LOG_DIR_EVENTS),
        ):
            await asyncio.to_thread(
                self.zk.watch_children, path, asyncio_callback(loop, self._enqueue(what))
            )

        def on_reassign_znode(data: bytes | None) -> None:
            if data is not None:
                self._queue.put_nowait(_LEGACY_REASSIGN)

        await asyncio.to_thread(
            self.zk.watch_data, zd.REASSIGN_PARTITIONS, asyncio_callback(loop, on_reassign_znode)
        )

        def on_election_znode(data: bytes | None) -> None:
            if data is not None:
                self._queue.put_nowait(_PREFERRED_ELECTION)

        await asyncio.to_thread(
            self.zk.watch_data,
            zd.PREFERRED_REPLICA_ELECTION,
            asyncio_callback(loop, on_election_znode),
        )

    async def _preferred_replica_election(self) -> None:
        """Kafka's legacy /admin/preferred_replica_election: elect the preferred leaders of the
        partitions it lists, then delete it (as Kafka's controller does, whatever the outcome)."""
        data = await asyncio.to_thread(self.zk.preferred_replica_election)
        if data is None:
            return
        try:
            tps = zd.decode_preferred_replica_election(data)
        except zd.ZkDataError as exc:
            log.error("ignoring and deleting %s: %s", zd.PREFERRED_REPLICA_ELECTION, exc)
        else:
            await self._execute(self.machine.handle(LeaderElectionRequested(0, frozenset(tps))))
        await asyncio.to_thread(self.zk.delete_preferred_replica_election, self._epoch_zk_version)

    async def _load_brokers(self) -> dict[int, BrokerInfo]:
        regs = await asyncio.to_thread(self.zk.live_brokers)
        out = {}
        for b, r in regs.items():
            host, port = r.endpoint(self.inter_broker_listener)
            out[b] = BrokerInfo(b, host, port, r.rack, r.epoch, r.listeners)
        return out

    async def _load_topics(self) -> dict[str, TopicInfo]:
        topics = await asyncio.to_thread(self.zk.topics)
        loop = asyncio.get_running_loop()
        for name in topics:
            if name not in self.topic_configs:
                self.topic_configs[name] = await asyncio.to_thread(
                    self.zk.configs.topic_config, name
                )
            if name not in self._topic_watches:
                # new partitions of an existing topic change its znode's data, not the children
                self._topic_watches.add(name)
                await asyncio.to_thread(
                    self.zk.watch_data,
                    zd.topic_path(name),
                    asyncio_callback(loop, self._enqueue(_TOPICS)),
                )
        return {
            n: TopicInfo(n, t.topic_id, dict(t.partitions), dict(t.adding), dict(t.removing))
            for n, t in topics.items()
        }

    # -- requests from brokers (ControlledShutdown, AlterPartition) -----------------------------------------
    async def controlled_shutdown(
        self, broker_id: int, broker_epoch: int
    ) -> ReplyControlledShutdown:
        rid = next(self._ids)
        reply = await self._ask(ControlledShutdownRequested(broker_id, broker_epoch, rid), rid)
        if reply is None:
            return ReplyControlledShutdown(rid, ErrorCode.NOT_CONTROLLER, ())
        assert isinstance(reply, ReplyControlledShutdown)
        return reply

    async def alter_partition(
        self, broker_id: int, broker_epoch: int, items: tuple[AlterPartitionItem, ...]
    ) -> ReplyAlterPartition:
        rid = next(self._ids)
        reply = await self._ask(AlterPartitionRequested(broker_id, broker_epoch, items, rid), rid)
        if reply is None:
            return ReplyAlterPartition(rid, ErrorCode.NOT_CONTROLLER, {})
        assert isinstance(reply, ReplyAlterPartition)
        return reply

    async def alter_partition_reassignments(
        self, targets: dict[TopicPartition, tuple[int, ...] | None]
    ) -> ReplyReassignment | None:
        """AlterPartitionReassignments; None: this broker is not (or no longer) the controller."""
        rid = next(self._ids)
        reply = await self._ask(ReassignmentRequested(dict(targets), rid), rid)
        assert reply is None or isinstance(reply, ReplyReassignment)
        return reply

    async def elect_leaders(
        self, election_type: int, partitions: frozenset[TopicPartition] | None
    ) -> ReplyLeaderElection | None:
        """ElectLeaders (None partitions: all); None: this broker is not (or no longer) the controller."""
        rid = next(self._ids)
        reply = await self._ask(LeaderElectionRequested(election_type, partitions, rid), rid)
        assert reply is None or isinstance(reply, ReplyLeaderElection)
        return reply

    async def _rebalance_timer(self) -> None:
        """auto.leader.rebalance.enable: every leader.imbalance.check.interval.seconds, the active
        controller checks the leader imbalance of each broker."""
        while True:
            await asyncio.sleep(self.leader_balance.check_interval_s)
            if self.active:
                self._queue.put_nowait(
                    LeaderImbalanceCheck(self.leader_balance.per_broker_percentage)
                )

    def list_partition_reassignments(
        self, partitions: list[TopicPartition] | None
    ) -> dict[TopicPartition, ReplicaAssignment] | None:
        """ListPartitionReassignments from the controller's state; None: not the controller."""
        if not self.active:
            return None
        return self.machine.reassignments(partitions)

    async def _ask(self, event: Any, rid: int) -> Any:
        if not self.active:
            return None
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._replies[rid] = fut
        self._queue.put_nowait(event)
        try:
            return await asyncio.wait_for(fut, REPLY_TIMEOUT_S)
        except (TimeoutError, asyncio.CancelledError):
            return None
        finally:
            self._replies.pop(rid, None)

    def _resolve(self, rid: int, value: Any) -> None:
        fut = self._replies.get(rid)
        if fut is not None and not fut.done():
            fut.set_result(value)

    # -- effects ------------------------------------------------------------------------------------------
    async def _execute(self, effects: list[Effect]) -> None:
        queue: deque[Effect] = deque(effects)
        while queue:
            eff = queue.popleft()
            follow: list[Effect] = []
            if isinstance(eff, WritePartitionStates):
                done, failed = await asyncio.to_thread(
                    self.zk.write_partition_states,
                    {
                        tp: (s.leader, s.leader_epoch, s.isr, s.partition_epoch)
                        for tp, s in eff.states.items()
                    },
                    eff.controller_epoch,
                    self._epoch_zk_version,
                )
                if failed:
                    log.warning("partition state writes lost their compare-and-set: %s", failed)
                follow = self.machine.handle(PartitionStatesWritten(eff.tag, done, tuple(failed)))
            elif isinstance(eff, ReadPartitionStates):
                raw = await asyncio.to_thread(self.zk.partition_states, list(eff.partitions))
                states = {
                    tp: LeaderIsr(s.leader, s.leader_epoch, s.isr, s.version)
                    for tp, s in raw.items()
                }
                follow = self.machine.handle(PartitionStatesReloaded(states))
            elif isinstance(eff, DeleteTopicZNodes):
                await asyncio.to_thread(self.zk.delete_topic_znodes, eff.topic)
                self._topic_watches.discard(eff.topic)
                self.topic_configs.pop(eff.topic, None)
                log.info("deleted topic %s", eff.topic)
            elif isinstance(eff, WriteTopicAssignment):
                t = eff.topic
                await asyncio.to_thread(
                    self.zk.write_topic_assignment_as_controller,
                    zd.TopicAssignment(t.name, t.topic_id, t.assignment, t.adding, t.removing),
                    self._epoch_zk_version,
                )
            elif isinstance(eff, WriteLegacyReassignments):
                await asyncio.to_thread(
                    self.zk.write_reassignment_request, eff.targets, self._epoch_zk_version
                )
            elif isinstance(
                eff,
                (
                    ReplyControlledShutdown,
                    ReplyAlterPartition,
                    ReplyReassignment,
                    ReplyLeaderElection,
                ),
            ):
                self._resolve(eff.request_id, eff)
            elif isinstance(eff, SendLeaderAndIsr):
                self._post(
                    eff.broker_id,
                    leader_and_isr_request(self.machine, self.broker_id, eff),
                    LEADER_AND_ISR_VERSION,
                )
            elif isinstance(eff, SendUpdateMetadata):
                for b in eff.broker_ids:
                    self._post(
                        b,
                        update_metadata_request(self.machine, self.broker_id, eff, b),
                        UPDATE_METADATA_VERSION,
                    )
            elif isinstance(eff, SendStopReplica):
                self._post(
                    eff.broker_id,
                    stop_replica_request(self.machine, self.broker_id, eff),
                    STOP_REPLICA_VERSION,
                )
            queue.extendleft(reversed(follow))

    def _broker_epoch(self, broker_id: int) -> int:
        return broker_epoch(self.machine, broker_id)

    def _post(self, broker_id: int, request: Any, version: int) -> None:
        """Queue a request for one broker; a sender per broker keeps them in order."""
        box = self._outbox.get(broker_id)
        if box is None:
            box = self._outbox[broker_id] = asyncio.Queue()
            self._senders[broker_id] = asyncio.get_running_loop().create_task(
                self._send_loop(broker_id, box), name=f"controller-to-{broker_id}"
            )
        box.put_nowait((request, version, self._broker_epoch(broker_id)))

    async def _send_loop(self, broker_id: int, box: asyncio.Queue[Any]) -> None:
        """Send each request until it is answered, as Kafka's controller does: only a broker that
        left (or came back as a new incarnation, which is sent everything again) or the loss of
        the office ends the retries."""
        while True:
            request, version, epoch = await box.get()
            attempt = 0
            while True:
                b = self.machine.brokers.get(broker_id)
                if b is None or b.epoch != epoch or not self.active:
                    break
                try:
                    ch = self.channels.get(broker_id, b.host, b.port)
                    resp = await ch.send(request, version)
                    if resp.error_code:
                        log.warning(
                            "broker %d answered %s with %s",
                            broker_id, type(request).__name__, ErrorCode.name_of(resp.error_code),
                        )  # fmt: skip
                    elif isinstance(request, LeaderAndIsrRequest):
                        offline = storage_errors(request, resp)
                        if offline:  # replicas in a failed log dir (Kafka's replicasOnOfflineDirs)
                            self._queue.put_nowait(
                                LeaderAndIsrResponseReceived(broker_id, epoch, offline)
                            )
                    break
                except ChannelError as exc:
                    attempt += 1
                    if attempt <= 3 or attempt % 20 == 0:
                        log.warning(
                            "%s to broker %d failed (attempt %d): %s; retrying",
                            type(request).__name__, broker_id, attempt, exc,
                        )  # fmt: skip
                    await asyncio.sleep(min(0.2 * attempt, 2.0))
