"""The clean-shutdown manifest: a clean restart takes every log up from it without opening a file,
and what it serves is what loading the same logs from their files gives (checked side by side)."""

from __future__ import annotations

import logging
import os
import shutil
import uuid
from pathlib import Path

import pytest
from storage_helpers import read_all

from kafkalite.records.builder import build_batch
from kafkalite.records.header import set_base_offset
from kafkalite.storage import Log
from kafkalite.storage.log_manifest import MANIFEST_FILE
from kafkalite.storage.manager import CLEAN_SHUTDOWN_FILE, LogManager

SMALL = {"segment.bytes": "600", "index.interval.bytes": "100"}


def batch(*values: bytes, pid: int = -1, seq: int = -1, txn: bool = False, ts: int = 1000) -> bytes:
    return build_batch(
        [(None, v, [], ts + i) for i, v in enumerate(values)],
        producer_id=pid,
        producer_epoch=0 if pid >= 0 else -1,
        base_sequence=seq,
        is_transactional=txn,
    )


def fill(lm: LogManager) -> None:
    """Logs of every shape: many segments with epochs and an idempotent producer, an open
    transaction, an aborted one, an empty log, and one whose start was moved by DeleteRecords."""
    many = lm.get_or_create_log("many", 0, SMALL)
    many.begin_leader_epoch(0)
    for i in range(40):
        if i == 25:
            many.begin_leader_epoch(3)
        many.append(
            batch(b"v%03d" % i, b"w" * 50, pid=7, seq=2 * i, ts=1000 + 10 * i),
            leader_epoch=3 if i >= 25 else 0,
        )
    many.update_high_watermark(many.log_end_offset - 5)
    txn = lm.get_or_create_log("txn", 0)
    txn.append(batch(b"a", pid=9, seq=0, txn=True))
    txn.append_control_marker(9, 0, 0, commit=False, leader_epoch=0)
    txn.append(batch(b"b", b"c", pid=11, seq=0, txn=True))  # still open at the shutdown
    txn.update_high_watermark(txn.log_end_offset)
    lm.get_or_create_log("empty", 0)
    cut = lm.get_or_create_log("cut", 1, SMALL)
    for i in range(20):
        cut.append(batch(b"x" * 100, ts=5000 + i))
    cut.update_high_watermark(cut.log_end_offset)
    cut.delete_records(12)


def view(lg: Log) -> tuple[object, ...]:
    """Everything a client or a replica can learn from the log."""
    return (
        lg.log_start_offset,
        lg.log_end_offset,
        lg.high_watermark,
        lg.last_stable_offset,
        lg.leader_epoch_cache.entries(),
        [s.state() for s in lg.segments],
        read_all(lg),
        [lg.offset_for_timestamp(t) for t in (0, 1005, 1200, 1390, 5010, 10**12)],
        lg.ongoing_transactions(),
        lg.collect_aborted_transactions(0, lg.log_end_offset),
        sorted((pid, e.last_seq) for pid, e in lg.producer_state.entries()),
    )


def start(d: Path) -> LogManager:
    lm = LogManager([d], clock=lambda: 1_700_000_000_000)  # (markers carry the clock's time)
    lm.startup()
    return lm


