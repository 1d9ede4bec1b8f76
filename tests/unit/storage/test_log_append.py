"""Log.append_as_leader (the produce path's call): its plain-tuple answer, immutable and short
writes, and the segment bookkeeping it inlines (index entries, a full index rolling the segment)."""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Any

import pytest
from storage_helpers import batches, make_batch, open_log, read_all

import kafkalite.storage.segment as log_mod
from kafkalite.records.header import compute_crc, iter_batch_headers
from kafkalite.storage import AppendInfo, Log, LogConfig
from kafkalite.storage.index import OffsetIndex, TimeIndex


def test_append_as_leader_answers_append_info_fields(tmp_path: Path) -> None:
    lg = open_log(tmp_path / "t-0")
    one = make_batch(3, timestamp=2_000)
    assert lg.append_as_leader(bytearray(one), 4) == (0, 2, -1, 2_000, 0, 1, len(one))
    assert lg.append_as_leader(one) == (3, 5, -1, 2_000, 0, 1, len(one))  # bytes: copied
    two = make_batch(2, tag=1) + make_batch(1, tag=2)  # several batches: the general path
    assert lg.append_as_leader(two) == (6, 8, -1, 1_000, 0, 2, len(two))
    info = lg.append(make_batch(1))
    assert info == AppendInfo(9, 9, -1, 1_000, 0, 1, len(make_batch(1)))
    got = batches(read_all(lg))
    assert [b.base_offset for b in got] == [0, 3, 6, 8, 9]
    assert [b.partition_leader_epoch for b in got] == [4, 0, 0, 0, 0]
    lg.close()


def test_append_as_leader_with_log_append_time(tmp_path: Path) -> None:
    lg = Log.open(tmp_path / "t-0", LogConfig(message_timestamp_type="LogAppendTime"))
    lg.clock = lambda: 777
    first, last, append_time, max_ts, _, _, _ = lg.append_as_leader(bytearray(make_batch(2)))
    assert (first, last, append_time, max_ts) == (0, 1, 777, 777)
    (b,) = batches(read_all(lg))
    assert b.timestamp_type == 1 and b.max_timestamp == 777
    lg.close()


def _check_stored(lg: Log, expected: list[tuple[int, int, bytes]]) -> None:
    """Each stored batch has its base offset and epoch stamped, the rest as given, a valid CRC."""
    data = read_all(lg)
    heads = list(iter_batch_headers(data))
    assert len(heads) == len(expected)
    for (pos, h), (base, epoch, raw) in zip(heads, expected, strict=True):
        assert (h.base_offset, h.partition_leader_epoch) == (base, epoch)
        stored = data[pos : pos + h.size]
        assert stored[8:12] == raw[8:12] and stored[16:] == raw[16:]
        assert compute_crc(stored, 0, h.size) == h.crc


def test_large_immutable_batch_is_stamped_without_touching_the_callers_bytes(
    tmp_path: Path,
) -> None:
    lg = open_log(tmp_path / "t-0")
    small = make_batch(2, value_size=100)
    big = make_batch(3, value_size=6_000)  # past the copy limit: header + view, pwritev
    assert len(small) < log_mod._COPY_MAX < len(big)
    before = bytes(big)
    lg.append_as_leader(small, 3)
    lg.append_as_leader(big, 3)
    lg.append_as_leader(memoryview(big), 5)
    assert big == before
    _check_stored(lg, [(0, 3, small), (2, 3, big), (5, 5, big)])
    lg.close()
    again = Log.open(tmp_path / "t-0", recovery_point=0)  # recovery checks every CRC
    assert again.log_end_offset == 8
    again.close()


