"""The remote log manager over a real LogManager and ReplicaManager: it copies rolled segments below the
high watermark, local retention waits for the copy, a dead leader's half copy is cleaned up, retention.bytes
expires remote segments with their metadata, and a new manager rebuilds the same state by replay."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from kafkalite.broker.apis.data.list_offsets import lookup
from kafkalite.cluster.remote_log_manager import REMOTE_LOG_METADATA_TOPIC, RemoteLogManager
from kafkalite.cluster.remote_log_policy import copy_candidates
from kafkalite.records import iter_batches
from kafkalite.records.builder import build_batch
from kafkalite.storage import LogManager
from kafkalite.storage.remote import LocalTieredStorage, LogSegmentData, RemoteLogSegmentState
from kafkalite.storage.remote.metadata import RemoteLogSegmentMetadata

TOPIC = "t"
TID = uuid.UUID(int=3)
TIERED = {
    "remote.storage.enable": "true",
    "segment.bytes": "20000",
    "local.retention.bytes": "20000",
}


def test_copy_local_retention_cleanup_remote_retention_and_replay(tmp_path: Path) -> None:
    asyncio.run(_scenario(tmp_path))


async def _scenario(tmp_path: Path) -> None:
    from kafkalite.cluster.replica_manager import ReplicaManager

    lm = LogManager([tmp_path / "data"])
    lm.startup()
    try:
        rm = ReplicaManager(1, lm, lambda _key: None)
        rm.create_local_leader(REMOTE_LOG_METADATA_TOPIC, 0, None)
        part = rm.create_local_leader(TOPIC, 0, TID, TIERED)
        lg = part._log
        for i in range(150):
            part.append_records_to_leader(build_batch([(None, b"%05d" % i * 100)] * 2), 1)
        assert lg.high_watermark == 300 and len(lg.segments) >= 8
        rsm = LocalTieredStorage(tmp_path / "remote", fsync=False)
        rlm = RemoteLogManager(1, rm, rsm, task_interval_ms=10**9, metadata_partitions=1)
        rm.remote_log_manager = rlm
        await rlm.start()

        # nothing copied yet: local retention keeps every segment
        assert lg.delete_old_segments() == 0
        rolled = [(s.base_offset, s.next_offset - 1) for s in lg.segments[:-1]]
        assert copy_candidates(part, -1) == rolled
        await rlm.run_once()
        copied = rlm.cache.copied_segments(TOPIC, 0)
        assert [(m.start_offset, m.end_offset) for m in copied] == rolled
        assert lg.highest_offset_in_remote_storage == rolled[-1][1]
        assert lg.delete_old_segments() > 0 and lg.log_start_offset > 0
        assert rlm.log_start_offset(part) == 0 and rlm.serves(part, 0)
        # ListOffsets: EARLIEST the remote log start, EARLIEST_LOCAL the local one, LATEST_TIERED
        # the last offset the remote tier holds
        assert lookup(part, -2, False, rlm) == (-1, 0)
        assert lookup(part, -4, False, rlm) == (-1, lg.log_start_offset)
        assert lookup(part, -5, False, rlm) == (-1, rolled[-1][1])
        assert lookup(part, -2, False, None) == (-1, lg.log_start_offset)

        # the remote tier serves what the local log no longer has, with every offset in order
        seen: list[int] = []
        offset = 0
        while offset < lg.log_start_offset:
            data, aborted = await rlm.read(part, offset, 3000, True, lg.high_watermark)
            assert data and aborted == []
            for b in iter_batches(data):
                seen.extend(range(b.base_offset, b.next_offset))
            offset = seen[-1] + 1
        assert seen == list(range(len(seen))) and len(seen) >= lg.log_start_offset

        # a copy a dead leader left half-way (COPY_SEGMENT_STARTED, data written) is removed
        seg = lg.segments[-1]
        half = RemoteLogSegmentMetadata(
            TID, TOPIC, 0, uuid.uuid4(), rolled[-1][1] + 1, rolled[-1][1] + 2, 0, 2, 0, (), 10
        )
        await rlm._publish(half)
        rsm.copy_log_segment_data(half, LogSegmentData(seg.log_path, 0, b"", b"", None, None, b""))
        assert len(rsm.list_segments()) == len(copied) + 1
        await rlm.run_once()
        assert len(rsm.list_segments()) == len(copied)
        assert half.segment_id not in {m.segment_id for m in rlm.cache.segments(TOPIC, 0)}

        # retention.bytes over both tiers expires the oldest remote segments, data and metadata
        lm.set_topic_config(TOPIC, {**TIERED, "retention.bytes": "60000"})
        await rlm.run_once()
        left = rlm.cache.copied_segments(TOPIC, 0)
        assert 0 < len(left) < len(copied)
        only_local = sum(s.size for s in lg.segments if s.base_offset > left[-1].end_offset)
        total = sum(m.segment_size_in_bytes for m in left) + only_local
        # as Kafka's size retention: a segment goes only while the rest still reaches the limit
        assert total - left[0].segment_size_in_bytes < 60000 <= total
        assert len(rsm.list_segments()) == len(left)
        assert rlm.log_start_offset(part) == left[0].start_offset > 0

        # a new manager (a restart) rebuilds the same metadata from __remote_log_metadata
        rlm2 = RemoteLogManager(1, rm, rsm, task_interval_ms=10**9, metadata_partitions=1)
        await rlm2.start()
        assert rlm2.cache.segments(TOPIC, 0) == rlm.cache.segments(TOPIC, 0)
        assert all(
            m.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED
            for m in rlm2.cache.segments(TOPIC, 0)
        )
        await rlm2.stop()

        # KIP-950: remote storage turned off with remote.log.delete.on.disable deletes the remote tier
        lm.set_topic_config(
            TOPIC, {"remote.storage.enable": "false", "remote.log.delete.on.disable": "true"}
        )
        await rlm.run_once()
        assert rlm.cache.segments(TOPIC, 0) == [] and rsm.list_segments() == []
        assert rlm.log_start_offset(part) == lg.log_start_offset

        # topic deletion: a partition no longer hosted, of a topic that is gone, loses its remote copies
        other = rm.create_local_leader("gone", 0, uuid.UUID(int=4), TIERED)
        for i in range(30):
            other.append_records_to_leader(build_batch([(None, b"%05d" % i * 100)] * 2), 1)
        await rlm.run_once()
        assert rlm.cache.copied_segments("gone", 0) and rsm.list_segments()
        rm.stop_replica("gone", 0, delete=True)
        rlm._topic_exists = lambda topic: topic != "gone"
        await rlm.run_once()
        assert rlm.cache.segments("gone", 0) == [] and rsm.list_segments() == []
        await rlm.stop()
    finally:
        lm.shutdown()


def test_a_copy_cut_by_a_crash_is_archived_exactly_once_after_restart(tmp_path: Path) -> None:
    asyncio.run(_crash_scenario(tmp_path))


async def _crash_scenario(tmp_path: Path) -> None:
    from kafkalite.cluster.replica_manager import ReplicaManager
    from kafkalite.storage.remote.segment_export import export_segment

    lm = LogManager([tmp_path / "data"])
    lm.startup()
    try:
        rm = ReplicaManager(1, lm, lambda _key: None)
        rm.create_local_leader(REMOTE_LOG_METADATA_TOPIC, 0, None)
        part = rm.create_local_leader(TOPIC, 0, TID, TIERED)
        lg = part._log
        for i in range(60):
            part.append_records_to_leader(build_batch([(None, b"%05d" % i * 100)] * 2), 1)
        root = tmp_path / "remote"
        rlm = RemoteLogManager(
            1, rm, LocalTieredStorage(root), task_interval_ms=10**9, metadata_partitions=1
        )
        await rlm.start()
        # the broker dies while copying the first segment: COPY_SEGMENT_STARTED is in the topic, the
        # store holds a temporary directory with part of it
        seg = lg.segments[0]
        started = RemoteLogSegmentMetadata(
            TID, TOPIC, 0, uuid.uuid4(), seg.base_offset, seg.next_offset - 1, 0, 1, 0, (), seg.size
        )
        await rlm._publish(started)
        tmp = LocalTieredStorage(root).segment_dir(started)
        half = tmp.parent / f".tmp-{tmp.name}-dead"
        half.mkdir(parents=True)
        (half / "segment.log").write_bytes(export_segment(lg, seg).log_segment.read_bytes()[:100])
        await rlm.stop()

        # restart: the store's leftovers go, the STARTED copy is cleaned up, every segment is
        # archived once
        rsm = LocalTieredStorage(root)
        assert rsm.cleaned == 1
        rlm2 = RemoteLogManager(1, rm, rsm, task_interval_ms=10**9, metadata_partitions=1)
        await rlm2.start()
        assert rlm2.cache.segments(TOPIC, 0)[0].state is RemoteLogSegmentState.COPY_SEGMENT_STARTED
        await rlm2.run_once()
        segs = rlm2.cache.segments(TOPIC, 0)
        rolled = [(s.base_offset, s.next_offset - 1) for s in lg.segments[:-1]]
        assert [(m.start_offset, m.end_offset) for m in segs] == rolled
        assert all(m.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED for m in segs)
        assert started.segment_id not in {m.segment_id for m in segs}
        assert rsm.list_segments() == sorted(f"{TOPIC}-0-{TID}/{m.object_name}" for m in segs)
        await rlm2.stop()
    finally:
        lm.shutdown()


class _StalledStore(LocalTieredStorage):
    """A directory store whose segment and index reads wait until `release` is set."""

    def __init__(self, root: Path) -> None:
        super().__init__(root, fsync=False)
        import threading

        self.release = threading.Event()
        self.stall = False

    def fetch_log_segment(self, metadata, start_position, end_position):  # type: ignore[no-untyped-def]
        if self.stall:
            self.release.wait(30)
        return super().fetch_log_segment(metadata, start_position, end_position)

    def fetch_index(self, metadata, index_type):  # type: ignore[no-untyped-def]
        if self.stall:
            self.release.wait(30)
        return super().fetch_index(metadata, index_type)


def test_a_stalled_remote_store_expires_fetch_empty_and_list_offsets_timed_out(
    tmp_path: Path,
) -> None:
    asyncio.run(_stalled_scenario(tmp_path))


async def _stalled_scenario(tmp_path: Path) -> None:
    import pytest

    from kafkalite.cluster.remote_log_manager import RemoteListOffsetsTimeout
    from kafkalite.cluster.replica_manager import ReplicaManager
    from kafkalite.protocol.errors import ErrorCode

    lm = LogManager([tmp_path / "data"])
    lm.startup()
    rsm = _StalledStore(tmp_path / "remote")
    try:
        rm = ReplicaManager(1, lm, lambda _key: None)
        rm.create_local_leader(REMOTE_LOG_METADATA_TOPIC, 0, None)
        part = rm.create_local_leader(TOPIC, 0, TID, TIERED)
        lg = part._log
        for i in range(60):
            part.append_records_to_leader(build_batch([(None, b"%05d" % i * 100)] * 2), 1)
        rlm = RemoteLogManager(
            1, rm, rsm, task_interval_ms=10**9, metadata_partitions=1,
            remote_fetch_max_wait_ms=50, remote_list_offsets_timeout_ms=50,
        )  # fmt: skip
        rm.remote_log_manager = rlm
        await rlm.start()
        await rlm.run_once()
        assert lg.delete_old_segments() > 0 and rlm.serves(part, 0)
        rsm.stall = True
        # KIP-1018: past remote.fetch.max.wait.ms the partition is answered with nothing
        assert await rlm.read(part, 0, 3000, True, lg.high_watermark) == (b"", [])
        assert rlm.stats.remote_fetch_expires == 1 and rlm.stats.remote_fetch_errors == 0
        pending = list(rlm._reads.values())
        assert len(pending) == 1 and not pending[0].done()  # the read goes on
        # KIP-1075: a by-timestamp lookup past its timeout is REQUEST_TIMED_OUT
        with pytest.raises(RemoteListOffsetsTimeout) as info:
            await rlm.offset_for_timestamp(part, 0)
        assert info.value.error_code == ErrorCode.REQUEST_TIMED_OUT
        rsm.release.set()
        rsm.stall = False
        # the expired read went on: the next fetch at that offset takes its result
        data, _ = await rlm.read(part, 0, 3000, True, lg.high_watermark)
        assert next(iter_batches(data)).base_offset == 0
        assert pending[0].done() and not rlm._reads
        assert await rlm.offset_for_timestamp(part, 0) == (
            0,
            next(iter_batches(data)).max_timestamp,
        )
        await rlm.stop()
    finally:
        rsm.release.set()
        lm.shutdown()


def test_a_second_manager_follows_the_metadata_topic_and_copies_on_from_it(
    tmp_path: Path,
) -> None:
    asyncio.run(_follow_scenario(tmp_path))


async def _follow_scenario(tmp_path: Path) -> None:
    """Manager B, started before A copies anything, learns A's copies from __remote_log_metadata
    (no restart) and, leading next, copies only what A had not: no segment is archived twice."""
    from kafkalite.cluster.replica_manager import ReplicaManager

    lm = LogManager([tmp_path / "data"])
    lm.startup()
    try:
        rm = ReplicaManager(1, lm, lambda _key: None)
        rm.create_local_leader(REMOTE_LOG_METADATA_TOPIC, 0, None)
        part = rm.create_local_leader(TOPIC, 0, TID, TIERED)
        for i in range(60):
            part.append_records_to_leader(build_batch([(None, b"%05d" % i * 100)] * 2), 1)
        rsm = LocalTieredStorage(tmp_path / "remote", fsync=False)
        a = RemoteLogManager(1, rm, rsm, task_interval_ms=10**9, metadata_partitions=1)
        b = RemoteLogManager(2, rm, rsm, task_interval_ms=10**9, metadata_partitions=1)
        await a.start()
        await b.start()
        await a.run_once()
        copied_by_a = a.cache.copied_segments(TOPIC, 0)
        assert copied_by_a and b.cache.copied_segments(TOPIC, 0) == []
        for i in range(60):
            part.append_records_to_leader(build_batch([(None, b"%05d" % i * 100)] * 2), 1)
        await b.run_once()
        mine = b.cache.copied_segments(TOPIC, 0)
        assert mine[: len(copied_by_a)] == copied_by_a and len(mine) > len(copied_by_a)
        assert all(m.broker_id == 2 for m in mine[len(copied_by_a) :])
        starts = [m.start_offset for m in mine]
        assert len(set(starts)) == len(starts) == len(rsm.list_segments())
        await a.run_once()  # and A learns B's copies the same way
        assert a.cache.copied_segments(TOPIC, 0) == mine
        await a.stop()
        await b.stop()
    finally:
        lm.shutdown()