def test_a_clean_restart_restores_every_log_as_its_files_would(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    d = tmp_path / "a"
    lm = start(d)
    fill(lm)
    lm.shutdown()
    assert (d / MANIFEST_FILE).exists() and (d / CLEAN_SHUTDOWN_FILE).exists()
    files = tmp_path / "b"
    shutil.copytree(d, files)
    (files / MANIFEST_FILE).unlink()  # the same clean shutdown, loaded from the files
    with caplog.at_level(logging.INFO, logger="kafkalite.storage.manager"):
        restored, loaded = start(d), start(files)
    assert "loaded 4 logs (4 from the clean-shutdown manifest)" in caplog.text
    assert "loaded 4 logs (0 from the clean-shutdown manifest)" in caplog.text
    assert not (d / MANIFEST_FILE).exists()  # it describes one moment only
    try:
        for tp in [("many", 0), ("txn", 0), ("empty", 0), ("cut", 1)]:
            a, b = restored.get_log(*tp), loaded.get_log(*tp)
            assert a is not None and b is not None
            assert view(a) == view(b), tp
        assert restored.get_log("txn", 0).last_stable_offset == 2  # type: ignore[union-attr]
        # both go on the same way: a retried batch is recognised, new ones indexed and rolled
        for lm_ in (restored, loaded):
            many = lm_.get_log("many", 0)
            assert many is not None
            again = many.append(batch(b"v039", b"w" * 50, pid=7, seq=78, ts=1390), leader_epoch=3)
            assert again.first_offset == many.log_end_offset - 2
            for i in range(40, 50):
                many.append(
                    batch(b"v%03d" % i, b"w" * 50, pid=7, seq=2 * i, ts=1000 + 10 * i),
                    leader_epoch=3,
                )
            many.update_high_watermark(many.log_end_offset)
            txn = lm_.get_log("txn", 0)
            assert txn is not None
            txn.append_control_marker(11, 0, 0, commit=True, leader_epoch=0)
            txn.update_high_watermark(txn.log_end_offset)
            empty = lm_.get_log("empty", 0)  # (never written: its segment file did not exist)
            assert empty is not None
            empty.append(batch(b"first"))
            empty.update_high_watermark(empty.log_end_offset)
        for tp in [("many", 0), ("txn", 0), ("empty", 0)]:
            assert view(restored.get_log(*tp)) == view(loaded.get_log(*tp))  # type: ignore[arg-type]
    finally:
        restored.shutdown()
        loaded.shutdown()


def test_a_restored_log_reads_no_index_until_asked_and_writes_the_same_manifest(
    tmp_path: Path,
) -> None:
    """Restoring makes no index object (100,000 partitions: 200,000 objects never used); a
    segment closed untouched is written into the next manifest exactly as it was read."""
    d = tmp_path / "a"
    lm = start(d)
    fill(lm)
    lm.shutdown()
    first = sorted((d / MANIFEST_FILE).read_text().splitlines())
    lm = start(d)
    sealed = [s for lg in lm.logs() for s in lg.segments[:-1]]
    assert len(sealed) > 10
    assert not any("offset_index" in vars(s) or "time_index" in vars(s) for s in sealed)
    many = lm.get_log("many", 0)
    assert many is not None
    assert many.offset_for_timestamp(1100) is not None  # a lookup loads the indexes it needs
    lm.shutdown()
    assert sorted((d / MANIFEST_FILE).read_text().splitlines()) == first


def test_a_restart_after_a_crash_ignores_a_manifest(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    d = tmp_path / "a"
    lm = start(d)
    lg = lm.get_or_create_log("t", 0)
    lg.append(batch(b"one"))
    lm.shutdown()
    (d / CLEAN_SHUTDOWN_FILE).unlink()  # as after kill -9 of the next run, which wrote more:
    two = bytearray(batch(b"two"))  # (a batch the manifest does not know, at offset 1)
    set_base_offset(two, 0, 1)
    with open(d / "t-0" / "00000000000000000000.log", "ab") as f:
        f.write(two)
    with caplog.at_level(logging.INFO, logger="kafkalite.storage.manager"):
        lm = start(d)
    try:
        assert "(0 from the clean-shutdown manifest)" in caplog.text
        assert not (d / MANIFEST_FILE).exists()
        assert lm.get_log("t", 0).log_end_offset == 2  # type: ignore[union-attr]
    finally:
        lm.shutdown()


def test_a_damaged_manifest_or_entry_loads_the_logs_from_their_files(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    d = tmp_path / "a"
    lm = start(d)
    for p in range(2):
        lm.get_or_create_log("t", p).append(batch(b"x", b"y"))
    lm.shutdown()
    lines = (d / MANIFEST_FILE).read_text().splitlines()
    (d / MANIFEST_FILE).write_text(lines[0] + "\n" + lines[1] + "\n")  # one entry short
    with caplog.at_level(logging.WARNING):
        lm = start(d)
    assert "ignoring malformed" in caplog.text
    assert [lm.get_log("t", p).log_end_offset for p in range(2)] == [2, 2]  # type: ignore[union-attr]
    lm.shutdown()
    # an entry whose offsets do not hold together: that log alone is loaded from its files
    text = (d / MANIFEST_FILE).read_text().replace('"t-1",null,0,2,', '"t-1",null,0,7,')
    (d / MANIFEST_FILE).write_text(text)
    caplog.clear()
    with caplog.at_level(logging.INFO):
        lm = start(d)
    try:
        assert "manifest entry unusable" in caplog.text
        assert "(1 from the clean-shutdown manifest)" in caplog.text
        assert [lm.get_log("t", p).log_end_offset for p in range(2)] == [2, 2]  # type: ignore[union-attr]
    finally:
        lm.shutdown()


def test_creating_a_partition_makes_one_small_file(tmp_path: Path) -> None:
    lm = start(tmp_path)
    try:
        lg = lm.get_or_create_log("t", 0, topic_id=uuid.uuid4())
        lg.begin_leader_epoch(0)
        assert os.listdir(tmp_path / "t-0") == ["partition.metadata"]
        lg.append(batch(b"x"))
        lg.flush()  # the first flush writes the deferred epoch checkpoint
        assert {"00000000000000000000.log", "leader-epoch-checkpoint"} <= set(
            os.listdir(tmp_path / "t-0")
        )
    finally:
        lm.shutdown()


def test_a_shutdown_of_many_logs_syncs_each_file_system_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import kafkalite.storage.log_dirs as manager  # (where a shutdown closes and syncs the logs)

    synced: list[Path] = []
    real = manager.sync_file_system

    def sync(path: Path) -> None:
        synced.append(path)
        real(path)

    fsyncs: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(manager, "SYNC_EACH_LOG_UP_TO", 2)
    monkeypatch.setattr(manager, "sync_file_system", sync)
    lm = start(tmp_path)
    for p in range(5):
        lm.get_or_create_log("t", p).append(batch(b"x%d" % p))
    monkeypatch.setattr(os, "fsync", lambda fd: fsyncs.append(fd) or real_fsync(fd))
    lm.shutdown()
    monkeypatch.undo()
    assert synced == [tmp_path]
    # the logs' own files were not fsynced one by one (4 checkpoints and their dir, the manifest)
    assert len(fsyncs) <= 9, len(fsyncs)
    lm = start(tmp_path)
    try:
        for p in range(5):
            lg = lm.get_log("t", p)
            assert lg is not None and lg.log_end_offset == 1
            assert b"x%d" % p in read_all(lg)
    finally:
        lm.shutdown()
