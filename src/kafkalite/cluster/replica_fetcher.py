"""Follower replication: ReplicaFetcher copies a leader's batches byte for byte with Fetch (replica id =
this broker), after truncating to the divergence point found with OffsetForLeaderEpoch (KIP-101/279).

ReplicaFetcherManager keeps one fetcher per (leader, fetcher id) for `num.replica.fetchers`; the
per-partition decisions (truncation offset, out-of-range handling) are plain functions, tested alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from kafkalite.cluster.partition import Partition
from kafkalite.cluster.replica_manager import ReplicaManager
from kafkalite.cluster.replication_quota import ReplicationQuota, follower_throttled
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.exceptions import DecodeError
from kafkalite.protocol.messages.fetch import FetchRequest
from kafkalite.protocol.messages.offsets import (
    ListOffsetsRequest,
    OffsetForLeaderEpochRequest,
)
from kafkalite.records.header import LOG_OVERHEAD, batch_size_at, crc_valid, parse_batch_header

log = logging.getLogger("kafkalite.cluster.replica_fetcher")

TopicPartition = tuple[str, int]
FETCH_VERSION = 12  # flexible, topic names, last_fetched_epoch; no topic ids needed
OFFSET_FOR_LEADER_EPOCH_VERSION = 3  # replica_id
LIST_OFFSETS_VERSION = 4  # current_leader_epoch
UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1

# errors after which the partition waits for the controller's next LeaderAndIsr
_WAIT_FOR_METADATA = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.UNKNOWN_TOPIC_ID,
        ErrorCode.KAFKA_STORAGE_ERROR,
    }
)


class RequestSender(Protocol):
    """What a fetcher needs of the broker-to-broker channel."""

    async def send(self, request: Any, version: int | None = None) -> Any: ...


@dataclass(frozen=True)
class FetcherConfig:
    """Kafka's replica.* settings for followers."""

    fetch_max_bytes: int = 1024 * 1024  # replica.fetch.max.bytes (per partition)
    response_max_bytes: int = 10 * 1024 * 1024  # replica.fetch.response.max.bytes
    fetch_wait_max_ms: int = 500  # replica.fetch.wait.max.ms
    fetch_min_bytes: int = 1  # replica.fetch.min.bytes
    backoff_ms: int = 1000  # replica.fetch.backoff.ms
    num_fetchers: int = 1  # num.replica.fetchers


class PartitionFetchState:
    """Where a follower is in copying one partition."""

    __slots__ = ("delayed_until", "fetch_offset", "in_sync", "leader_epoch", "truncating")

    def __init__(self, fetch_offset: int, leader_epoch: int) -> None:
        self.fetch_offset = fetch_offset
        self.leader_epoch = leader_epoch
        self.truncating = True
        self.delayed_until = 0.0
        # caught up with the leader's high watermark at the last fetch (Kafka's isReplicaInSync):
        # a replication throttle never holds such a partition back
        self.in_sync = False

    def delay(self, seconds: float) -> None:
        self.delayed_until = time.monotonic() + seconds

    @property
    def ready(self) -> bool:
        return self.delayed_until <= time.monotonic()


# -- pure decisions -------------------------------------------------------------------------------
def truncation_offset(
    local_leo: int,
    local_high_watermark: int,
    requested_epoch: int,
    leader_epoch: int,
    leader_end_offset: int,
    local_end_offset_for: Callable[[int], tuple[int, int]],
) -> int:
    """The offset a follower truncates to from the leader's OffsetForLeaderEpoch answer (KIP-279).

    - The leader knows nothing of our epoch (UNDEFINED): keep what is committed, truncate to the HW.
    - The leader answers with our epoch: its end offset for it, capped at our log end.
    - The leader answers with an older epoch (ours was never its): take our own end offset for that
      epoch too, and the smaller of the two — the divergence point."""
    if leader_epoch == UNDEFINED_EPOCH or leader_end_offset == UNDEFINED_OFFSET:
        return min(local_high_watermark, local_leo)
    if leader_epoch == requested_epoch:
        return min(leader_end_offset, local_leo)
    our_epoch, our_end = local_end_offset_for(leader_epoch)
    if our_epoch == UNDEFINED_EPOCH:
        return min(local_high_watermark, local_leo)
    return min(leader_end_offset, our_end, local_leo)


