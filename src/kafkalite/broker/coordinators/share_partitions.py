"""SharePartitionManager: the share-partition leader side of KIP-932 — share sessions, SharePartitions
loaded from the share coordinator, acquisition from the log, acknowledgements persisted before they are
answered (one write at a time per share-partition, later changes ride the next), lock expiry, and the
dead-letter topic written before a record is archived.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import logging
import os
import uuid
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from kafkalite.broker.config.broker_config import BrokerConfig
from kafkalite.broker.config.group_configs import GroupConfigManager
from kafkalite.broker.coordinators.dead_letters import DeadLetterHost, write_dead_letters
from kafkalite.broker.coordinators.share_persister import PersisterStateBatch, SharePersister
from kafkalite.broker.coordinators.share_reads import RecordsRegion, batch_spans, header_spans
from kafkalite.broker.coordinators.share_sessions import ShareSession, ShareSessionCache, now_ms
from kafkalite.cluster.channel import ChannelManager
from kafkalite.cluster.delayed_operations import DelayedOperations
from kafkalite.cluster.partition import Partition
from kafkalite.coordinator.share_partition import (
    AckBatch,
    AcquiredRange,
    DeadLetter,
    SharePartition,
    SharePartitionConfig,
    StateBatch,
)
from kafkalite.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkalite.broker.coordinators.groups import ShareSettings

log = logging.getLogger("kafkalite.broker.share")
E = ErrorCode

_TICK_S = 0.1
_DLQ_ATTEMPTS = 5  # ~6 s of retries before a dead letter is given up
_READ_CHUNK = 1024 * 1024
# a share session no request used for this long belonged to a client that died (the member's own
# session, group.share.max.session.timeout.ms, is at most a minute): forget it
_SESSION_IDLE_MS = 5 * 60 * 1000
_SESSION_CHECK_MS = 10 * 1000
_READ_MIN = 64 * 1024
_READ_MAX = 8 * 1024 * 1024
# a read this big is scanned by its batch headers, not read whole
_HEADER_WALK_MIN_BYTES = 256 * 1024


Key = tuple[str, uuid.UUID, int]  # group id, topic id, partition


@dataclass(slots=True)
class LoadedSharePartition:
    """A SharePartition this broker leads, with what its persistence needs."""

    key: Key
    topic: str
    sp: SharePartition
    leader_epoch: int
    version: int = 0  # bumped by every change to persist
    persisted: int = 0
    writing: bool = False
    dead_letters: list[DeadLetter] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    last_error: ErrorCode = E.NO_ERROR
    bytes_per_record: float = 1024.0  # seen in this partition's batches, sizes the next read


@dataclass(frozen=True, slots=True)
class Acquired:
    records: bytes  # the batches holding `ranges`, unless `region` says where they lie in the log
    ranges: list[AcquiredRange]
    region: RecordsRegion | None = None

    @property
    def size(self) -> int:
        return self.region.length if self.region is not None else len(self.records)


class SharePartitionHost(DeadLetterHost, Protocol):
    """What the share-partition leader side reads of the broker (BrokerServer is one), beside what
    dead letters need: the static and group configs, the delayed operations a change wakes, and the
    persister of share-partition state."""

    @property
    def config(self) -> BrokerConfig: ...

    @property
    def group_configs(self) -> GroupConfigManager: ...

    @property
    def delayed(self) -> DelayedOperations: ...

    @property
    def share_persister(self) -> SharePersister: ...


class SharePartitionManager:
    """Every share-partition of the topic partitions this broker leads, and the share sessions."""

    def __init__(self, broker: SharePartitionHost) -> None:
        self.broker = broker
        self.sessions = ShareSessionCache()
        self.partitions: dict[Key, LoadedSharePartition] = {}
        self.persister: SharePersister = broker.share_persister
        self._loading: dict[Key, asyncio.Future[LoadedSharePartition | ErrorCode]] = {}
        self._ticker: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[ErrorCode]] = set()  # persists under way
        self.channels: ChannelManager | None = None  # to dead-letter partitions led elsewhere
        # share fetches waiting for records, per share-partition (ShareFetch lets them go first)
        self.parked: dict[Key, int] = {}
        self._next_session_check = 0

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> None:
        if self._ticker is None:
            self._ticker = asyncio.get_running_loop().create_task(self._tick_loop())

    async def stop(self) -> None:
        tasks: list[asyncio.Task[object]] = [*self._tasks]
        if self._ticker is not None:
            tasks.append(self._ticker)
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        self._ticker = None
        self._tasks.clear()
        if self.channels is not None:
            await self.channels.close_all()
            self.channels = None

    def _spawn(self, coro: Coroutine[object, object, ErrorCode]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _tick_loop(self) -> None:
        while True:
            await asyncio.sleep(_TICK_S)
            try:
                self.tick(now_ms())
            except Exception:
                log.exception("share-partition lock expiry failed")

    def tick(self, now: int) -> None:
        """Release expired acquisition locks; drop share-partitions whose leadership moved and share
        sessions idle for longer than a member's session could be."""
        if now >= self._next_session_check:
            self._next_session_check = now + _SESSION_CHECK_MS
            for session in self.sessions.expire(now, _SESSION_IDLE_MS):
                log.info(
                    "share session of member %s of group %s expired (idle %d s)",
                    session.member_id, session.group_id, _SESSION_IDLE_MS // 1000,
                )  # fmt: skip
        for key, lp in list(self.partitions.items()):
            part = self.broker.replica_manager.get_partition(lp.topic, key[2])
            if part is None or not part.is_leader or part.leader_epoch != lp.leader_epoch:
                if not lp.writing:
                    self.partitions.pop(key, None)
                continue
            deadline = lp.sp.next_lock_deadline()
            if deadline is not None and deadline <= now and lp.sp.release_expired(now):
                self._changed(lp)
                self._spawn(self.persist(lp))

    # -- configuration -----------------------------------------------------------------------------
    def _settings(self, group_id: str) -> ShareSettings:
        from kafkalite.broker.coordinators import groups as _groups

        return _groups.share_partition_settings(
            self.broker.config, self.broker.group_configs, group_id
        )

    def config_of(self, group_id: str) -> SharePartitionConfig:

        sc = self._settings(group_id)
        return SharePartitionConfig(
            lock_duration_ms=sc.record_lock_duration_ms,
            delivery_count_limit=sc.delivery_count_limit,
            max_in_flight=sc.max_record_locks,
        )

    # -- loading -----------------------------------------------------------------------------------
    async def get(
        self, group_id: str, topic_id: uuid.UUID, topic: str, part: Partition
    ) -> LoadedSharePartition | ErrorCode:
        """The loaded share-partition (read from the share coordinator on first use or after a
        leadership change), or the error to answer."""
        key = (group_id, topic_id, part.partition)
        lp = self.partitions.get(key)
        if lp is not None and lp.leader_epoch == part.leader_epoch:
            lp.sp.config = self.config_of(group_id)
            return lp
        pending = self._loading.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        fut: asyncio.Future[LoadedSharePartition | ErrorCode] = (
            asyncio.get_running_loop().create_future()
        )
        self._loading[key] = fut
        try:
            result = await self._load(key, topic, part)
        except Exception:
            log.exception(
                "loading share-partition %s %s-%d failed", group_id, topic, part.partition
            )
            result = E.UNKNOWN_SERVER_ERROR
        finally:
            self._loading.pop(key, None)
        fut.set_result(result)
        return result

    async def _load(
        self, key: Key, topic: str, part: Partition
    ) -> LoadedSharePartition | ErrorCode:
        group_id, topic_id, partition = key
        epoch = part.leader_epoch
        st = await self.persister.read(group_id, topic_id, partition, epoch)
        if st.error != E.NO_ERROR:
            log.info(
                "share-partition %s %s-%d: state read failed: %s %s",
                group_id, topic, partition, st.error.name, st.message or "",
            )  # fmt: skip
            return st.error
        if st.start_offset < 0:
            start = await self._initial_offset(group_id, part)
            code = await self.persister.initialize(group_id, topic_id, partition, 0, start)
            if code != E.NO_ERROR:
                return code
            sp = SharePartition(group_id, topic_id, partition, start_offset=start, state_epoch=0)
            log.info(
                "share-partition %s %s-%d initialized at offset %d",
                group_id, topic, partition, start,
            )  # fmt: skip
        else:
            sp = SharePartition(
                group_id,
                topic_id,
                partition,
                start_offset=st.start_offset,
                state_epoch=st.state_epoch,
                batches=[
                    StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                    for b in st.batches
                ],
            )
        sp.config = self.config_of(group_id)
        lp = LoadedSharePartition(key, topic, sp, epoch)
        self.partitions[key] = lp
        return lp

    async def _initial_offset(self, group_id: str, part: Partition) -> int:
        """share.auto.offset.reset: latest (default), earliest, or by_duration:<ISO-8601>."""

        policy = self._settings(group_id).auto_offset_reset
        if policy == "earliest":
            return int(part.log_start_offset)
        if policy.startswith("by_duration:"):
            ms = _iso_duration_ms(policy.split(":", 1)[1])
            if ms is not None:
                found = await asyncio.to_thread(part.offset_for_timestamp, now_ms() - ms)
                if found is not None:
                    return int(found[0])
        return int(part.high_watermark)

    # -- changes and persistence -------------------------------------------------------------------
    def _changed(self, lp: LoadedSharePartition) -> None:
        lp.version += 1
        lp.dead_letters.extend(lp.sp.take_dead_letters())
        self.broker.delayed.notify((lp.topic, lp.key[2]))

    async def persist(self, lp: LoadedSharePartition) -> ErrorCode:
        """Wait until the state as of now is stored (dead letters first); one write at a time per
        share-partition, carrying every change made before it started."""
        wanted = lp.version
        while lp.persisted < wanted:
            if lp.writing:
                lp.changed.clear()
                await lp.changed.wait()
                continue
            lp.writing = True
            try:
                version = lp.version
                letters, lp.dead_letters = lp.dead_letters, []
                if letters:
                    await self._dead_letter(lp, letters)
                sp = lp.sp
                code = await self.persister.write(
                    lp.key[0],
                    lp.key[1],
                    lp.key[2],
                    sp.state_epoch,
                    lp.leader_epoch,
                    sp.start_offset,
                    [
                        PersisterStateBatch(
                            b.first_offset, b.last_offset, b.delivery_state, b.delivery_count
                        )
                        for b in sp.state_batches()
                    ],
                )
                lp.last_error = code
                if code != E.NO_ERROR:
                    log.warning(
                        "share-partition %s %s-%d: state write failed: %s",
                        lp.key[0], lp.topic, lp.key[2], code.name,
                    )  # fmt: skip
                    self.partitions.pop(lp.key, None)  # reload from the stored state
                    lp.persisted = lp.version
                    return code
                lp.persisted = version
            finally:
                lp.writing = False
                lp.changed.set()
        return lp.last_error if lp.persisted >= wanted else E.NO_ERROR

    # -- dead letters ------------------------------------------------------------------------------
    def _dead_letter_channels(self) -> ChannelManager:
        """Channels to dead-letter partitions led elsewhere, opened on first need."""
        if self.channels is None:
            self.channels = self.broker.inter_broker.channels("dead-letters")
        return self.channels

    async def _dead_letter(self, lp: LoadedSharePartition, letters: Sequence[DeadLetter]) -> None:

        topic = self._settings(lp.key[0]).dlq_topic
        for letter in letters:
            log.info(
                "share group %s: %s-%d offset %d archived (%s, delivery count %d)%s",
                lp.key[0], lp.topic, lp.key[2], letter.offset, letter.reason,
                letter.delivery_count, f" -> dead-letter topic {topic}" if topic else "",
            )  # fmt: skip
        if not topic:
            return
        for attempt in range(_DLQ_ATTEMPTS):
            try:
                await write_dead_letters(
                    self.broker,
                    self._dead_letter_channels,
                    topic,
                    lp.key[0],
                    lp.topic,
                    lp.key[2],
                    letters,
                )
                return
            except Exception as exc:
                if attempt + 1 < _DLQ_ATTEMPTS:
                    await asyncio.sleep(0.2 * 2**attempt)
                    continue
                log.error(
                    "share group %s: writing %d record(s) of %s-%d to dead-letter topic %s "
                    "failed, they are archived without it: %s",
                    lp.key[0], len(letters), lp.topic, lp.key[2], topic, exc,
                )  # fmt: skip

    # -- fetch and acknowledge ---------------------------------------------------------------------
    def _limit(self, lp: LoadedSharePartition, part: Partition) -> tuple[int, bool]:
        """How far share consumers may read: the high watermark, or with share.isolation.level
        read_committed the last stable offset; and whether it is read_committed."""

        level = self._settings(lp.key[0]).isolation_level
        if level == "read_committed":
            return int(part.last_stable_offset), True
        return int(part.high_watermark), False

    def acquirable(self, lp: LoadedSharePartition, part: Partition) -> bool:
        """Whether an acquisition could find something now: a released record, or new records
        while the in-flight limit allows more."""
        sp = lp.sp
        offset = sp.next_fetch_offset()
        if offset < sp.end_offset:
            return True
        limit, _ = self._limit(lp, part)
        return offset < limit and sp.in_flight_count() < sp.config.max_in_flight

    async def acquire(
        self, lp: LoadedSharePartition, part: Partition, member_id: str, max_records: int,
        max_bytes: int, batch_optimized: bool = True,
    ) -> Acquired | ErrorCode:  # fmt: skip
        """Acquire up to `max_records` records for `member_id`. `batch_optimized` (ShareAcquireMode
        0, and every ShareFetch before v2) makes it a soft limit as in Kafka (KIP-1206): the last
        batch begun is acquired to its end, so no batch is sent again for its rest; otherwise
        (RECORD_LIMIT) it is strict. The in-flight limit (max.record.locks) gates new records:
        none are taken once it is reached, but, as in Kafka, a batch begun below it is finished
        past it in batch-optimized mode."""
        sp = lp.sp
        if sp.start_offset < part.log_start_offset:
            # retention (or DeleteRecords) removed records the group never finished
            sp.truncate_before(part.log_start_offset)
            self._changed(lp)
        offset = sp.next_fetch_offset()
        limit, committed = self._limit(lp, part)
        if offset >= limit or max_records <= 0:
            return Acquired(b"", [])
        try:
            # on the loop, as the classic fetch reads: an index lookup and a file region, whose
            # bytes one pread takes below (a hop to a thread cost more than the read)
            info = part.read(
                offset,
                _read_size(lp, max_records, max_bytes),
                max_offset=limit,
                min_one_message=True,
            )
        except Exception as exc:
            code = getattr(exc, "error_code", None)
            if code is None:
                log.exception("share fetch read of %s-%d at %d failed", lp.topic, lp.key[2], offset)
                return E.KAFKA_STORAGE_ERROR
            return ErrorCode(code)
        region = info.slice
        if region is None or region.length == 0:
            return Acquired(b"", [])
        aborted = (
            [
                (a.producer_id, a.first_offset)
                for a in part.collect_aborted_transactions(offset, limit)
            ]
            if committed
            else []
        )
        found = None
        if region.length >= _HEADER_WALK_MIN_BYTES:  # big batches: their headers only
            found = header_spans(region.fileno, region.position, region.length, aborted)
        if found is not None:
            blob = b""
            whole = True
            spans, read_end = found
            scanned = spans[-1][3] if spans else 0
        else:
            blob = os.pread(region.fileno, region.length, region.position)
            whole = len(blob) == region.length
            if not whole:  # a short read: FileSlice.read_bytes reads on, and its bytes are sent
                blob = bytes(region.read_bytes())
            spans, read_end = batch_spans(blob, aborted)
            scanned = len(blob)
        if spans and read_end > offset:
            lp.bytes_per_record = max(scanned / (read_end - offset), 16.0)
        bounds = [(b, last) for b, last, _, _ in spans]
        now = now_ms()
        ranges = sp.acquire(member_id, bounds, max_records, now)
        if batch_optimized and ranges:
            ranges = _to_batch_end(sp, member_id, bounds, ranges, now)
        if read_end > sp.end_offset and (not spans or sp.end_offset > spans[-1][1]):
            sp.skip_to(read_end)  # markers or aborted records at the end: nothing to deliver
            self._changed(lp)
        if not ranges:
            return Acquired(b"", [])
        first, last = ranges[0].first_offset, ranges[-1].last_offset
        used = [(s, e) for b, lo, s, e in spans if lo >= first and b <= last]
        if not used:
            return Acquired(b"", ranges)
        start, end = used[0][0], used[-1][1]
        if whole:  # sent from the log, not copied through this process again
            return Acquired(
                b"", ranges, RecordsRegion(region, region.position + start, end - start)
            )
        return Acquired(blob[start:end], ranges)

    async def acknowledge(
        self, lp: LoadedSharePartition, member_id: str, batches: Sequence[AckBatch]
    ) -> tuple[ErrorCode, str | None]:
        result = lp.sp.acknowledge(member_id, batches, now_ms())
        if result.error != E.NO_ERROR:
            return result.error, result.message
        self._changed(lp)
        code = await self.persist(lp)
        return code, None if code == E.NO_ERROR else f"state write failed: {code.name}"

    async def release_session(self, session: ShareSession) -> None:
        """The member's session closed: its acquired records go back to the others."""
        waits = []
        for lp in list(self.partitions.values()):
            if lp.key[0] != session.group_id:
                continue
            if lp.sp.release_member(session.member_id):
                self._changed(lp)
                waits.append(self.persist(lp))
        for w in waits:
            await w


