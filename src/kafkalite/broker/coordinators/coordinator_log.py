"""CoordinatorPartitions: what a coordinator backed by an internal compacted topic needs from the broker —
the topic created on first need, its partitions loaded by replay when this broker becomes their leader and
unloaded when it stops, appends through the ReplicaManager answered once committed on the ISR.

The group coordinator (`__consumer_offsets`), the transaction coordinator (`__transaction_state`) and
the share coordinator (`__share_group_state`) are the subclasses; each says how to begin, feed and
finish a load and how to unload.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from kafkalite.broker.config.broker_config import BrokerConfig
from kafkalite.cluster.append_records import AppendEntry, AppendOrigin
from kafkalite.cluster.metadata import MetadataStore, TopicInfo
from kafkalite.cluster.metadata_cache import MetadataCache
from kafkalite.cluster.replica_manager import LeadershipChange, ReplicaManager
from kafkalite.coordinator import Deferred
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.exceptions import DecodeError
from kafkalite.records import iter_batches
from kafkalite.records.control import parse_end_txn_marker

log = logging.getLogger("kafkalite.broker.coordinator")

_READ_CHUNK = 4 * 1024 * 1024
_TICK_MAX_S = 0.1


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True, slots=True)
class StoredBatch:
    """One batch of a coordinator partition as a load replays it: its records' (key, value) pairs,
    the transactional producer that wrote it (-1: none) and, for a transaction marker, commit/abort."""

    producer_id: int
    records: list[tuple[bytes | None, bytes | None]]
    marker_commit: bool | None = None


class CoordinatorHost(Protocol):
    """What a coordinator's partitions read of the broker (BrokerServer is one): the static config,
    whether it is in a cluster, the ReplicaManager (made in its start()), the metadata cache and the
    metadata store (ZooKeeper's once started in a cluster), and topic creation on a single node."""

    @property
    def config(self) -> BrokerConfig: ...

    @property
    def cluster_mode(self) -> bool: ...

    @property
    def replica_manager(self) -> ReplicaManager: ...

    @property
    def metadata_cache(self) -> MetadataCache: ...

    @property
    def metadata_store(self) -> MetadataStore: ...

    def create_topic(
        self, name: str, partitions: int | None, configs: dict[str, str] | None
    ) -> TopicInfo: ...


def read_partition(
    replica_manager: ReplicaManager, topic: str, partition: int
) -> list[StoredBatch]:
    """Every batch of one coordinator partition, oldest first (runs in a worker thread)."""
    part = replica_manager.get_partition(topic, partition)
    out: list[StoredBatch] = []
    if part is None:
        return out
    offset = part.log_start_offset
    end = part.log_end_offset
    while offset < end:
        info = part.read(offset, _READ_CHUNK)
        region = info.slice
        if region is None:
            break
        advanced = False
        for batch in iter_batches(region.read_bytes(), allow_truncated_tail=True):
            if batch.next_offset <= offset:
                continue
            advanced = True
            offset = batch.next_offset
            pid = batch.producer_id if batch.is_transactional else -1
            if batch.is_control:
                if pid < 0 or not batch.records:
                    continue
                try:
                    marker = parse_end_txn_marker(batch.records[0])
                except DecodeError:
                    continue
                out.append(StoredBatch(pid, [], marker.is_commit))
                continue
            out.append(StoredBatch(pid, [(r.key, r.value) for r in batch.records]))
        if not advanced:
            break
    return out


class CoordinatorPartitions:
    """Leadership-following load/unload and committed appends for one internal topic."""

    topic: str = ""
    topic_configs: dict[str, str] = {}
    partitions_config: str = ""  # e.g. offsets.topic.num.partitions
    replication_config: str = ""  # e.g. offsets.topic.replication.factor
    timeout_config: str = ""  # e.g. offsets.commit.timeout.ms
    name: str = "coordinator"

    def __init__(self, broker: CoordinatorHost) -> None:
        self.broker = broker
        self._ticker: asyncio.Task[None] | None = None
        self._loads: dict[int, asyncio.Task[None]] = {}
        self._waits: set[asyncio.Task[None]] = set()
        self._creating: asyncio.Task[None] | None = None
        self.num_partitions = 0

    # -- hooks ------------------------------------------------------------------------------------
    def _begin_loading(self, partition: int, leader_epoch: int) -> None:
        raise NotImplementedError

    def _replay(self, partition: int, batch: StoredBatch) -> None:
        raise NotImplementedError

    def _finish_loading(self, partition: int) -> None:
        raise NotImplementedError

    def _unload(self, partition: int) -> None:
        raise NotImplementedError

    def _owns(self, partition: int) -> bool:
        raise NotImplementedError

    def _started(self) -> bool:
        raise NotImplementedError

    # -- lifecycle ---------------------------------------------------------------------------------
    async def _open_topic(self, *, create: bool = True) -> int:
        """Single node: create the topic now (unless `create` is False); a cluster creates it on
        first need (FindCoordinator) once enough brokers are alive for its replication factor, as
        Kafka does. Returns the partition count to place keys with (the existing topic's, so keys
        stay where they are)."""
        broker = self.broker
        wanted = int(broker.config.get(self.partitions_config) or 50)
        info = await asyncio.to_thread(broker.metadata_store.get, self.topic)
        if info is None and not broker.cluster_mode and create:
            info = broker.create_topic(self.topic, wanted, dict(self.topic_configs))
        if info is not None and info.partitions != wanted:
            log.warning(
                "%s has %d partitions (%s=%d); keeping %d so keys stay where they are",
                self.topic, info.partitions, self.partitions_config, wanted, info.partitions,
            )  # fmt: skip
        self.num_partitions = int(info.partitions) if info is not None else wanted
        return self.num_partitions

    async def _load_led_partitions(self) -> int:
        led = sorted(
            p.partition
            for p in self.broker.replica_manager.leader_partitions()
            if p.topic == self.topic
        )
        for p in led:
            await self._load(p)
        return len(led)

    def _start_timers(
        self, tick: Callable[[], None], next_deadline: Callable[[], int | None]
    ) -> None:
        self._ticker = asyncio.get_running_loop().create_task(
            _drive_timers(self.name, tick, next_deadline)
        )

    async def _stop_tasks(self) -> None:
        tasks: list[asyncio.Task[None]] = [*self._loads.values(), *self._waits]
        if self._ticker is not None:
            tasks.append(self._ticker)
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        self._ticker = None
        self._loads.clear()
        self._waits.clear()

    def ensure_topic(self) -> None:
        """Cluster mode: create the topic in ZooKeeper (in the background) when it does not exist
        and enough brokers are alive for its replication factor."""
        broker = self.broker
        if not broker.cluster_mode or self._creating is not None:
            return
        rf = int(broker.config.get(self.replication_config))
        alive = len(broker.metadata_cache.alive_brokers())
        if alive < rf:
            log.info(
                "%s not created yet: %d broker(s) alive, %s=%d",
                self.topic, alive, self.replication_config, rf,
            )  # fmt: skip
            return
        partitions = self.num_partitions or int(broker.config.get(self.partitions_config))
        topic, configs = self.topic, dict(self.topic_configs)

        def create() -> None:
            try:
                broker.metadata_store.create_topic(
                    topic, partitions, configs, replication_factor=rf
                )
                log.info("created %s (%d partitions, RF %d)", topic, partitions, rf)
            except Exception as exc:  # another broker was first, or ZooKeeper is away
                log.info("creating %s: %s", topic, exc)

        task = asyncio.get_running_loop().create_task(asyncio.to_thread(create))
        self._creating = task
        task.add_done_callback(lambda _t: setattr(self, "_creating", None))

    # -- following leadership ----------------------------------------------------------------------
    def on_leadership_change(self, change: LeadershipChange) -> None:
        """Partitions of our topic we now lead are loaded; those we lost are unloaded."""
        if not self._started():
            return
        for p in change.became_follower:
            if p.topic == self.topic and self._owns(p.partition):
                task = self._loads.pop(p.partition, None)
                if task is not None:
                    task.cancel()
                self._unload(p.partition)
                log.info("no longer the %s of %s-%d", self.name, self.topic, p.partition)
        loop = asyncio.get_running_loop()
        for p in change.became_leader:
            if p.topic == self.topic:
                old = self._loads.pop(p.partition, None)
                if old is not None:
                    old.cancel()
                self._loads[p.partition] = loop.create_task(self._load(p.partition))

    async def _load(self, partition: int) -> None:
        part = self.broker.replica_manager.get_partition(self.topic, partition)
        self._begin_loading(partition, part.leader_epoch if part is not None else 0)
        batches = await asyncio.to_thread(
            read_partition, self.broker.replica_manager, self.topic, partition
        )
        part = self.broker.replica_manager.get_partition(self.topic, partition)
        if part is None or not part.is_leader:
            return  # leadership moved on while we read
        for batch in batches:
            self._replay(partition, batch)
        self._finish_loading(partition)
        self._loads.pop(partition, None)

    # -- writes ------------------------------------------------------------------------------------
    def append(self, partition: int, records: bytes) -> Deferred[ErrorCode]:
        """Append a batch to our partition on this (leader) broker; the Deferred completes with
        NO_ERROR once the ISR has it (and the flush policy is met), or with the error (at once
        when nothing is left to wait for)."""
        d: Deferred[ErrorCode] = Deferred()
        timeout_ms = int(self.broker.config.get(self.timeout_config, 5000) or 5000)
        appended = self.broker.replica_manager.append_records(
            [(self.topic, (AppendEntry(partition, records),))],
            -1,
            timeout_ms,
            AppendOrigin.COORDINATOR,
        )
        result = appended.results[0][0]
        delayed = appended.delayed
        if result.error_code or delayed is None:
            # (a replica not hosted here is one this broker does not lead)
            code = result.error_code
            d.complete(
                ErrorCode.NOT_LEADER_OR_FOLLOWER
                if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                else ErrorCode(code)
            )
            return d
        task = asyncio.get_running_loop().create_task(delayed.complete())
        self._waits.add(task)
        topic = self.topic

        def finished(t: asyncio.Task[None]) -> None:
            self._waits.discard(t)
            if t.cancelled():
                d.complete(ErrorCode.NOT_COORDINATOR)
                return
            exc = t.exception()
            if exc is not None:
                log.error("write to %s-%d failed: %s", topic, partition, exc)
                d.complete(ErrorCode.KAFKA_STORAGE_ERROR)
                return
            d.complete(ErrorCode(result.error_code))

        task.add_done_callback(finished)
        return d


async def _drive_timers(
    name: str, tick: Callable[[], None], next_deadline: Callable[[], int | None]
) -> None:
    while True:
        nxt = next_deadline()
        delay = (
            _TICK_MAX_S if nxt is None else min(max((nxt - now_ms()) / 1000, 0.001), _TICK_MAX_S)
        )
        await asyncio.sleep(delay)
        try:
            tick()
        except Exception:
            log.exception("%s timer failed", name)
