"""The group coordinator inside a broker: `__consumer_offsets` partitions loaded when this broker
becomes their leader and unloaded when it stops, writes through the ReplicaManager, timers.

A coordinator write answers once the partition's high watermark has passed it (committed on the ISR).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING, Any

from kafkalite.cluster.partition import Partition
from kafkalite.cluster.replica_manager import LeadershipChange
from kafkalite.coordinator import (
    OFFSETS_TOPIC,
    CoordinatorConfig,
    CoordinatorRecord,
    Deferred,
    GroupCoordinator,
)
from kafkalite.coordinator.records import encode_batch
from kafkalite.protocol.errors import ErrorCode
from kafkalite.records import iter_batches

if TYPE_CHECKING:
    from kafkalite.broker.context import RequestContext
    from kafkalite.broker.server import BrokerServer

log = logging.getLogger("kafkalite.broker.groups")

# topic configs Kafka gives __consumer_offsets
OFFSETS_TOPIC_CONFIGS = {
    "cleanup.policy": "compact",
    "segment.bytes": str(100 * 1024 * 1024),
    "compression.type": "producer",
}
_READ_CHUNK = 4 * 1024 * 1024
_TICK_MAX_S = 0.1


def _now_ms() -> int:
    return int(time.time() * 1000)


def coordinator_config(broker: BrokerServer, partitions: int) -> CoordinatorConfig:
    cfg = broker.config
    defaults = CoordinatorConfig()

    def num(name: str, default: int) -> int:
        value = cfg.get(name, None)
        try:
            return int(value) if value is not None else default
        except (TypeError, ValueError):
            log.warning("ignoring %s=%r: not an integer", name, value)
            return default

    return CoordinatorConfig(
        offsets_topic_num_partitions=partitions,
        group_min_session_timeout_ms=num(
            "group.min.session.timeout.ms", defaults.group_min_session_timeout_ms
        ),
        group_max_session_timeout_ms=num(
            "group.max.session.timeout.ms", defaults.group_max_session_timeout_ms
        ),
        group_initial_rebalance_delay_ms=num(
            "group.initial.rebalance.delay.ms", defaults.group_initial_rebalance_delay_ms
        ),
        group_max_size=num("group.max.size", defaults.group_max_size),
        offsets_retention_minutes=num(
            "offsets.retention.minutes", defaults.offsets_retention_minutes
        ),
        offsets_retention_check_interval_ms=num(
            "offsets.retention.check.interval.ms", defaults.offsets_retention_check_interval_ms
        ),
        offset_metadata_max_bytes=num(
            "offset.metadata.max.bytes", defaults.offset_metadata_max_bytes
        ),
    )


def _read_partition(
    broker: BrokerServer, partition: int
) -> list[tuple[bytes | None, bytes | None]]:
    """Every (key, value) of one `__consumer_offsets` partition, oldest first (control records skipped)."""
    part = broker.replica_manager.get_partition(OFFSETS_TOPIC, partition)
    out: list[tuple[bytes | None, bytes | None]] = []
    if part is None:
        return out
    lg = part.log
    offset = lg.log_start_offset
    end = lg.log_end_offset
    while offset < end:
        info = lg.read(offset, _READ_CHUNK)
        region = info.slice
        if region is None:
            break
        advanced = False
        for batch in iter_batches(region.read_bytes(), allow_truncated_tail=True):
            if batch.next_offset <= offset:
                continue
            advanced = True
            offset = batch.next_offset
            if batch.is_control:
                continue
            out.extend((r.key, r.value) for r in batch.records)
        if not advanced:
            break
    return out


class GroupCoordinatorComponent:
    """The group coordinator of one broker: it owns the `__consumer_offsets` partitions this broker
    leads, loads each when leadership arrives and unloads it when leadership leaves, appends the
    coordinator's records through the ReplicaManager, and answers a write once it is committed."""

    def __init__(self, broker: BrokerServer) -> None:
        self.broker = broker
        self.coordinator: GroupCoordinator | None = None
        self._ticker: asyncio.Task[None] | None = None
        self._loads: dict[int, asyncio.Task[None]] = {}
        self._waits: set[asyncio.Task[ErrorCode]] = set()
        self._creating: asyncio.Task[None] | None = None

    # -- lifecycle ---------------------------------------------------------------------------------
    async def start(self) -> None:
        """Create `__consumer_offsets` if needed, start the coordinator and load what we lead."""
        broker = self.broker
        wanted = int(broker.config.get("offsets.topic.num.partitions", 50) or 50)
        info = await asyncio.to_thread(broker.metadata_store.get, OFFSETS_TOPIC)
        if info is None and broker.zk_broker is None:
            info = broker.create_topic(OFFSETS_TOPIC, wanted, dict(OFFSETS_TOPIC_CONFIGS))
        # in a cluster the topic is created on first need (FindCoordinator), once enough brokers
        # are alive for offsets.topic.replication.factor, as Kafka does
        if info is not None and info.partitions != wanted:
            log.warning(
                "%s has %d partitions (offsets.topic.num.partitions=%d); keeping %d so groups stay where they are",
                OFFSETS_TOPIC, info.partitions, wanted, info.partitions,
            )  # fmt: skip
        partitions = int(info.partitions) if info is not None else wanted
        coordinator = GroupCoordinator(
            self._append, config=coordinator_config(broker, partitions), clock=_now_ms
        )
        self.coordinator = coordinator
        started = time.monotonic()
        led = sorted(
            p.partition
            for p in broker.replica_manager.leader_partitions()
            if p.topic == OFFSETS_TOPIC
        )
        for p in led:
            await self._load(p)
        log.info(
            "group coordinator loaded %d %s partition(s) in %.0f ms: %d group(s)",
            len(led), OFFSETS_TOPIC, (time.monotonic() - started) * 1000, len(coordinator.groups),
        )  # fmt: skip
        self._ticker = asyncio.get_running_loop().create_task(_drive_timers(coordinator))

    async def stop(self) -> None:
        tasks: list[asyncio.Task[Any]] = [*self._loads.values(), *self._waits]
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
        if self.coordinator is not None:
            self.coordinator.shutdown()

    def ensure_offsets_topic(self) -> None:
        """Cluster mode: create `__consumer_offsets` in ZooKeeper (in the background) when it does
        not exist and enough brokers are alive for its replication factor."""
        broker = self.broker
        if broker.zk_broker is None or self._creating is not None:
            return
        rf = int(broker.config.get("offsets.topic.replication.factor"))
        alive = len(broker.metadata_cache.alive_brokers())
        if alive < rf:
            log.info(
                "%s not created yet: %d broker(s) alive, offsets.topic.replication.factor=%d",
                OFFSETS_TOPIC, alive, rf,
            )  # fmt: skip
            return
        coord = self.coordinator
        partitions = (
            coord.config.offsets_topic_num_partitions
            if coord is not None
            else int(broker.config.get("offsets.topic.num.partitions"))
        )

        def create() -> None:
            try:
                broker.metadata_store.create_topic(
                    OFFSETS_TOPIC, partitions, dict(OFFSETS_TOPIC_CONFIGS), replication_factor=rf
                )
                log.info("created %s (%d partitions, RF %d)", OFFSETS_TOPIC, partitions, rf)
            except Exception as exc:  # another broker was first, or ZooKeeper is away
                log.info("creating %s: %s", OFFSETS_TOPIC, exc)

        task = asyncio.get_running_loop().create_task(asyncio.to_thread(create))
        self._creating = task
        task.add_done_callback(lambda _t: setattr(self, "_creating", None))

    # -- following leadership ------------------------------------------------------------------------
    def on_leadership_change(self, change: LeadershipChange) -> None:
        """`__consumer_offsets` partitions we now lead are loaded; those we lost are unloaded."""
        coord = self.coordinator
        if coord is None:
            return
        for p in change.became_follower:
            if p.topic == OFFSETS_TOPIC and p.partition in coord.owned_partitions:
                task = self._loads.pop(p.partition, None)
                if task is not None:
                    task.cancel()
                coord.unload(p.partition)
                log.info("no longer the coordinator of %s-%d", OFFSETS_TOPIC, p.partition)
        loop = asyncio.get_running_loop()
        for p in change.became_leader:
            if p.topic == OFFSETS_TOPIC:
                old = self._loads.pop(p.partition, None)
                if old is not None:
                    old.cancel()
                self._loads[p.partition] = loop.create_task(self._load(p.partition))

    async def _load(self, partition: int) -> None:
        coord = self.coordinator
        assert coord is not None
        coord.begin_loading(partition)
        records = await asyncio.to_thread(_read_partition, self.broker, partition)
        part = self.broker.replica_manager.get_partition(OFFSETS_TOPIC, partition)
        if part is None or not part.is_leader:
            return  # leadership moved on while we read
        for key, value in records:
            coord.replay(partition, key, value)
        coord.finish_loading(partition)
        self._loads.pop(partition, None)

    # -- the coordinator's writes ------------------------------------------------------------------
    def _append(self, partition: int, records: list[CoordinatorRecord]) -> Deferred[ErrorCode]:
        d: Deferred[ErrorCode] = Deferred()
        try:
            part, result = self.broker.replica_manager.append_to_leader(
                OFFSETS_TOPIC, partition, encode_batch(records, _now_ms()), -1
            )
        except Exception as exc:
            code = getattr(exc, "error_code", None)
            if code is None:
                log.exception("append to %s-%d failed", OFFSETS_TOPIC, partition)
                code = ErrorCode.UNKNOWN_SERVER_ERROR
            else:
                log.warning("append to %s-%d failed: %s", OFFSETS_TOPIC, partition, exc)
            d.complete(ErrorCode(code))
            return d
        required = result[1] + 1
        flush = part.log.needs_flush
        if not flush and part.log.high_watermark >= required:
            d.complete(ErrorCode.NO_ERROR)
            return d
        task = asyncio.get_running_loop().create_task(self._await_commit(part, required, flush))
        self._waits.add(task)

        def finished(t: asyncio.Task[ErrorCode]) -> None:
            self._waits.discard(t)
            if t.cancelled():
                d.complete(ErrorCode.NOT_COORDINATOR)
                return
            exc = t.exception()
            if exc is not None:
                log.error("write to %s-%d failed: %s", OFFSETS_TOPIC, partition, exc)
                d.complete(ErrorCode.KAFKA_STORAGE_ERROR)
                return
            d.complete(t.result())

        task.add_done_callback(finished)
        return d

    async def _await_commit(self, part: Partition, required: int, flush: bool) -> ErrorCode:
        """Wait for the fsync the flush policy asks for (off the loop thread), then for the high
        watermark to pass the write (every ISR member has it)."""
        if flush:
            await asyncio.to_thread(part.log.flush)
        timeout = int(self.broker.config.get("offsets.commit.timeout.ms", 5000) or 5000) / 1000
        await self.broker.delayed.wait_until(
            [part.key], lambda: part.acks_all_done(required)[0], timeout
        )
        done, code = part.acks_all_done(required)
        if not done:
            return ErrorCode.REQUEST_TIMED_OUT
        return ErrorCode(code)


def coordinator_of(ctx: RequestContext) -> GroupCoordinator | None:
    return ctx.broker.groups.coordinator


async def _drive_timers(coordinator: GroupCoordinator) -> None:
    while True:
        nxt = coordinator.next_deadline()
        delay = (
            _TICK_MAX_S if nxt is None else min(max((nxt - _now_ms()) / 1000, 0.001), _TICK_MAX_S)
        )
        await asyncio.sleep(delay)
        try:
            coordinator.tick()
        except Exception:
            log.exception("group coordinator timer failed")


def client_host(ctx: RequestContext) -> str:
    """Kafka's clientHost: '/' and the peer address."""
    peer = str(getattr(ctx.connection, "peer", "") or "")
    host = peer.rsplit(":", 1)[0] if ":" in peer else peer
    return "/" + host if host else ""