def whole_batches(records: bytes | bytearray | memoryview) -> bytes | bytearray:
    """The complete batches at the start of `records` (a fetch may end with a partial batch), each
    checked (framing and CRC-32C) as a follower append must be; DecodeError on a damaged one. When
    every batch is whole (the usual response) the fetched buffer itself is answered, not a copy:
    the follower's append writes it as it is."""
    end = 0
    n = len(records)
    while end < n:
        if n - end < LOG_OVERHEAD or end + batch_size_at(records, end) > n:
            break  # a partial batch at the end of the response
        h = parse_batch_header(records, end)
        if not crc_valid(records, end, h):
            raise DecodeError(f"CRC-32C mismatch in the batch at offset {h.base_offset}")
        end += h.size
    if end == n and isinstance(records, (bytes, bytearray)):
        return records
    return bytes(records[:end])


class ReplicaFetcher:
    """Copies the partitions that follow one leader, in one loop (one of `num.replica.fetchers`)."""

    def __init__(
        self,
        local_broker_id: int,
        leader_id: int,
        fetcher_id: int,
        channel: Callable[[], RequestSender | None],
        replica_manager: ReplicaManager,
        config: FetcherConfig,
        quota: ReplicationQuota | None = None,
    ) -> None:
        self.local_broker_id = local_broker_id
        self.leader_id = leader_id
        self.fetcher_id = fetcher_id
        self._channel = channel
        self.rm = replica_manager
        self.config = config
        self.quota = quota  # follower.replication.throttled.rate of this broker
        self._idle_s: float | None = None  # set when throttled partitions alone wait: how long
        self.states: dict[TopicPartition, PartitionFetchState] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.name = f"ReplicaFetcher-{local_broker_id}-{fetcher_id}-from-{leader_id}"

    # -- membership ----------------------------------------------------------------------------------
    def add_partitions(self, parts: list[Partition]) -> None:
        for p in parts:
            self.states[p.key] = PartitionFetchState(p.log_end_offset, p.leader_epoch)
        self._wake.set()

    def remove_partitions(self, keys: list[TopicPartition]) -> None:
        for k in keys:
            self.states.pop(k, None)

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=self.name)

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    # -- the loop --------------------------------------------------------------------------------------
    async def _run(self) -> None:
        while True:
            self._wake.clear()
            try:
                did = await self._do_work()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("%s: %s; retrying in %d ms", self.name, exc, self.config.backoff_ms)
                did = False
                await asyncio.sleep(self.config.backoff_ms / 1000)
            if not did:
                idle, self._idle_s = self._idle_s, None
                wait = self.config.backoff_ms / 1000 if idle is None else idle
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), wait)

    async def _do_work(self) -> bool:
        """One round: truncate what needs it, then one Fetch. False when there was nothing to do."""
        self._drop_moved()
        if not self.states:
            return False
        channel = self._channel()
        if channel is None:
            raise ConnectionError(f"no channel to leader {self.leader_id}")
        truncating = [k for k, s in self.states.items() if s.truncating and s.ready]
        if truncating:
            await self._truncate(channel, truncating)
        ready = {k: s for k, s in self.states.items() if not s.truncating and s.ready}
        fetching = self._unthrottled(ready)
        if not fetching:
            if ready and self.quota is not None and not truncating:
                # only throttled partitions are ready: wait until the quota lets them through
                wait_ms = self.quota.throttle_ms(_now_ms())
                self._idle_s = min(max(wait_ms, 10), self.quota.window_ms) / 1000
            return bool(truncating)
        await self._fetch(channel, fetching)
        return True

    def _throttled(self, key: TopicPartition) -> bool:
        p = self.rm.get_partition(*key)
        return p is not None and follower_throttled(p.config, key[1], self.local_broker_id)

    def _unthrottled(
        self, ready: dict[TopicPartition, PartitionFetchState]
    ) -> dict[TopicPartition, PartitionFetchState]:
        """Leave out of the next fetch the throttled partitions that have not caught up while
        follower.replication.throttled.rate is exceeded (Kafka's shouldFollowerThrottle)."""
        quota = self.quota
        if quota is None or not quota.enabled or not ready:
            return ready
        now = _now_ms()
        if not quota.is_exceeded(now):
            return ready
        return {k: s for k, s in ready.items() if s.in_sync or not self._throttled(k)}

    def _drop_moved(self) -> None:
        """Partitions this broker now leads, or follows from another leader, leave this fetcher."""
        for key in list(self.states):
            p = self.rm.get_partition(*key)
            if p is None or p.is_leader or p.leader_id != self.leader_id:
                del self.states[key]

    # -- truncation (KIP-101 / KIP-279) --------------------------------------------------------------------
    async def _truncate(self, channel: RequestSender, keys: list[TopicPartition]) -> None:
        by_topic: dict[str, list[Any]] = {}
        asked: dict[TopicPartition, int] = {}
        for key in keys:
            p = self.rm.get_partition(*key)
            st = self.states[key]
            if p is None:
                continue
            epoch = p.latest_epoch
            if epoch == UNDEFINED_EPOCH:
                # nothing was ever written here under an epoch: start at our log end
                self._finish_truncation(key, p, p.log_end_offset)
                continue
            asked[key] = epoch
            by_topic.setdefault(key[0], []).append(
                OffsetForLeaderEpochRequest.OffsetForLeaderTopic.OffsetForLeaderPartition(
                    partition=key[1], current_leader_epoch=st.leader_epoch, leader_epoch=epoch
                )
            )
        if not by_topic:
            return
        req = OffsetForLeaderEpochRequest(
            replica_id=self.local_broker_id,
            topics=[
                OffsetForLeaderEpochRequest.OffsetForLeaderTopic(topic=t, partitions=ps)
                for t, ps in by_topic.items()
            ],
        )
        resp = await channel.send(req, OFFSET_FOR_LEADER_EPOCH_VERSION)
        for t in resp.topics:
            for r in t.partitions:
                key = (t.topic, r.partition)
                state = self.states.get(key)
                p = self.rm.get_partition(*key)
                if state is None or p is None or key not in asked:
                    continue
                code = ErrorCode(r.error_code)
                if code != ErrorCode.NO_ERROR:
                    self._on_partition_error(key, state, code)
                    continue
                target = truncation_offset(
                    p.log_end_offset,
                    p.high_watermark,
                    asked[key],
                    r.leader_epoch,
                    r.end_offset,
                    p.end_offset_for_epoch,
                )
                self._finish_truncation(key, p, target)

    def _finish_truncation(self, key: TopicPartition, p: Partition, target: int) -> None:
        if target < p.log_end_offset:
            log.info(
                "%s-%d: truncating from %d to %d (divergence from leader %d at epoch %d)",
                key[0], key[1], p.log_end_offset, target, self.leader_id, p.leader_epoch,
            )  # fmt: skip
            p.truncate_to(target)
        st = self.states[key]
        st.truncating = False
        st.fetch_offset = p.log_end_offset

    # -- fetching ---------------------------------------------------------------------------------------
    async def _fetch(
        self, channel: RequestSender, fetching: dict[TopicPartition, PartitionFetchState]
    ) -> None:
        cfg = self.config
        T = FetchRequest.FetchTopic
        P = T.FetchPartition
        by_topic: dict[str, list[Any]] = {}
        allowance = self.quota.window_allowance() if self.quota is not None else None
        for (topic, part), st in fetching.items():
            p = self.rm.get_partition(topic, part)
            last_epoch = p.latest_epoch if p is not None else -1
            max_bytes = cfg.fetch_max_bytes
            if allowance is not None and not st.in_sync and self._throttled((topic, part)):
                max_bytes = min(max_bytes, allowance)  # a throttled copy asks one window at most
            by_topic.setdefault(topic, []).append(
                P(
                    partition=part,
                    current_leader_epoch=st.leader_epoch,
                    fetch_offset=st.fetch_offset,
                    last_fetched_epoch=last_epoch,
                    # the leader only sends consumers here if we hold their offset (KIP-392)
                    log_start_offset=p.log_start_offset if p is not None else -1,
                    partition_max_bytes=max_bytes,
                )
            )
        req = FetchRequest(
            replica_id=self.local_broker_id,
            max_wait_ms=cfg.fetch_wait_max_ms,
            min_bytes=cfg.fetch_min_bytes,
            max_bytes=cfg.response_max_bytes,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=[T(topic=t, partitions=ps) for t, ps in by_topic.items()],
            forgotten_topics_data=[],
            rack_id="",
        )
        resp = await channel.send(req, FETCH_VERSION)
        if resp.error_code:
            raise ConnectionError(
                f"fetch from {self.leader_id}: {ErrorCode.name_of(resp.error_code)}"
            )
        appended: list[Partition] = []
        for t in resp.responses:
            for r in t.partitions:
                key = (t.topic, r.partition_index)
                found = self.states.get(key)
                p = self.rm.get_partition(*key)
                if found is None or p is None or p.is_leader or found.truncating:
                    continue
                st = found
                code = ErrorCode(r.error_code)
                if code == ErrorCode.NO_ERROR:
                    try:
                        self._append(key, p, st, r)
                        appended.append(p)
                    except DecodeError as exc:
                        log.error(
                            "%s-%d: leader %d sent a damaged batch (%s); fetching it again",
                            key[0], key[1], self.leader_id, exc,
                        )  # fmt: skip
                        st.delay(self.config.backoff_ms / 1000)
                elif code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    await self._out_of_range(channel, key, p, st)
                else:
                    self._on_partition_error(key, st, code)
        # flush.messages holds on a follower too, as Kafka's append does: the next fetch, which
        # tells the leader how far this replica is (and so lets it acknowledge), waits for the sync
        due = [p for p in appended if p.needs_flush]
        if due:
            await asyncio.to_thread(_flush_each, due)

    def _append(self, key: TopicPartition, p: Partition, st: PartitionFetchState, r: Any) -> None:
        records = r.records
        data = whole_batches(records) if records else b""
        if data and p.log_end_offset != st.fetch_offset:
            st.truncating = True  # our log moved under us (a truncation raced): find our place
            return
        p.append_records_as_follower(data, r.high_watermark)
        st.fetch_offset = p.log_end_offset
        st.in_sync = r.high_watermark - st.fetch_offset <= 0
        quota = self.quota
        if data and quota is not None and self._throttled(key):
            quota.record(len(data), _now_ms())  # Kafka records every throttled partition's bytes

    async def _out_of_range(
        self, channel: RequestSender, key: TopicPartition, p: Partition, st: PartitionFetchState
    ) -> None:
        """Our fetch offset is outside the leader's log: below its start (we were away through
        retention) → restart at its start; above its end (it lost an unclean election's tail) →
        truncate to its end."""
        leader_end = await self._leader_offset(channel, key, st, -1)
        if leader_end is not None and p.log_end_offset > leader_end:
            p.truncate_to(leader_end)
            st.fetch_offset = p.log_end_offset
            return
        leader_start = await self._leader_offset(channel, key, st, -2)
        if leader_start is not None and st.fetch_offset < leader_start:
            log.warning(
                "%s-%d: fetch offset %d is below leader %d's log start %d; restarting there",
                key[0], key[1], st.fetch_offset, self.leader_id, leader_start,
            )  # fmt: skip
            p.truncate_fully_and_start_at(leader_start)
            st.fetch_offset = leader_start
            return
        st.delay(self.config.backoff_ms / 1000)

    async def _leader_offset(
        self, channel: RequestSender, key: TopicPartition, st: PartitionFetchState, ts: int
    ) -> int | None:
        T = ListOffsetsRequest.ListOffsetsTopic
        req = ListOffsetsRequest(
            replica_id=self.local_broker_id,
            isolation_level=0,
            topics=[
                T(
                    name=key[0],
                    partitions=[
                        T.ListOffsetsPartition(
                            partition_index=key[1],
                            current_leader_epoch=st.leader_epoch,
                            timestamp=ts,
                        )
                    ],
                )
            ],
        )
        resp = await channel.send(req, LIST_OFFSETS_VERSION)
        for t in resp.topics:
            for r in t.partitions:
                if r.error_code == 0:
                    return int(r.offset)
        return None

    def _on_partition_error(
        self, key: TopicPartition, st: PartitionFetchState, code: ErrorCode
    ) -> None:
        if code in _WAIT_FOR_METADATA:
            log.info(
                "%s-%d: leader %d answered %s; waiting for new leadership",
                key[0], key[1], self.leader_id, code.name,
            )  # fmt: skip
        else:
            log.warning(
                "%s-%d: fetch from %d failed: %s", key[0], key[1], self.leader_id, code.name
            )
        st.delay(self.config.backoff_ms / 1000)


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