def _to_batch_end(
    sp: SharePartition,
    member_id: str,
    bounds: Sequence[tuple[int, int]],
    ranges: list[AcquiredRange],
    now: int,
) -> list[AcquiredRange]:
    """`ranges` with the rest of the batch their last offset falls in acquired too (what of it is
    available, past the in-flight limit if need be), merged into them."""
    end = ranges[-1].last_offset
    i = bisect.bisect_right(bounds, end, key=lambda b: b[0]) - 1
    if i < 0 or bounds[i][1] <= end:
        return ranges
    last = bounds[i][1]
    more = sp.acquire(member_id, [(end + 1, last)], last - end, now, finish_batch=True)
    out = list(ranges)
    for r in more:
        tail = out[-1]
        if tail.last_offset + 1 == r.first_offset and tail.delivery_count == r.delivery_count:
            out[-1] = AcquiredRange(tail.first_offset, r.last_offset, r.delivery_count)
        else:
            out.append(r)
    return out


def _read_size(lp: LoadedSharePartition, max_records: int, max_bytes: int) -> int:
    """Bytes to read for one acquisition: about what `max_records` records take in this partition
    (a quarter more for released records and holes), not the client's whole fetch size, of which
    only `max_records` records could be acquired anyway."""
    want = int(lp.bytes_per_record * max_records * 1.25) + 4096
    return max(1, min(max_bytes, max(want, _READ_MIN), _READ_MAX))


def _iso_duration_ms(text: str) -> int | None:
    """PnDTnHnMnS (the subset share.auto.offset.reset's by_duration takes) in milliseconds."""
    import re

    m = re.fullmatch(
        r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?", text.strip().upper()
    )
    if m is None:
        return None
    d, h, mi, s = m.groups()
    total = int(d or 0) * 86400 + int(h or 0) * 3600 + int(mi or 0) * 60 + float(s or 0)
    return int(total * 1000)
