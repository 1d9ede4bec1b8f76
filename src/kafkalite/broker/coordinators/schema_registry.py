"""The Schema Registry's I/O over the compacted one-partition `_schemas` topic: the state is rebuilt by
replaying this broker's replica (to the HW on a follower, the LEO on the leader); writes go to the leader.

Every broker serves reads from its own replica; a write on a broker that does not lead `_schemas`
is refused with `NotPrimary` (the HTTP side forwards it). Ids come from the replayed state under one
lock on the leader, so an id answered is committed on the ISR and a new leader's replay sees it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import TypeVar

from kafkalite.broker.coordinators.coordinator_log import CoordinatorHost
from kafkalite.cluster.append_records import AppendEntry, AppendOrigin
from kafkalite.cluster.partition import Partition
from kafkalite.cluster.replica_manager import LeadershipChange
from kafkalite.protocol.errors import ErrorCode
from kafkalite.records import iter_batches
from kafkalite.records.builder import RecordBatchBuilder
from kafkalite.schemas.model import operation_timeout, store_error
from kafkalite.schemas.registry import Record, RegistryState

log = logging.getLogger("kafkalite.broker.schemas")

SCHEMAS_TOPIC = "_schemas"
_READ_CHUNK = 4 * 1024 * 1024
_T = TypeVar("_T")


class NotPrimary(Exception):
    """This broker does not lead `_schemas`; `leader` is the broker that does (-1: none yet)."""

    def __init__(self, leader: int) -> None:
        super().__init__(f"broker {leader} leads {SCHEMAS_TOPIC}")
        self.leader = leader


def _read_from(part: Partition, offset: int, end: int) -> tuple[list[Record], int]:
    """The (key, value) records of `part` in [offset, end), and the offset after the last batch
    read (runs in a worker thread)."""
    out: list[Record] = []
    offset = max(offset, part.log_start_offset)
    while offset < end:
        region = part.read(offset, _READ_CHUNK, max_offset=end).slice
        if region is None:
            break
        advanced = False
        for batch in iter_batches(region.read_bytes(), allow_truncated_tail=True):
            if batch.next_offset <= offset or batch.base_offset >= end:
                continue
            advanced = True
            offset = batch.next_offset
            if batch.is_control:
                continue
            out += [(r.key or b"", r.value) for r in batch.records]
        if not advanced:
            break
    return out, offset


class SchemaRegistryComponent:
    """One broker's registry: its replayed state, catching up on demand, and the leader's writes."""

    def __init__(self, broker: CoordinatorHost) -> None:
        self.broker = broker
        self.state = RegistryState()
        self._next_offset = 0
        self._leader_epoch = -1
        self._catch_up_lock = asyncio.Lock()
        self._write_lock = asyncio.Lock()
        self.http_url: str | None = None  # this broker's HTTP listener, once bound (kafkalite.web)
        self.broker_id = -1
        self._announced_epoch = -1
        self._tasks: set[asyncio.Task[None]] = set()
        self._prefixes: dict[tuple[str, str], set[bytes]] = {}
        self._prefixes_at = (0, -1)

    # -- reads ---------------------------------------------------------------------------------------
    def _partition(self) -> Partition | None:
        return self.broker.replica_manager.get_partition(SCHEMAS_TOPIC, 0)

    def _behind(self, part: Partition) -> bool:
        end = part.log_end_offset if part.is_leader else part.high_watermark
        return end != self._next_offset or (
            part.is_leader and part.leader_epoch != self._leader_epoch
        )

    async def current(self) -> RegistryState:
        """The state with every record of this broker's replica replayed (committed ones on a
        follower; all on the leader, whose log is the truth)."""
        part = self._partition()
        if part is None or not self._behind(part):
            return self.state
        async with self._catch_up_lock:
            part = self._partition()
            if part is None:
                return self.state
            end = part.log_end_offset if part.is_leader else part.high_watermark
            if end < self._next_offset or part.log_start_offset > self._next_offset:
                # the replica was truncated or cleaned below what we replayed: replay it all
                self.state, self._next_offset = RegistryState(), 0
            if self._next_offset < end:
                records, reached = await asyncio.to_thread(_read_from, part, self._next_offset, end)
                for key, value in records:
                    self.state.replay(key, value)
                self._next_offset = reached
            if part.is_leader:
                self._leader_epoch = part.leader_epoch
        return self.state

    async def after_miss(self, timeout_s: float = 1.0) -> RegistryState:
        """Produce validation met an id it does not know: on a follower of `_schemas`, wait (at most
        `timeout_s`) for this replica to replay more, since a registration answered by the leader
        reaches the followers' high watermark a fetch later."""
        part = self._partition()
        if part is None or part.is_leader:
            return await self.current()
        loop = asyncio.get_running_loop()
        start, deadline = self._next_offset, loop.time() + timeout_s
        while loop.time() < deadline:
            state = await self.current()
            if self._next_offset != start:
                return state
            await asyncio.sleep(0.02)
        return self.state

    def good_value_prefixes(self, state: RegistryState) -> dict[tuple[str, str], set[bytes]]:
        """Produce validation's memory, per (topic, subject name strategy): value framings (magic
        byte and id) found good, kept until the state changes."""
        if self._prefixes_at != (id(state), self._next_offset):
            self._prefixes = {}
            self._prefixes_at = (id(state), self._next_offset)
        return self._prefixes

    def leader_id(self) -> int:
        cache = self.broker.metadata_cache
        info = cache.topic(SCHEMAS_TOPIC)
        meta = info.partition(0) if info is not None else None
        return meta.leader if meta is not None else -1

    # -- primary -------------------------------------------------------------------------------------
    def on_leadership_change(self, change: LeadershipChange) -> None:
        """Leading `_schemas` now: announce this broker's HTTP URL so the others forward writes."""
        if any(p.topic == SCHEMAS_TOPIC for p in change.became_leader):
            self._schedule_announce()

    def listener_bound(self, broker_id: int, url: str) -> None:
        """The HTTP listener serves at `url` now (kafkalite.web); announce it if we lead `_schemas`."""
        self.broker_id, self.http_url = broker_id, url
        self._schedule_announce()

    def _schedule_announce(self) -> None:
        task = asyncio.get_running_loop().create_task(self._announce())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _announce(self) -> None:
        part = self._partition()
        url = self.http_url
        if not self.broker.cluster_mode or part is None or not part.is_leader or url is None:
            return  # (a single node has no one to forward writes)
        if self._announced_epoch == part.leader_epoch:
            return
        epoch = part.leader_epoch
        try:
            await self.write(lambda s: (None, [s.announce(self.broker_id, url)]))
            self._announced_epoch = epoch
        except Exception as exc:  # the next write or leadership change tries again
            log.info("announcing the schema registry primary: %s", exc)

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    # -- writes --------------------------------------------------------------------------------------
    async def _ensure_topic(self) -> Partition:
        part = self._partition()
        if part is not None:
            if not part.is_leader:
                raise NotPrimary(self.leader_id())
            return part
        broker = self.broker
        configs = {"cleanup.policy": "compact"}
        info = await asyncio.to_thread(broker.metadata_store.get, SCHEMAS_TOPIC)
        if info is None:
            if broker.cluster_mode:
                alive = len(broker.metadata_cache.alive_brokers())
                rf = max(1, min(3, alive))
                configs["min.insync.replicas"] = str(max(1, rf - 1))
                try:
                    await asyncio.to_thread(
                        broker.metadata_store.create_topic,
                        SCHEMAS_TOPIC, 1, configs, replication_factor=rf,
                    )  # fmt: skip
                    log.info("created %s (RF %d)", SCHEMAS_TOPIC, rf)
                except Exception as exc:  # another broker was first
                    log.info("creating %s: %s", SCHEMAS_TOPIC, exc)
            else:
                broker.create_topic(SCHEMAS_TOPIC, 1, configs)
        for _ in range(100):
            part = self._partition()
            if part is not None and part.is_leader:
                return part
            if part is not None or self.leader_id() >= 0:
                raise NotPrimary(self.leader_id())
            await asyncio.sleep(0.05)
        raise operation_timeout(f"{SCHEMAS_TOPIC} has no leader yet")

    async def _append(self, records: list[Record]) -> None:
        builder = RecordBatchBuilder()
        for key, value in records:
            builder.append(key, value)
        appended = self.broker.replica_manager.append_records(
            [(SCHEMAS_TOPIC, (AppendEntry(0, builder.build()),))],
            -1,
            int(self.broker.config.get("offsets.commit.timeout.ms", 5000) or 5000),
            AppendOrigin.COORDINATOR,
        )
        result = appended.results[0][0]
        if not result.error_code and appended.delayed is not None:
            await appended.delayed.complete()
        code = ErrorCode(result.error_code)
        if code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
            raise NotPrimary(self.leader_id())
        if code == ErrorCode.REQUEST_TIMED_OUT:
            raise operation_timeout(f"writing to {SCHEMAS_TOPIC}: {code.name}")
        if code:
            raise store_error(f"writing to {SCHEMAS_TOPIC}: {code.name}")

    async def write(self, operation: Callable[[RegistryState], tuple[_T, list[Record]]]) -> _T:
        """Run `operation` on the leader's current state and write its records; the answer once
        they are committed and replayed. NotPrimary on a broker that does not lead `_schemas`."""
        async with self._write_lock:
            part = await self._ensure_topic()
            state = await self.current()
            answer, records = operation(state)
            if (
                records
                and self.broker.cluster_mode
                and self.http_url is not None
                and self._announced_epoch != part.leader_epoch
                and state.primary != (self.broker_id, self.http_url)
            ):
                records = [*records, state.announce(self.broker_id, self.http_url)]
                self._announced_epoch = part.leader_epoch
            if records:
                try:
                    await self._append(records)
                finally:
                    await self.current()
            return answer