class ReplicaFetcherManager:
    """The follower side of replication on one broker: fetchers keyed by (leader, fetcher id)."""

    def __init__(
        self,
        local_broker_id: int,
        replica_manager: ReplicaManager,
        channel_for: Callable[[int], RequestSender | None],
        config: FetcherConfig,
        quota: ReplicationQuota | None = None,
    ) -> None:
        self.local_broker_id = local_broker_id
        self.rm = replica_manager
        self._channel_for = channel_for
        self.config = config
        self.quota = quota
        self.fetchers: dict[tuple[int, int], ReplicaFetcher] = {}

    def _fetcher_id(self, key: TopicPartition) -> int:
        return (hash(key[0]) * 31 + key[1]) % max(1, self.config.num_fetchers)

    def add_fetchers(self, parts: list[Partition]) -> None:
        """Start (or move) fetching for partitions this broker follows."""
        keys = [p.key for p in parts]
        self.remove_fetchers(keys)
        groups: dict[tuple[int, int], list[Partition]] = {}
        for p in parts:
            if p.leader_id < 0 or p.leader_id == self.local_broker_id:
                continue
            groups.setdefault((p.leader_id, self._fetcher_id(p.key)), []).append(p)
        for (leader, fid), ps in groups.items():
            f = self.fetchers.get((leader, fid))
            if f is None:
                f = self.fetchers[(leader, fid)] = ReplicaFetcher(
                    self.local_broker_id,
                    leader,
                    fid,
                    functools.partial(self._channel_for, leader),
                    self.rm,
                    self.config,
                    self.quota,
                )
                f.start()
            f.add_partitions(ps)

    def remove_fetchers(self, keys: list[TopicPartition]) -> None:
        for f in self.fetchers.values():
            f.remove_partitions(keys)

    async def shutdown_idle(self) -> None:
        for k, f in list(self.fetchers.items()):
            if not f.states:
                del self.fetchers[k]
                await f.stop()

    async def shutdown(self) -> None:
        fetchers, self.fetchers = list(self.fetchers.values()), {}
        for f in fetchers:
            await f.stop()

    def lag_of(self, key: TopicPartition) -> int | None:
        for f in self.fetchers.values():
            st = f.states.get(key)
            if st is not None:
                return st.fetch_offset
        return None


def _flush_each(partitions: list[Partition]) -> None:
    """fsync the logs of `partitions` (in a worker thread: the event loop does not wait on disks)."""
    for p in partitions:
        p.flush()
