"""The directory remote store: a segment copied with its indexes reads back by byte range, a crash's
leftovers are removed on open, deletion is idempotent; and remote reads return whole batches."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from kafkalite.records.builder import build_batch
from kafkalite.storage.config import LogConfig
from kafkalite.storage.log import Log
from kafkalite.storage.remote import IndexType, LocalTieredStorage, RemoteResourceNotFound
from kafkalite.storage.remote.metadata import RemoteLogSegmentMetadata
from kafkalite.storage.remote.remote_read import RemoteIndexCache, read_remote_batches
from kafkalite.storage.remote.segment_export import (
    export_segment,
    parse_leader_epoch_checkpoint,
    parse_offset_index,
)
from kafkalite.storage.segment import LogSegment


def _log(tmp: Path) -> Log:
    lg = Log.open(tmp / "t-0", LogConfig(segment_bytes=20_000, index_interval_bytes=1024))
    for i in range(200):
        lg.append_as_leader(build_batch([(None, b"%05d" % i * 40)] * 3), 0 if i < 100 else 1)
    lg.update_high_watermark(lg.log_end_offset)
    return lg


def _meta(seg: LogSegment, size: int) -> RemoteLogSegmentMetadata:
    return RemoteLogSegmentMetadata(
        uuid.UUID(int=1), "t", 0, uuid.uuid4(), seg.base_offset, seg.next_offset - 1,
        seg.max_timestamp, 1, 0, (), size,
    )  # fmt: skip


def test_copy_fetch_and_delete_a_segment(tmp_path: Path) -> None:
    lg = _log(tmp_path)
    seg = lg.segments[1]
    data = export_segment(lg, seg)
    assert data.log_size == seg.size and data.offset_index
    assert parse_offset_index(data.offset_index, seg.base_offset) == seg.offset_index.entries()
    assert parse_leader_epoch_checkpoint(data.leader_epoch_index) == [(0, 0)]
    rsm = LocalTieredStorage(tmp_path / "remote")
    m = _meta(seg, data.log_size)
    rsm.copy_log_segment_data(m, data)
    rsm.copy_log_segment_data(m, data)  # a retried copy: no error, one copy
    assert len(rsm.list_segments()) == 1
    assert rsm.fetch_log_segment(m, 0, None) == seg.read_bytes(0, seg.size)
    assert rsm.fetch_log_segment(m, 100, 199) == seg.read_bytes(100, 100)
    assert rsm.fetch_index(m, IndexType.OFFSET) == data.offset_index
    with pytest.raises(RemoteResourceNotFound):
        rsm.fetch_index(m, IndexType.TRANSACTION)  # no aborted transaction: no file
    rsm.delete_log_segment_data(m)
    rsm.delete_log_segment_data(m)
    assert rsm.list_segments() == []
    with pytest.raises(RemoteResourceNotFound):
        rsm.fetch_log_segment(m, 0, None)
    lg.close()


def test_leftovers_of_a_crash_are_removed_on_open(tmp_path: Path) -> None:
    part = tmp_path / "remote" / "t-0-x"
    (part / ".tmp-00000000000000000000-abc-1234").mkdir(parents=True)
    (part / ".deleting-00000000000000000010-def").mkdir()
    rsm = LocalTieredStorage(tmp_path / "remote")
    assert rsm.cleaned == 2 and list(part.iterdir()) == []


def test_remote_reads_return_the_same_whole_batches_as_the_local_log(tmp_path: Path) -> None:
    lg = _log(tmp_path)
    rsm = LocalTieredStorage(tmp_path / "remote", fsync=False)
    cache = RemoteIndexCache(rsm, max_entries=2)
    for seg in lg.segments[:-1]:
        m = _meta(seg, seg.size)
        rsm.copy_log_segment_data(m, export_segment(lg, seg))
        for offset in (seg.base_offset, seg.base_offset + 1, seg.next_offset - 1):
            for max_bytes in (1, 500, 5000, 1 << 20):
                got, nxt = read_remote_batches(rsm, cache, m, offset, max_bytes)
                local = lg.read(offset, max_bytes, max_offset=seg.next_offset).slice
                assert local is not None
                assert got == local.read_bytes()
                assert nxt > offset
        assert read_remote_batches(rsm, cache, m, seg.next_offset, 1000) == (b"", seg.next_offset)
    assert len(cache) <= 2
    lg.close()


def test_dump_log_reads_a_segment_in_the_remote_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from kafkalite.cli.main import main

    lg = _log(tmp_path)
    seg = lg.segments[1]
    rsm = LocalTieredStorage(tmp_path / "remote", fsync=False)
    m = _meta(seg, seg.size)
    rsm.copy_log_segment_data(m, export_segment(lg, seg))
    d = rsm.segment_dir(m)
    files = f"{d / 'segment.log'},{d / 'segment.index'}"
    assert main(["dump-log", "--files", files, "--index-sanity-check", "--output", "json"]) == 0
    docs = json.loads(capsys.readouterr().out)
    assert docs[0]["startingOffset"] == seg.base_offset
    assert docs[0]["batches"][0]["baseOffset"] == seg.base_offset
    assert not docs[1].get("mismatches")
    lg.close()
