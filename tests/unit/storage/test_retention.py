"""Retention by time and by size, DeleteRecords, delayed file removal, log-start checkpoints."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from storage_helpers import batches, make_batch, read_all

from kafkalite.storage import Log, LogConfig, LogManager
from kafkalite.storage.errors import OffsetOutOfRange


def _fill(lg: Log, n: int, ts0: int = 0, value_size: int = 100, *, committed: bool = True) -> None:
    """Append `n` one-record batches; `committed`: the high watermark follows (as the Partition of
    a single-replica leader moves it)."""
    for i in range(n):
        lg.append(make_batch(1, value_size=value_size, timestamp=ts0 + i * 1000, tag=i))
    if committed:
        lg.update_high_watermark(lg.log_end_offset)


def _names(lg: Log, suffix: str) -> list[str]:
    return sorted(n for n in os.listdir(lg.dir) if n.endswith(suffix))


def test_retention_by_time_deletes_whole_old_segments(tmp_path: Path) -> None:
    lg = Log.open(
        tmp_path / "t-0", LogConfig(segment_bytes=600, retention_ms=10_000, file_delete_delay_ms=0)
    )
    _fill(lg, 40)  # timestamps 0 .. 39_000
    segs = lg.segments
    assert len(segs) > 5
    now = 30_000
    expected_gone = [s for s in segs[:-1] if now - s.max_timestamp > 10_000]
    # segments qualify oldest-first; stop at the first young one
    deleted = lg.delete_old_segments(now)
    assert deleted == len(expected_gone) > 0
    assert lg.log_start_offset == lg.segments[0].base_offset == expected_gone[-1].next_offset
    assert all(now - s.max_timestamp <= 10_000 for s in lg.segments[:-1])
    with pytest.raises(OffsetOutOfRange):
        lg.read(0, 100)
    assert batches(read_all(lg))[0].base_offset == lg.log_start_offset
    # .deleted files exist until the delay (here 0, plus the 1 s descriptor grace) has passed
    assert _names(lg, ".log.deleted")
    lg.remove_deleted_segments()
    assert _names(lg, ".log.deleted")
    lg.remove_deleted_segments(now=lg.clock() + 1001)
    assert not _names(lg, ".deleted")
    # far in the future everything but the active segment goes
    lg.delete_old_segments(10**12)
    assert len(lg.segments) == 1 and lg.log_start_offset == lg.active_segment.base_offset
    assert lg.log_end_offset == 40
    lg.close()


def test_retention_infinite_and_compact_only(tmp_path: Path) -> None:
    lg = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=600, retention_ms=-1))
    _fill(lg, 20)
    assert lg.delete_old_segments(10**12) == 0
    lg.update_config(LogConfig(segment_bytes=600, retention_ms=1, cleanup_policy="compact"))
    assert lg.delete_old_segments(10**12) == 0
    lg.close()


def test_retention_by_size(tmp_path: Path) -> None:
    lg = Log.open(
        tmp_path / "t-0", LogConfig(segment_bytes=600, retention_bytes=1500, retention_ms=-1)
    )
    _fill(lg, 40)
    total_before = lg.size_in_bytes
    lg.delete_old_segments(0)
    # Kafka's rule: a segment goes only if the log stays at or above retention.bytes without it
    assert lg.size_in_bytes >= 1500
    assert lg.size_in_bytes - lg.segments[0].size < 1500
    assert lg.size_in_bytes < total_before
    assert read_all(lg)  # still readable from the new start
    lg.close()


def test_retention_never_deletes_at_or_above_the_high_watermark(tmp_path: Path) -> None:
    lg = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=600, retention_ms=1, retention_bytes=0))
    _fill(lg, 40, committed=False)
    assert lg.delete_old_segments(10**12) == 0  # nothing is committed yet: nothing may go
    lg.update_high_watermark(10)
    lg.delete_old_segments(10**12)
    assert 0 < lg.log_start_offset <= 10  # only segments wholly below the HW went
    assert all(s.base_offset >= lg.log_start_offset for s in lg.segments)
    assert lg.segments[0].next_offset > 10 or lg.segments[1].base_offset > 10
    with pytest.raises(OffsetOutOfRange):
        lg.delete_records(11)  # DeleteRecords beyond the high watermark is refused
    lg.close()


def test_active_segment_never_deleted(tmp_path: Path) -> None:
    lg = Log.open(tmp_path / "t-0", LogConfig(retention_ms=1, retention_bytes=0))
    _fill(lg, 5)
    assert lg.delete_old_segments(10**12) == 0
    assert lg.log_start_offset == 0 and len(read_all(lg)) > 0
    lg.close()


def test_delete_records(tmp_path: Path) -> None:
    lg = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=600))
    _fill(lg, 30)
    assert lg.delete_records(5) == 5
    with pytest.raises(OffsetOutOfRange):
        lg.read(4, 100)
    assert lg.read(5, 100).slice is not None
    assert lg.delete_records(3) == 5  # never moves backwards
    with pytest.raises(OffsetOutOfRange):
        lg.delete_records(31)
    third = lg.segments[2].base_offset
    assert lg.delete_records(third + 1) == third + 1
    assert lg.segments[0].base_offset == third  # whole segments below were deleted
    assert lg.delete_records(-1) == 30  # the high watermark
    assert lg.read(30, 100).slice is None
    with pytest.raises(OffsetOutOfRange):
        lg.read(29, 100)
    assert lg.append(make_batch(1)).first_offset == 30
    lg.close()


def test_log_start_offset_survives_restart(tmp_path: Path) -> None:
    cfg = LogConfig(segment_bytes=600)
    m = LogManager([tmp_path / "d"], cfg)
    m.startup()
    lg = m.get_or_create_log("t", 0)
    _fill(lg, 20)
    lg.delete_records(7)
    m.shutdown()
    m = LogManager([tmp_path / "d"], cfg)
    m.startup()
    lg2 = m.get_log("t", 0)
    assert lg2 is not None and lg2.log_start_offset == 7 and lg2.log_end_offset == 20
    with pytest.raises(OffsetOutOfRange):
        lg2.read(6, 100)
    m.shutdown()
