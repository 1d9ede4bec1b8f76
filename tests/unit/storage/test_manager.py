"""LogManager: dirs, loading, topic overrides under Kafka property names, checkpoints, topic deletion,
background retention/flush/cleaner threads, shutdown."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from storage_helpers import batches, make_batch, read_all

from kafkalite.records.batch import build_batch
from kafkalite.storage import Log, LogConfig, LogManager
from kafkalite.storage.checkpoint import OffsetCheckpointFile
from kafkalite.storage.errors import InvalidConfig, KafkaStorageError, LogClosed


def test_create_reload_and_overrides(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    m = LogManager(dirs, LogConfig(segment_bytes=4096))
    m.startup()
    for p in range(4):
        lg = m.get_or_create_log("orders", p, {"retention.ms": "1234", "cleanup.policy": "compact"})
        lg.append(make_batch(p + 1))
    assert m.get_or_create_log("orders", 0) is m.get_log("orders", 0)
    assert m.get_log("orders", 9) is None
    assert {d.name for d in dirs} == {lg.dir.parent.name for lg in m.logs()}  # spread over dirs
    assert m.topic_config("orders").retention_ms == 1234
    assert m.topic_config("orders").segment_bytes == 4096  # broker default kept
    with pytest.raises(InvalidConfig):
        m.set_topic_config("orders", {"retention.ms": "soon"})
    m.update_topic_config("orders", {"retention.ms": None, "max.message.bytes": "5000"})
    assert m.topic_config_overrides("orders") == {
        "cleanup.policy": "compact",
        "max.message.bytes": "5000",
    }
    lg0 = m.get_log("orders", 0)
    assert lg0 is not None and lg0.config.max_message_bytes == 5000
    m.shutdown()
    props = (dirs[0] / "topic-configs" / "orders.properties").read_text()
    assert "max.message.bytes=5000" in props and "cleanup.policy=compact" in props

    m = LogManager(dirs, LogConfig(segment_bytes=4096))
    m.startup()
    assert sorted((lg.topic, lg.partition, lg.log_end_offset) for lg in m.logs()) == [
        ("orders", p, p + 1) for p in range(4)
    ]
    lg0 = m.get_log("orders", 0)
    assert lg0 is not None and lg0.config.compact and lg0.config.max_message_bytes == 5000
    rp = OffsetCheckpointFile(dirs[0] / "recovery-point-offset-checkpoint").read()
    rp.update(OffsetCheckpointFile(dirs[1] / "recovery-point-offset-checkpoint").read())
    assert rp == {("orders", p): p + 1 for p in range(4)}
    m.shutdown()


def test_dir_lock(tmp_path: Path) -> None:
    m = LogManager([tmp_path / "d"])
    m.startup()
    other = LogManager([tmp_path / "d"])
    with pytest.raises(KafkaStorageError):
        other.startup()
    m.shutdown()
    other = LogManager([tmp_path / "d"])
    other.startup()
    other.shutdown()


def test_delete_topic(tmp_path: Path) -> None:
    m = LogManager([tmp_path / "d"], LogConfig(file_delete_delay_ms=0))
    m.startup()
    for p in range(3):
        m.get_or_create_log("gone", p, {"retention.ms": "5"}).append(make_batch(1))
    m.get_or_create_log("kept", 0).append(make_batch(1))
    gone0 = m.get_log("gone", 0)
    assert gone0 is not None
    in_flight = gone0.read(0, 1 << 20).slice
    assert in_flight is not None
    before = in_flight.read_bytes()
    assert m.delete_topic("gone") == [0, 1, 2]
    assert in_flight.read_bytes() == before  # a fetch already answered can still be sent
    with pytest.raises(LogClosed):
        gone0.append(make_batch(1))
    assert m.get_log("gone", 1) is None and m.topics() == {"kept"}
    assert m.topic_config_overrides("gone") == {}
    assert any(n.endswith("-delete") for n in os.listdir(tmp_path / "d"))
    m.remove_deleted_files()  # within the 1 s descriptor grace: still there
    assert any(n.endswith("-delete") for n in os.listdir(tmp_path / "d"))
    m.remove_deleted_files(now=m.clock() + 1001)
    assert sorted(os.listdir(tmp_path / "d")) == sorted(
        [
            ".lock",
            "kept-0",
            "topic-configs",
            "recovery-point-offset-checkpoint",
            "replication-offset-checkpoint",
            "log-start-offset-checkpoint",
            "cleaner-offset-checkpoint",
        ]
    )
    # re-created topics start empty
    assert m.get_or_create_log("gone", 0).log_end_offset == 0
    m.shutdown()


def test_recovery_point_checkpoint_limits_recovery(tmp_path: Path) -> None:
    cfg = LogConfig(segment_bytes=1000)
    m = LogManager([tmp_path / "d"], cfg)
    m.startup()
    lg = m.get_or_create_log("t", 0)
    for i in range(30):
        lg.append(make_batch(1, value_size=100, tag=i))
    lg.flush()
    m.checkpoint()
    first = lg.segments[0]
    path = first.log_path
    m.shutdown()
    # damage an old (flushed, checkpointed) segment's *index* only: it is rebuilt, data intact
    (path.with_suffix(".index")).write_bytes(b"\xff" * 16)
    m = LogManager([tmp_path / "d"], cfg)
    m.startup()
    lg2 = m.get_log("t", 0)
    assert lg2 is not None and lg2.log_end_offset == 30
    assert [(r.value or b"")[:4] for b in batches(read_all(lg2)) for r in b.records][:3] == [
        b"0:0:",
        b"1:0:",
        b"2:0:",
    ]
    m.shutdown()


def test_clean_shutdown_scans_nothing_and_a_crash_scans_the_active_segment(
    tmp_path: Path,
) -> None:
    cfg = LogConfig(segment_bytes=1000)
    m = LogManager([tmp_path / "d"], cfg)
    m.startup()
    for p in range(3):
        lg = m.get_or_create_log("t", p)
        for i in range(25):
            lg.append(make_batch(1, value_size=100, tag=i))
    m.shutdown()
    m = LogManager([tmp_path / "d"], cfg)
    m.startup()
    assert m.last_shutdown_clean
    logs = [m.get_log("t", p) for p in range(3)]
    assert [lg.recovery.segments_scanned for lg in logs if lg is not None] == [0, 0, 0]
    assert [lg.log_end_offset for lg in logs if lg is not None] == [25, 25, 25]
    # appends after the last flush, then a crash (no close, no clean-shutdown marker): the active
    # segment is scanned and its torn tail cut
    lg = logs[0]
    assert lg is not None
    lg.append(make_batch(1, value_size=100, tag=99))
    with open(lg.segments[-1].log_path, "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x1a\x00\x00\x01")  # a torn batch header
    # (the process "dies": the manager is never shut down; the log is opened again as at startup)
    reopened = Log.open(lg.dir, cfg, recovery_point=25)
    assert reopened.recovery.segments_scanned == 1
    assert reopened.recovery.bytes_truncated == 11
    assert reopened.log_end_offset == 26
    reopened.close()


def test_background_threads(tmp_path: Path) -> None:
    m = LogManager(
        [tmp_path / "d"],
        LogConfig(segment_bytes=600, file_delete_delay_ms=0),
        retention_check_interval_ms=20,
        flush_check_interval_ms=20,
        checkpoint_interval_ms=20,
        cleaner_backoff_ms=20,
        file_delete_check_interval_ms=20,
    )
    m.startup()
    m.start_background()
    try:
        old = m.get_or_create_log("old", 0, {"retention.ms": "1000"})
        for i in range(20):
            old.append(make_batch(1, value_size=100, timestamp=1000 + i))
        old.update_high_watermark(old.log_end_offset)
        lazy = m.get_or_create_log("lazy", 0, {"flush.ms": "10"})
        lazy.append(make_batch(3))
        compacted = m.get_or_create_log(
            "cmp", 0, {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"}
        )
        for i in range(60):
            compacted.append(build_batch([(b"k%d" % (i % 3), b"v%d" % i)]))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            done = (
                len(old.segments) == 1
                and lazy.recovery_point == 3
                and compacted.first_dirty_offset > 0
                and not any(n.endswith(".deleted") for n in os.listdir(old.dir))
            )
            if done:
                break
            time.sleep(0.02)
        assert len(old.segments) == 1 and old.log_start_offset == old.active_segment.base_offset
        assert lazy.recovery_point == 3
        assert compacted.first_dirty_offset > 0
        values = [(r.key, r.value) for b in batches(read_all(compacted)) for r in b.records]
        assert len(values) < 60
    finally:
        m.shutdown()
    assert not any(t.is_alive() for t in m._threads)
    cp = OffsetCheckpointFile(tmp_path / "d" / "log-start-offset-checkpoint").read()
    assert cp[("old", 0)] > 0


def test_shutdown_right_after_a_delete_writes_nothing_into_the_renamed_dir(tmp_path: Path) -> None:
    """A partition deleted (StopReplica, delete) just before a shutdown: its index entries not yet
    written are dropped, not written to the old path, and the shutdown still ends clean."""
    m = LogManager([tmp_path / "d"], LogConfig(index_interval_bytes=1))
    m.startup()
    lg = m.get_or_create_log("moved", 0)
    for _ in range(20):  # an index entry per batch, pending in memory
        lg.append(make_batch(3))
    assert m.delete_log("moved", 0)
    m.shutdown()  # removes the renamed dir at once
    assert not (tmp_path / "d" / "moved-0").exists()
    assert not any(n.endswith("-delete") for n in os.listdir(tmp_path / "d"))
    assert (tmp_path / "d" / ".kafka_cleanshutdown").exists()
