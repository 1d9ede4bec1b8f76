"""RemoteLogManager (KIP-405): on the leader, every remote.log.manager.task.interval.ms, copies rolled
segments below the last stable offset to a storage.remote manager, cleans up copies a dead leader left
half-way, applies retention.ms / .bytes to the remote tier, and serves reads below the local log start.

Its metadata goes to `__remote_log_metadata` (write, then apply; replayed at start): storage.remote.metadata.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from kafkalite.cluster.append_records import AppendEntry, AppendOrigin
from kafkalite.cluster.partition import Partition
from kafkalite.cluster.remote_log_policy import (
    copy_candidates,
    metadata_partition,
    remote_retention_victims,
    topic_id_of,
)
from kafkalite.cluster.replica_manager import ReplicaManager
from kafkalite.protocol.errors import ErrorCode
from kafkalite.records import iter_batches
from kafkalite.records.builder import build_batch
from kafkalite.storage.remote.metadata import (
    RemoteLogMetadataCache,
    RemoteLogMetadataEvent,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    RemoteLogSegmentUpdate,
    RemoteLogStartOffsetUpdate,
    decode_event,
    encode_event,
)
from kafkalite.storage.remote.remote_read import (
    RemoteIndexCache,
    read_remote_batches,
    remote_offset_for_timestamp,
)
from kafkalite.storage.remote.segment_export import export_segment, segment_leader_epochs
from kafkalite.storage.remote.storage_manager import RemoteStorageError, RemoteStorageManager

log = logging.getLogger("kafkalite.cluster.remote_log_manager")

REMOTE_LOG_METADATA_TOPIC = "__remote_log_metadata"
_S = RemoteLogSegmentState
_READ_CHUNK = 4 * 1024 * 1024


class RemoteLogMetadataError(Exception):
    """A metadata record could not be written to `__remote_log_metadata`."""


class RemoteListOffsetsTimeout(Exception):
    """A ListOffsets by timestamp waited past remote.list.offsets.request.timeout.ms for the remote
    tier (KIP-1075: the partition answers REQUEST_TIMED_OUT)."""

    error_code = ErrorCode.REQUEST_TIMED_OUT


@dataclass(slots=True)
class RemoteLogManagerStats:
    """Kafka's names: RemoteCopyBytesPerSec, RemoteFetchBytesPerSec, ...Errors (as totals)."""

    remote_copy_bytes: int = 0
    remote_copy_requests: int = 0
    remote_copy_errors: int = 0
    remote_fetch_bytes: int = 0
    remote_fetch_requests: int = 0
    remote_fetch_errors: int = 0
    remote_delete_requests: int = 0
    remote_delete_errors: int = 0
    remote_fetch_expires: int = 0  # DelayedRemoteFetchMetrics ExpiresPerSec
    remote_list_offsets_expires: int = 0
    copy_lag: dict[tuple[str, int], int] = field(default_factory=dict)


_ReadResult = tuple[bytes, list[tuple[int, int]]]
_MAX_PENDING_READS = 64


