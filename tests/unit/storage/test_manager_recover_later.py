"""Logs recovered after startup (a crash restart of many partitions serves while they load): until
recovered each keeps its checkpointed offsets, asking for one loads that one at once (never a new,
empty log in its place), and a shutdown before the end leaves no clean-shutdown marker."""

from __future__ import annotations

import threading
from pathlib import Path

from storage_helpers import make_batch, read_all

from kafkalite.storage import LogManager
from kafkalite.storage.checkpoint import LOG_START_OFFSET_CHECKPOINT, OffsetCheckpointFile
from kafkalite.storage.log_manifest import MANIFEST_FILE
from kafkalite.storage.manager import CLEAN_SHUTDOWN_FILE


def _crashed_dir(d: Path) -> dict[tuple[str, int], bytes]:
    """Logs of `fast` and `slow` (4 partitions each), written, then left as a crash leaves them
    (no clean-shutdown marker, no manifest); returns every log's bytes."""
    lm = LogManager([d])
    lm.startup()
    for topic in ("fast", "slow"):
        for p in range(4):
            lg = lm.get_or_create_log(topic, p)
            for i in range(3 + p):
                lg.append(make_batch(2, tag=i))
            lg.update_high_watermark(lg.log_end_offset)
    lm.get_log("slow", 1).delete_records(4)  # type: ignore[union-attr]
    data = {tp: read_all(lg) for tp, lg in lm.partitions().items()}
    lm.shutdown()
    (d / CLEAN_SHUTDOWN_FILE).unlink()
    (d / MANIFEST_FILE).unlink()
    return data


def _slow(tp: tuple[str, int]) -> bool:
    return tp[0] == "slow"


def test_logs_left_for_later_serve_as_they_are_recovered(tmp_path: Path) -> None:
    d = tmp_path / "d"
    data = _crashed_dir(d)
    lm = LogManager([d])
    lm.startup(later=_slow)
    try:
        assert sorted(lm.partitions()) == [("fast", p) for p in range(4)]
        assert lm.loading_partitions() == {("slow", p) for p in range(4)}
        assert lm.is_loading("slow", 2) and not lm.is_loading("fast", 2)
        # the checkpoints written meanwhile keep what the logs not loaded yet were found with
        lm.checkpoint()
        starts = OffsetCheckpointFile(d / LOG_START_OFFSET_CHECKPOINT).read()
        assert starts[("slow", 1)] == 4
        # asking for one recovers that one now: its own data, not a new empty log
        asked = lm.get_or_create_log("slow", 3)
        assert read_all(asked) == data[("slow", 3)] and asked.log_start_offset == 0
        assert not lm.is_loading("slow", 3)
        assert lm.delete_log("slow", 0)  # recovered, then deleted as any log
        batches: list[list[str]] = []
        finished = threading.Event()
        t = lm.load_later(
            lambda logs: batches.append([lg.dir.name for lg in logs]), finished.set, batch=1
        )
        t.join(10)
        assert finished.is_set()
        names = sorted(n for chunk in batches for n in chunk)
        assert names == ["slow-1", "slow-2"]  # (3 was asked for, 0 deleted)
        assert not lm.loading_partitions()
        for tp, blob in data.items():
            if tp == ("slow", 0):
                assert lm.get_log(*tp) is None
                continue
            lg = lm.get_log(*tp)
            assert lg is not None
            assert read_all(lg) == blob, tp
        assert lm.get_log("slow", 1).log_start_offset == 4  # type: ignore[union-attr]
    finally:
        lm.shutdown()
    assert (d / CLEAN_SHUTDOWN_FILE).exists()  # every log was recovered and closed


def test_a_shutdown_before_every_log_is_recovered_leaves_them_to_the_next_start(
    tmp_path: Path,
) -> None:
    d = tmp_path / "d"
    data = _crashed_dir(d)
    lm = LogManager([d])
    lm.startup(later=_slow)
    lm.get_log("fast", 0).append(make_batch(1, tag=99))  # type: ignore[union-attr]
    lm.shutdown()
    assert not (d / CLEAN_SHUTDOWN_FILE).exists()  # the slow logs were never recovered
    assert OffsetCheckpointFile(d / LOG_START_OFFSET_CHECKPOINT).read()[("slow", 1)] == 4
    again = LogManager([d])
    again.startup()
    try:
        assert not again.last_shutdown_clean
        for p in range(4):
            lg = again.get_log("slow", p)
            assert lg is not None
            assert read_all(lg) == data[("slow", p)]
        assert again.get_log("slow", 1).log_start_offset == 4  # type: ignore[union-attr]
        assert again.get_log("fast", 0).log_end_offset == 7  # type: ignore[union-attr]
    finally:
        again.shutdown()


def test_too_few_to_leave_for_later_are_recovered_at_startup(tmp_path: Path) -> None:
    d = tmp_path / "d"
    _crashed_dir(d)
    lm = LogManager([d])
    lm.startup(later=_slow, later_from=5)  # (4 slow logs: not worth serving before them)
    try:
        assert not lm.loading_partitions() and len(lm.partitions()) == 8
    finally:
        lm.shutdown()