def test_short_writes_are_finished(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A positional write that stores only part of a batch is completed, whichever form the
    batch came in (the rest is rewritten from a stamped copy)."""
    real_pwrite, real_pwritev = os.pwrite, os.pwritev

    def short_pwrite(fd: int, data: Any, pos: int) -> int:
        return real_pwrite(fd, memoryview(data)[:70], pos)

    def short_pwritev(fd: int, parts: Any, pos: int) -> int:
        return real_pwritev(fd, [parts[0], parts[1][:30]], pos)

    monkeypatch.setattr(log_mod, "_pwrite", short_pwrite)
    monkeypatch.setattr(log_mod, "_pwritev", short_pwritev)
    lg = open_log(tmp_path / "t-0")
    small = make_batch(2, value_size=50)
    big = make_batch(2, value_size=5_000)
    lg.append_as_leader(bytearray(small), 1)
    lg.append_as_leader(small, 1)
    lg.append_as_leader(big, 2)
    _check_stored(lg, [(0, 1, small), (2, 1, small), (4, 2, big)])
    lg.close()


def test_index_entries_and_a_full_index_roll_the_segment(tmp_path: Path) -> None:
    # 24 bytes: three offset-index entries, two time-index entries (plus the one sealing adds)
    lg = open_log(tmp_path / "t-0", index_interval_bytes=0, segment_index_bytes=24)
    for i in range(12):
        lg.append_as_leader(bytearray(make_batch(1, timestamp=1_000 + i)))
    segs = lg.segments
    assert len(segs) > 1
    for seg in segs[:-1]:
        assert seg.index_full and len(seg.time_index) <= 3 and len(seg.offset_index) <= 3
        # every entry points at the batch it names
        for off, pos in seg.offset_index.entries():
            found = seg.find_batch(off)
            assert found is not None and found[0] == pos
    assert [b.base_offset for b in batches(read_all(lg))] == list(range(12))
    lg.close()


def test_offset_index_file_entries_and_full_flag(tmp_path: Path) -> None:
    idx = OffsetIndex(tmp_path / "a.index", 100, 8 * 300)
    results = [idx.append(100 + i, 1000 * i) for i in range(1, 301)]
    assert results == [False] * 299 + [True]
    assert idx.append(100, 5) is True  # ignored (not increasing), still full
    idx.flush()
    data = (tmp_path / "a.index").read_bytes()
    assert data == b"".join(struct.pack(">ii", i, 1000 * i) for i in range(1, 301))
    idx.close()


def test_time_index_last_timestamp_follows_its_entries(tmp_path: Path) -> None:
    idx = TimeIndex(tmp_path / "a.timeindex", 50, 1 << 20)
    assert idx.last_timestamp == -1
    assert idx.maybe_append(1000, 55) is False
    idx.maybe_append(900, 60)  # not increasing: ignored
    idx.maybe_append(2000, 70)
    assert idx.last_timestamp == 2000
    idx.truncate_to(70)
    assert idx.last_timestamp == 1000
    idx.close()
    again = TimeIndex(tmp_path / "a.timeindex", 50, 1 << 20)
    again.load()
    assert again.last_timestamp == 1000
    again.reset()
    assert again.last_timestamp == -1
    again.close()


def test_a_follower_append_writes_the_fetched_bytes_as_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing is stamped on a follower: its bytes (or a read-only view of them) reach the write
    uncopied, and the log holds them byte for byte."""
    leader = open_log(tmp_path / "l-0")
    for i in range(3):
        leader.append_as_leader(bytearray(make_batch(2, tag=i)), 5)
    fetched = read_all(leader)
    written: list[object] = []
    real_append = log_mod.LogSegment.append

    def spy(self: Any, buf: Any, headers: Any) -> None:
        written.append(buf)
        real_append(self, buf, headers)

    monkeypatch.setattr(log_mod.LogSegment, "append", spy)
    follower = open_log(tmp_path / "f-0")
    first = len(make_batch(2, tag=0))
    rest = fetched[first:]
    follower.append_as_follower(memoryview(fetched)[:first])
    follower.append_as_follower(rest)
    assert isinstance(written[0], memoryview) and written[0].obj is fetched
    assert written[1] is rest
    assert read_all(follower) == fetched
    assert follower.log_end_offset == 6 and follower.latest_epoch == 5