class RemoteLogManager:
    """One per broker; runs on the event loop, the remote store's calls on worker threads."""

    def __init__(
        self,
        broker_id: int,
        replica_manager: ReplicaManager,
        rsm: RemoteStorageManager,
        *,
        task_interval_ms: int = 30000,
        metadata_partitions: int = 50,
        ensure_metadata_topic: Callable[[], None] | None = None,
        topic_exists: Callable[[str], bool] | None = None,
        clock: Callable[[], int] | None = None,
        remote_log_dir: str = "remote://",
        remote_fetch_max_wait_ms: int = 500,
        remote_list_offsets_timeout_ms: int = 30000,
    ) -> None:
        self.broker_id = broker_id
        # the remote store as DescribeLogDirs names it (Redpanda's "remote://<bucket>" convention)
        self.remote_log_dir = remote_log_dir
        self.remote_fetch_max_wait_ms = remote_fetch_max_wait_ms
        self.remote_list_offsets_timeout_ms = remote_list_offsets_timeout_ms
        self.rm = replica_manager
        self.rsm = rsm
        self.task_interval_ms = task_interval_ms
        self.metadata_partitions = metadata_partitions
        self._ensure_topic = ensure_metadata_topic
        self._topic_exists = topic_exists
        self.clock = clock or (lambda: int(time.time() * 1000))
        self.cache = RemoteLogMetadataCache()
        self.index_cache = RemoteIndexCache(rsm)
        self.stats = RemoteLogManagerStats()
        self._task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()  # one round at a time (the task and tests' run_once)
        self._background: set[asyncio.Task[None]] = set()
        self._positions: dict[int, int] = {}  # metadata partition -> next offset to apply
        # remote reads by (segment, offset, max bytes): one that outlived remote.fetch.max.wait.ms
        # goes on, and the client's next fetch at that offset takes its result
        self._reads: dict[tuple[uuid.UUID, int, int, bool], asyncio.Task[_ReadResult]] = {}

    # -- lifecycle --------------------------------------------------------------------------------
    async def start(self) -> None:
        """Create the metadata topic if needed, rebuild the metadata by replay, start the task."""
        if self._ensure_topic is not None:
            self._ensure_topic()
        await asyncio.to_thread(self._replay_all)
        for part in self.rm.partitions():
            self._publish_highest(part)
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        for t in [*self._background, *self._reads.values()]:
            t.cancel()
        self._reads.clear()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await asyncio.to_thread(self.rsm.close)

    def _replay_all(self) -> None:
        n = sum(self._catch_up(p) for p in range(self.metadata_partitions))
        log.info("remote log metadata: replayed %d event(s)", n)

    def _catch_up(self, p: int) -> int:
        """Apply the committed events of `__remote_log_metadata` partition `p` after the last one
        applied (the local replica, leader or follower, read up to its high watermark): the replay at
        start, this broker's own writes and, on a follower, the leader's all take this one path.
        Returns how many events were applied."""
        part = self.rm.get_partition(REMOTE_LOG_METADATA_TOPIC, p)
        if part is None:
            return 0
        offset = max(self._positions.get(p, 0), part.log_start_offset)
        end = part.high_watermark
        n = 0
        while offset < end:
            region = part.read(offset, _READ_CHUNK, max_offset=end).slice
            if region is None:
                break
            advanced = False
            for batch in iter_batches(region.read_bytes(), allow_truncated_tail=True):
                if batch.next_offset <= offset:
                    continue
                if batch.next_offset > end:
                    break
                advanced = True
                offset = batch.next_offset
                if batch.is_control:
                    continue
                for r in batch.records:
                    if r.value is None:
                        continue
                    try:
                        self.cache.replay(decode_event(r.value))
                        n += 1
                    except (ValueError, KeyError) as exc:
                        log.warning("skipped a %s record: %s", REMOTE_LOG_METADATA_TOPIC, exc)
            if not advanced:
                break
        self._positions[p] = offset
        return n

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.task_interval_ms / 1000)
            try:
                await self.run_once()
            except Exception:
                log.exception("remote log manager round failed")

    # -- metadata -----------------------------------------------------------------------------------
    async def _publish(self, event: RemoteLogMetadataEvent) -> None:
        """Write the event to its `__remote_log_metadata` partition and wait until it is committed,
        then apply the partition's events up to it (as the replay at start and followers do)."""
        key, value = encode_event(event)
        p = metadata_partition(event.topic_id, event.partition, self.metadata_partitions)
        appended = self.rm.append_records(
            [(REMOTE_LOG_METADATA_TOPIC, (AppendEntry(p, build_batch([(key, value)])),))],
            -1,
            30000,
            AppendOrigin.COORDINATOR,
        )
        result = appended.results[0][0]
        if not result.error_code and appended.delayed is not None:
            await appended.delayed.complete()
        if result.error_code:
            raise RemoteLogMetadataError(
                f"{REMOTE_LOG_METADATA_TOPIC}-{p}: error {result.error_code} writing the metadata "
                f"of {event.topic}-{event.partition}"
            )
        self._catch_up(p)

    async def _update(self, m: RemoteLogSegmentMetadata, state: RemoteLogSegmentState) -> None:
        event = RemoteLogSegmentUpdate(
            m.topic_id, m.topic, m.partition, m.segment_id, state, self.clock(), self.broker_id
        )
        await self._publish(event)

    def _publish_highest(self, part: Partition) -> None:
        """Tell the log what the remote tier holds (its local retention waits for it)."""
        part._log.highest_offset_in_remote_storage = self.cache.highest_copied_offset(
            part.topic, part.partition
        )

    # -- one round ----------------------------------------------------------------------------------
    async def run_once(self) -> None:
        """Copy, clean up and expire on every partition this broker leads with remote storage on;
        followers learn what the remote tier holds (for their local retention)."""
        async with self._lock:
            for p in range(self.metadata_partitions):  # what other leaders wrote meanwhile
                self._catch_up(p)
            await self._delete_orphans()
            for part in self.rm.partitions():
                cfg = part.config
                if part.closed or part.offline:
                    continue
                if not cfg.remote_storage_enable:
                    if cfg.remote_log_delete_on_disable and part.is_leader:
                        await self._delete_all_remote(part)
                    continue
                if not part.is_leader:
                    self._publish_highest(part)
                    continue
                try:
                    await self._clean_up_unfinished(part)
                    if not cfg.remote_log_copy_disable:
                        await self._copy_segments(part)
                    await self._expire_remote(part)
                except (RemoteStorageError, RemoteLogMetadataError, OSError) as exc:
                    log.warning("remote tier of %s-%d: %s", part.topic, part.partition, exc)
                finally:
                    self._publish_highest(part)

    async def _copy_segments(self, part: Partition) -> None:
        highest = self.cache.highest_copied_offset(part.topic, part.partition)
        todo = copy_candidates(part, highest)
        self.stats.copy_lag[part.key] = len(todo)
        for base, last in todo:
            if not part.is_leader:
                return
            await self._copy_one(part, base, last)
            self.stats.copy_lag[part.key] -= 1

    async def _copy_one(self, part: Partition, base: int, last: int) -> None:
        lg = part._log
        seg = next((s for s in lg.segments if s.base_offset == base), None)
        if seg is None or seg.next_offset - 1 != last:
            return  # retention or truncation took it meanwhile
        data = await asyncio.to_thread(export_segment, lg, seg)
        epochs = segment_leader_epochs(lg.leader_epoch_cache.entries(), base, last)
        meta = RemoteLogSegmentMetadata(
            topic_id_of(part), part.topic, part.partition, uuid.uuid4(), base, last,
            seg.max_timestamp if seg.max_timestamp >= 0 else seg.largest_timestamp(),
            self.broker_id, self.clock(), epochs, data.log_size,
        )  # fmt: skip
        await self._publish(meta)
        try:
            await asyncio.to_thread(self.rsm.copy_log_segment_data, meta, data)
        except (RemoteStorageError, OSError):
            self.stats.remote_copy_errors += 1
            raise  # (the STARTED segment is cleaned up next round)
        await self._update(meta, _S.COPY_SEGMENT_FINISHED)
        self.stats.remote_copy_requests += 1
        self.stats.remote_copy_bytes += data.log_size
        log.info(
            "copied %s-%d [%d, %d] (%d bytes) to the remote tier",
            part.topic, part.partition, base, last, data.log_size,
        )  # fmt: skip

    async def _delete_remote(self, m: RemoteLogSegmentMetadata) -> None:
        """DELETE_SEGMENT_STARTED, remove the data, DELETE_SEGMENT_FINISHED: the data never outlives
        its metadata (a crash between leaves DELETE_STARTED, finished by the next round)."""
        if m.state is not _S.DELETE_SEGMENT_STARTED:
            await self._update(m, _S.DELETE_SEGMENT_STARTED)
        try:
            await asyncio.to_thread(self.rsm.delete_log_segment_data, m)
        except (RemoteStorageError, OSError):
            self.stats.remote_delete_errors += 1
            raise
        self.index_cache.forget(m.segment_id)
        m2 = next(
            (s for s in self.cache.segments(m.topic, m.partition) if s.segment_id == m.segment_id),
            None,
        )
        if m2 is not None:
            await self._update(m2, _S.DELETE_SEGMENT_FINISHED)
        self.stats.remote_delete_requests += 1

    async def _clean_up_unfinished(self, part: Partition) -> None:
        """Copies a previous leader (or this broker before a crash) left STARTED, and deletions left
        STARTED, are removed: no copy of this broker is in flight between rounds."""
        for m in self.cache.segments(part.topic, part.partition):
            if m.state in (_S.COPY_SEGMENT_STARTED, _S.DELETE_SEGMENT_STARTED):
                log.info(
                    "%s-%d: removing remote segment %s left in %s",
                    part.topic, part.partition, m.object_name, m.state.name,
                )  # fmt: skip
                await self._delete_remote(m)

    async def _expire_remote(self, part: Partition) -> None:
        for m in self.cache.below_log_start(part.topic, part.partition):
            await self._delete_remote(m)
            log.info(
                "%s-%d: remote segment [%d, %d] deleted, below the log start set by DeleteRecords",
                part.topic, part.partition, m.start_offset, m.end_offset,
            )  # fmt: skip
        cfg = part.config
        if not cfg.delete:
            return
        highest = self.cache.highest_copied_offset(part.topic, part.partition)
        only_local = sum(s.size for s in part._log.segments if s.base_offset > highest)
        victims = remote_retention_victims(
            self.cache.copied_segments(part.topic, part.partition),
            cfg.retention_ms,
            cfg.retention_bytes,
            only_local,
            self.clock(),
        )
        for m in victims:
            await self._delete_remote(m)
            log.info(
                "%s-%d: remote segment [%d, %d] expired by retention",
                part.topic, part.partition, m.start_offset, m.end_offset,
            )  # fmt: skip

    async def _delete_all_remote(self, part: Partition) -> None:
        """KIP-950: remote.storage.enable turned off with remote.log.delete.on.disable=true."""
        segs = self.cache.segments(part.topic, part.partition)
        try:
            for m in segs:
                await self._delete_remote(m)
        except (RemoteStorageError, RemoteLogMetadataError, OSError) as exc:
            log.warning("remote tier of %s-%d: %s", part.topic, part.partition, exc)
        if segs:
            log.info(
                "%s-%d: remote storage disabled, %d remote segment(s) deleted",
                part.topic, part.partition, len(segs),
            )  # fmt: skip
        part._log.highest_offset_in_remote_storage = -1

    async def _delete_orphans(self) -> None:
        """Topic deletion: the remote segments of partitions whose topic is gone go too."""
        exists = self._topic_exists
        if exists is None:
            return
        for topic, partition in self.cache.partitions():
            if self.rm.get_partition(topic, partition) is None and not exists(topic):
                try:
                    for m in self.cache.segments(topic, partition):
                        await self._delete_remote(m)
                except (RemoteStorageError, RemoteLogMetadataError, OSError) as exc:
                    log.warning("remote tier of deleted %s-%d: %s", topic, partition, exc)

    # -- DeleteRecords ----------------------------------------------------------------------------------
    async def delete_records(self, part: Partition, offset: int) -> int:
        """DeleteRecords across tiers (the leader; `offset` checked against the high watermark): the
        local log start moves as without tiered storage; below it, the cut is written to
        `__remote_log_metadata` at once (reads below it answer OFFSET_OUT_OF_RANGE from then on, and
        after a restart), and the remote segments wholly below it are deleted in the background
        (DELETE_SEGMENT_STARTED, the data, DELETE_SEGMENT_FINISHED). Returns the new log start."""
        part.delete_records(offset)
        if offset > self.log_start_offset_across_tiers(part):
            cut = RemoteLogStartOffsetUpdate(
                topic_id_of(part), part.topic, part.partition, offset, self.clock(), self.broker_id
            )
            await self._publish(cut)
        if self.cache.below_log_start(part.topic, part.partition):
            t = asyncio.get_running_loop().create_task(self._delete_below_log_start(part))
            self._background.add(t)
            t.add_done_callback(self._background.discard)
        return self.log_start_offset(part)

    def log_start_offset_across_tiers(self, part: Partition) -> int:
        """The log start whatever the topic's remote.storage.enable says now."""
        remote = self.cache.log_start_offset(part.topic, part.partition)
        local = part.log_start_offset
        return local if remote is None else min(remote, local)

    async def _delete_below_log_start(self, part: Partition) -> None:
        async with self._lock:
            try:
                for m in self.cache.below_log_start(part.topic, part.partition):
                    await self._delete_remote(m)
            except (RemoteStorageError, RemoteLogMetadataError, OSError) as exc:
                log.warning("remote tier of %s-%d: %s (retried)", part.topic, part.partition, exc)

    # -- reads --------------------------------------------------------------------------------------
    def log_start_offset(self, part: Partition) -> int:
        """The partition's log start across tiers (Kafka's logStartOffset of a tiered log)."""
        if not part.config.remote_storage_enable:
            return part.log_start_offset
        return self.log_start_offset_across_tiers(part)

    def serves(self, part: Partition, offset: int) -> bool:
        """Whether a fetch at `offset` goes to the remote tier: below the local log start, at or
        after the remote log start."""
        if offset >= part.log_start_offset or not part.config.remote_storage_enable:
            return False
        start = self.cache.log_start_offset(part.topic, part.partition)
        return start is not None and offset >= start

    async def read(
        self, part: Partition, offset: int, max_bytes: int, min_one_message: bool, upper: int
    ) -> tuple[bytes, list[tuple[int, int]]]:
        """(whole batches from `offset`, aborted transactions (producer id, first offset) in them) read
        from the remote tier, never past `upper` (the HW / LSO limit) by a whole segment's worth.
        Past remote.fetch.max.wait.ms: (b"", []), as Kafka's expired DelayedRemoteFetch answers the
        partition (no records, no error); the read goes on, and the client's next fetch of the same
        offset takes its result instead of starting again (a slow store still makes progress)."""
        m = self.cache.segment_for_offset(part.topic, part.partition, offset)
        if m is None or m.start_offset >= upper:
            return b"", []
        self.stats.remote_fetch_requests += 1
        key = (m.segment_id, offset, max_bytes, min_one_message)
        task = self._reads.get(key)
        if task is None:
            task = asyncio.get_running_loop().create_task(
                self._read(part, m, offset, max_bytes, min_one_message)
            )
            self._reads[key] = task
            self._trim_reads()
        try:
            data, aborted = await asyncio.wait_for(
                asyncio.shield(task), self.remote_fetch_max_wait_ms / 1000
            )
            self._reads.pop(key, None)
        except TimeoutError:
            self.stats.remote_fetch_expires += 1
            log.info(
                "remote read of %s-%d at %d took over remote.fetch.max.wait.ms=%d: answered empty",
                part.topic, part.partition, offset, self.remote_fetch_max_wait_ms,
            )  # fmt: skip
            return b"", []
        except (RemoteStorageError, OSError):
            self._reads.pop(key, None)
            self.stats.remote_fetch_errors += 1
            raise
        self.stats.remote_fetch_bytes += len(data)
        return data, aborted

    def _trim_reads(self) -> None:
        """Keep at most _MAX_PENDING_READS reads: finished ones nobody came back for go first."""
        if len(self._reads) <= _MAX_PENDING_READS:
            return
        for k, t in list(self._reads.items()):
            if t.done():
                if not t.cancelled():
                    t.exception()  # (retrieved: no "never retrieved" warning)
                del self._reads[k]
                if len(self._reads) <= _MAX_PENDING_READS:
                    return

    async def _read(
        self,
        part: Partition,
        m: RemoteLogSegmentMetadata,
        offset: int,
        max_bytes: int,
        min_one_message: bool,
    ) -> tuple[bytes, list[tuple[int, int]]]:
        data, nxt = await asyncio.to_thread(
            read_remote_batches, self.rsm, self.index_cache, m, offset, max_bytes, min_one_message
        )
        aborted = await asyncio.to_thread(self._aborted, part, offset, nxt)
        return data, aborted

    async def offset_for_timestamp(self, part: Partition, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with a timestamp >= `timestamp` when the remote
        tier holds it below the local log start (Kafka's findOffsetByTimestamp: the segments' max
        timestamps pick the segment, its remote time index the place to read from); None: look in
        the local log. RemoteListOffsetsTimeout past remote.list.offsets.request.timeout.ms."""
        try:
            return await asyncio.wait_for(
                self._offset_for_timestamp(part, timestamp),
                self.remote_list_offsets_timeout_ms / 1000,
            )
        except TimeoutError:
            self.stats.remote_list_offsets_expires += 1
            raise RemoteListOffsetsTimeout(
                f"{part.topic}-{part.partition}: the remote tier did not answer within "
                f"remote.list.offsets.request.timeout.ms={self.remote_list_offsets_timeout_ms}"
            ) from None

    async def _offset_for_timestamp(
        self, part: Partition, timestamp: int
    ) -> tuple[int, int] | None:
        start = self.log_start_offset(part)
        local_start = part.log_start_offset
        for m in self.cache.copied_segments(part.topic, part.partition):
            if m.start_offset >= local_start:
                break  # the local log has it (and reads it cheaper)
            if m.end_offset < start or m.max_timestamp_ms < timestamp:
                continue
            try:
                found = await asyncio.to_thread(
                    remote_offset_for_timestamp, self.rsm, self.index_cache, m, timestamp, start
                )
            except (RemoteStorageError, OSError):
                self.stats.remote_fetch_errors += 1
                raise
            if found is not None:
                return found
        return None

    def _aborted(self, part: Partition, start: int, upper: int) -> list[tuple[int, int]]:
        """Aborted transactions overlapping [start, upper) from the remote transaction indexes (the
        abort marker may sit in a later segment, even a local one)."""
        out: list[tuple[int, int]] = []
        for m in self.cache.copied_segments(part.topic, part.partition):
            if m.end_offset < start:
                continue
            for pid, first, last, _lso in self.index_cache.aborted(m):
                if last >= start and first < upper:
                    out.append((pid, first))
        local_start = part.log_start_offset
        out += [
            (a.producer_id, a.first_offset)
            for a in part.collect_aborted_transactions(local_start, max(upper, local_start + 1))
            if a.first_offset < upper
        ]
        return sorted(set(out), key=lambda t: t[1])

    # -- sizes ----------------------------------------------------------------------------------------
    def remote_size(self, topic: str, partition: int) -> int:
        return self.cache.size_in_bytes(topic, partition)

    def led_remote_sizes(self) -> list[tuple[str, int, int]]:
        """(topic, partition, remote bytes) of the tiered partitions this broker leads (each remote
        byte counted once in a cluster: only its leader reports it)."""
        return sorted(
            (part.topic, part.partition, self.remote_size(part.topic, part.partition))
            for part in self.rm.partitions()
            if part.is_leader
            and not part.closed
            and (part.config.remote_storage_enable or self.cache.segments(*part.key))
        )
