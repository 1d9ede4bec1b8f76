"""The share coordinator inside a broker: `__share_group_state` partitions loaded when this broker becomes
their leader and unloaded when it stops (broker.coordinator_log); the logic is coordinator.share_state's.

A write answers once committed on the ISR; writes to one partition run one at a time, in order.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from kafkalite.broker.coordinators.coordinator_log import (
    CoordinatorHost,
    CoordinatorPartitions,
    StoredBatch,
    now_ms,
)
from kafkalite.coordinator.records import encode_batch
from kafkalite.coordinator.runtime import group_store_error
from kafkalite.coordinator.share_records import (
    SHARE_GROUP_STATE_TOPIC,
    PersisterStateBatch,
    SharePartitionKey,
)
from kafkalite.coordinator.share_state import Outcome, ShareStateManager, ShareStateResult
from kafkalite.protocol.errors import ErrorCode

if TYPE_CHECKING:
    pass

log = logging.getLogger("kafkalite.broker.share_coordinator")

E = ErrorCode


class ShareCoordinatorComponent(CoordinatorPartitions):
    """The share coordinator of one broker, following leadership of `__share_group_state`.

    A single node creates the topic when share state is first needed (not at startup); a cluster
    creates it in ZooKeeper on first need once enough brokers are alive, as the other coordinators do.
    """

    topic = SHARE_GROUP_STATE_TOPIC
    partitions_config = "share.coordinator.state.topic.num.partitions"
    replication_config = "share.coordinator.state.topic.replication.factor"
    timeout_config = "share.coordinator.write.timeout.ms"
    name = "share coordinator"

    def __init__(self, broker: CoordinatorHost) -> None:
        super().__init__(broker)
        self.manager: ShareStateManager | None = None
        self._locks: dict[int, asyncio.Lock] = {}
        self._create_lock = asyncio.Lock()
        cfg = broker.config
        rf = 1 if not broker.cluster_mode else int(cfg.get(self.replication_config))
        self.topic_configs = {
            "cleanup.policy": "compact",
            "segment.bytes": str(cfg.get("share.coordinator.state.topic.segment.bytes")),
            "compression.type": "producer",
            "unclean.leader.election.enable": "false",
            "min.insync.replicas": str(
                max(1, min(int(cfg.get("share.coordinator.state.topic.min.isr")), rf))
            ),
        }

    # -- lifecycle ---------------------------------------------------------------------------------
    async def start(self) -> None:
        partitions = await self._open_topic(create=False)
        per_snapshot = int(
            self.broker.config.get("share.coordinator.snapshot.update.records.per.snapshot")
        )
        self.manager = ShareStateManager(partitions, per_snapshot)
        started = time.monotonic()
        led = await self._load_led_partitions()
        if led:
            log.info(
                "share coordinator loaded %d %s partition(s) in %.0f ms",
                led, self.topic, (time.monotonic() - started) * 1000,
            )  # fmt: skip

    async def stop(self) -> None:
        await self._stop_tasks()
        if self.manager is not None:
            self.manager.shutdown()

    async def ensure_ready(self) -> None:
        """Make sure `__share_group_state` exists: a single node creates and loads it here, a
        cluster asks ZooKeeper for it in the background (callers retry until it has leaders)."""
        broker = self.broker
        manager = self.manager
        if manager is None:
            return
        if broker.cluster_mode:
            if self.topic not in broker.metadata_cache:
                self.ensure_topic()
            return
        if self.topic in broker.metadata_cache:
            return
        async with self._create_lock:
            if self.topic in broker.metadata_cache:
                return
            info = await asyncio.to_thread(broker.metadata_store.get, self.topic)
            if info is None:
                broker.create_topic(self.topic, manager.num_partitions, dict(self.topic_configs))
            for p in range(manager.num_partitions):
                if p not in manager.coordinator_epochs:
                    await self._load(p)

    # -- loading hooks -------------------------------------------------------------------------------
    def _coord(self) -> ShareStateManager:
        assert self.manager is not None
        return self.manager

    def _started(self) -> bool:
        return self.manager is not None

    def _owns(self, partition: int) -> bool:
        return partition in self._coord().coordinator_epochs

    def _begin_loading(self, partition: int, leader_epoch: int) -> None:
        self._coord().begin_loading(partition, leader_epoch)

    def _replay(self, partition: int, batch: StoredBatch) -> None:
        manager = self._coord()
        for key, value in batch.records:
            manager.replay(partition, key, value)

    def _finish_loading(self, partition: int) -> None:
        self._coord().finish_loading(partition)

    def _unload(self, partition: int) -> None:
        self._coord().unload(partition)

    # -- operations ----------------------------------------------------------------------------------
    def leads(self, key: SharePartitionKey) -> bool:
        """Whether this broker leads the `__share_group_state` partition of `key` (loaded or not)."""
        manager = self.manager
        return manager is not None and manager.partition_for(key) in manager.coordinator_epochs

    async def initialize(
        self, key: SharePartitionKey, state_epoch: int, start_offset: int
    ) -> ShareStateResult:
        return await self._run(key, lambda m: m.initialize(key, state_epoch, start_offset))

    async def read(self, key: SharePartitionKey, leader_epoch: int) -> ShareStateResult:
        return await self._run(key, lambda m: m.read(key, leader_epoch))

    async def write(
        self,
        key: SharePartitionKey,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        batches: tuple[PersisterStateBatch, ...] | list[PersisterStateBatch],
    ) -> ShareStateResult:
        return await self._run(
            key, lambda m: m.write(key, state_epoch, leader_epoch, start_offset, batches)
        )

    async def delete(self, key: SharePartitionKey) -> ShareStateResult:
        return await self._run(key, lambda m: m.delete(key))

    async def read_summary(self, key: SharePartitionKey, leader_epoch: int) -> ShareStateResult:
        return await self._run(key, lambda m: m.read_summary(key, leader_epoch))

    async def _run(
        self, key: SharePartitionKey, operation: Callable[[ShareStateManager], Outcome]
    ) -> ShareStateResult:
        """Run one operation on its partition, after the ones before it: append its records, wait
        until they are committed, apply them, answer."""
        manager = self.manager
        if manager is None:
            return ShareStateResult(
                E.COORDINATOR_NOT_AVAILABLE, "the share coordinator is not running"
            )
        partition = manager.partition_for(key)
        lock = self._locks.setdefault(partition, asyncio.Lock())
        async with lock:
            epoch = manager.coordinator_epochs.get(partition)
            records, result = operation(manager)
            if not records or result.error != E.NO_ERROR or epoch is None:
                return result
            code = await self.append(partition, encode_batch(records, now_ms()))
            if code != E.NO_ERROR:
                log.info(
                    "append to %s-%d failed: %s", self.topic, partition, ErrorCode.name_of(code)
                )
                return ShareStateResult(group_store_error(code))
            if not manager.owns(partition, epoch):  # unloaded meanwhile: a reload replays it
                return ShareStateResult(E.NOT_COORDINATOR)
            for record in records:
                manager.apply(partition, record)
            return result
