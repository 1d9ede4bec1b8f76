"""Moving a partition's log between log dirs while it is written (AlterReplicaLogDirs): the data moved
is byte-identical, appends during the move are not lost, the old dir goes, a restart finds it moved.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from storage_helpers import make_batch, read_all

from kafkalite.storage import LogConfig, LogManager
from kafkalite.storage.errors import KafkaStorageError, LogDirNotFound
from kafkalite.storage.log_dir_move import FUTURE_DIR_SUFFIX


def _manager(tmp_path: Path) -> LogManager:
    m = LogManager(
        [tmp_path / "a", tmp_path / "b"],
        LogConfig(segment_bytes=8192, file_delete_delay_ms=0),
        cleaner_enable=False,
    )
    m.startup()
    return m


def test_move_while_appending_keeps_every_batch(tmp_path: Path) -> None:
    m = _manager(tmp_path)
    lg = m.get_or_create_log("t", 0)
    assert m.log_dir_of("t", 0) == tmp_path / "a"
    for i in range(300):  # several segments
        lg.append_as_leader(make_batch(3, 50, tag=i), 0)
    lg.update_high_watermark(lg.log_end_offset)
    before = read_all(lg)
    assert m.alter_log_dir("t", 0, str(tmp_path / "b")) is True
    futures = [p.name for p in (tmp_path / "b").iterdir() if p.name.endswith(FUTURE_DIR_SUFFIX)]
    assert len(futures) == 1 and futures[0].startswith("t-0.")
    stop = threading.Event()
    appended = [0]

    def writer() -> None:
        i = 1000
        while not stop.is_set():
            lg.append_as_leader(make_batch(2, 40, tag=i), 0)
            appended[0] += 1
            i += 1

    t = threading.Thread(target=writer)
    t.start()
    try:
        moved = 0
        while not moved:
            moved = m.run_moves_once(budget_bytes=16 * 1024)  # small steps: appends interleave
    finally:
        stop.set()
        t.join()
    assert appended[0] > 0
    assert m.get_log("t", 0) is lg  # the same object serves on, from the new dir
    assert lg.dir == tmp_path / "b" / "t-0" and m.log_dir_of("t", 0) == tmp_path / "b"
    assert not m.moves()
    lg.append_as_leader(make_batch(1, 10, tag=9999), 0)  # and takes appends after the move
    expected_end = (300 * 3) + appended[0] * 2 + 1
    assert lg.log_end_offset == expected_end
    data = read_all(lg)
    assert data.startswith(before) and len(data) > len(before)
    m.remove_deleted_files(force=True)
    assert not (tmp_path / "a" / "t-0").exists()
    assert [p.name for p in (tmp_path / "a").iterdir() if p.name.startswith("t-0")] == []
    m.shutdown()
    again = _manager(tmp_path)
    back = again.get_log("t", 0)
    assert back is not None and back.dir.parent == tmp_path / "b"
    assert back.log_end_offset == expected_end and read_all(back) == data
    again.shutdown()


def test_bad_requests(tmp_path: Path) -> None:
    m = _manager(tmp_path)
    m.get_or_create_log("t", 0)
    with pytest.raises(LogDirNotFound):
        m.alter_log_dir("t", 0, str(tmp_path / "elsewhere"))
    # not created yet: the dir is remembered for when it is
    assert m.alter_log_dir("t", 1, str(tmp_path / "a")) is False
    m.get_or_create_log("t", 2)  # b now the emptier dir... but t-1 was asked into a
    assert m.get_or_create_log("t", 1).dir.parent == tmp_path / "a"
    # its current dir: nothing to do; asking back cancels a move in flight
    assert m.alter_log_dir("t", 0, str(tmp_path / "a")) is True and not m.moves()
    m.alter_log_dir("t", 0, str(tmp_path / "b"))
    assert set(m.moves()) == {("t", 0)}
    m.alter_log_dir("t", 0, str(tmp_path / "a"))
    assert not m.moves()
    assert not [p for p in (tmp_path / "b").iterdir() if p.name.endswith(FUTURE_DIR_SUFFIX)]
    m.fail_log_dir(tmp_path / "b", OSError(5, "EIO"), "test")
    with pytest.raises(KafkaStorageError):
        m.alter_log_dir("t", 0, str(tmp_path / "b"))
    m.shutdown()


def test_unfinished_move_resumes_after_a_restart(tmp_path: Path) -> None:
    m = _manager(tmp_path)
    lg = m.get_or_create_log("t", 0)
    for i in range(20):
        lg.append_as_leader(make_batch(2, 20, tag=i), 0)
    data = read_all(lg)
    m.alter_log_dir("t", 0, str(tmp_path / "b"))
    m.moves()[("t", 0)].copy_step(max_bytes=100)
    m.shutdown()
    again = _manager(tmp_path)
    assert set(again.moves()) == {("t", 0)}  # picked up where the copy was
    while not again.run_moves_once():
        pass
    back = again.get_log("t", 0)
    assert back is not None and back.dir == tmp_path / "b" / "t-0"
    assert back.log_end_offset == 40 and read_all(back) == data
    again.shutdown()


def test_crash_between_the_renames_keeps_the_complete_copy(tmp_path: Path) -> None:
    m = _manager(tmp_path)
    lg = m.get_or_create_log("t", 0)
    for i in range(20):
        lg.append_as_leader(make_batch(2, 20, tag=i), 0)
    data = read_all(lg)
    m.alter_log_dir("t", 0, str(tmp_path / "b"))
    mv = m.moves()[("t", 0)]
    while not mv.copy_step():
        pass
    mv.future.flush()
    fut_dir = mv.future.dir
    m.shutdown()  # then the state a crash after the first rename of finish() leaves:
    (tmp_path / "a" / "t-0").rename(tmp_path / "a" / "t-0.0123-delete")
    assert fut_dir.is_dir()
    again = _manager(tmp_path)
    back = again.get_log("t", 0)
    assert back is not None and back.dir == tmp_path / "b" / "t-0" and not again.moves()
    assert read_all(back) == data
    assert sorted(p.name for p in (tmp_path / "a").iterdir() if p.name.startswith("t-")) == []
    again.shutdown()
