"""The power-cut file system (kafkalite.jepsen.lazyfs) through a real FUSE mount: synced data and
names survive a crash, unsynced ones go; truncate, rename, unlink, mmap; no stale mount is left."""

from __future__ import annotations

import mmap
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkalite.jepsen.lazyfs import LazyFSMount, mounted

pytestmark = pytest.mark.skipif(
    not os.path.exists("/dev/fuse") or shutil.which("fusermount3") is None or os.geteuid() != 0,
    reason="needs /dev/fuse, fusermount3 (Debian fuse3) and root",
)


@pytest.fixture
def fs(tmp_path: Path) -> Iterator[LazyFSMount]:
    with LazyFSMount(tmp_path / "backing", tmp_path / "mnt") as m:
        yield m
    assert not mounted(tmp_path / "mnt")


def fsync_dir(d: Path) -> None:
    fd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write(p: Path, data: bytes, *, sync: bool = False, offset: int | None = None) -> None:
    fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if offset is None:
            os.lseek(fd, 0, os.SEEK_END)
            os.write(fd, data)
        else:
            os.pwrite(fd, data, offset)
        if sync:
            os.fdatasync(fd)
    finally:
        os.close(fd)


def crash_and_remount(fs: LazyFSMount) -> None:
    fs.crash()
    assert not mounted(fs.mountpoint)
    fs.mount()


def test_synced_data_stays_unsynced_goes(fs: LazyFSMount) -> None:
    m = fs.mountpoint
    write(m / "seg", b"A" * 100, sync=True)
    fsync_dir(m)
    write(m / "seg", b"B" * 50)  # appended, never synced
    write(m / "seg", b"C" * 10, offset=20)  # overwrites synced bytes, never synced
    assert (m / "seg").read_bytes() == b"A" * 20 + b"C" * 10 + b"A" * 70 + b"B" * 50
    crash_and_remount(fs)
    assert (m / "seg").read_bytes() == b"A" * 100


def test_fsync_of_another_descriptor_counts(fs: LazyFSMount) -> None:
    m = fs.mountpoint
    write(m / "f", b"x" * 10, sync=True)
    fsync_dir(m)
    write(m / "f", b"y" * 10)
    fd = os.open(m / "f", os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
    write(m / "f", b"z" * 10)
    crash_and_remount(fs)
    assert (m / "f").read_bytes() == b"x" * 10 + b"y" * 10


def test_truncate_is_undone_and_synced_truncate_stays(fs: LazyFSMount) -> None:
    m = fs.mountpoint
    write(m / "t", bytes(range(200)), sync=True)
    fsync_dir(m)
    os.truncate(m / "t", 50)
    write(m / "t", b"\xff" * 30)  # regrows over what the truncate cut
    crash_and_remount(fs)
    assert (m / "t").read_bytes() == bytes(range(200))
    os.truncate(m / "t", 64)
    fd = os.open(m / "t", os.O_RDWR)
    os.fsync(fd)
    os.close(fd)
    crash_and_remount(fs)
    assert (m / "t").read_bytes() == bytes(range(64))
    (m / "t").write_bytes(b"rewritten")  # open(O_TRUNC) and write, never synced
    crash_and_remount(fs)
    assert (m / "t").read_bytes() == bytes(range(64))


def test_create_needs_the_directory_fsync(fs: LazyFSMount) -> None:
    m = fs.mountpoint
    (m / "d").mkdir()
    fsync_dir(m)
    write(m / "d" / "kept", b"k", sync=True)
    fsync_dir(m / "d")
    write(m / "d" / "data-synced-name-not", b"n", sync=True)  # fsync of the file alone
    write(m / "d" / "never", b"v")
    (m / "lost-dir").mkdir()
    crash_and_remount(fs)
    assert sorted(os.listdir(m)) == ["d"]
    assert os.listdir(m / "d") == ["kept"]
    assert (m / "d" / "kept").read_bytes() == b"k"


def test_rename_and_unlink_without_dir_fsync_are_undone(fs: LazyFSMount) -> None:
    m = fs.mountpoint
    write(m / "checkpoint", b"old", sync=True)
    write(m / "gone", b"g", sync=True)
    fsync_dir(m)
    write(m / "checkpoint.tmp", b"new", sync=True)
    os.replace(m / "checkpoint.tmp", m / "checkpoint")
    os.unlink(m / "gone")
    assert (m / "checkpoint").read_bytes() == b"new"
    crash_and_remount(fs)
    assert sorted(os.listdir(m)) == ["checkpoint", "gone"]
    assert (m / "checkpoint").read_bytes() == b"old"
    assert (m / "gone").read_bytes() == b"g"
    # the same steps with the directory fsync (write temp, fsync, rename, fsync dir) are durable
    write(m / "checkpoint.tmp", b"new", sync=True)
    os.replace(m / "checkpoint.tmp", m / "checkpoint")
    os.unlink(m / "gone")
    fsync_dir(m)
    crash_and_remount(fs)
    assert os.listdir(m) == ["checkpoint"]
    assert (m / "checkpoint").read_bytes() == b"new"


def test_renamed_file_keeps_its_unsynced_data_rule(fs: LazyFSMount) -> None:
    m = fs.mountpoint
    write(m / "00.log", b"s" * 8, sync=True)
    fsync_dir(m)
    write(m / "00.log", b"u" * 8)
    os.rename(m / "00.log", m / "00.log.deleted")
    fsync_dir(m)  # the rename is durable, the appended bytes are not
    crash_and_remount(fs)
    assert os.listdir(m) == ["00.log.deleted"]
    assert (m / "00.log.deleted").read_bytes() == b"s" * 8


def test_mmap_reads_through_the_page_cache_and_msync_is_an_fsync(fs: LazyFSMount) -> None:
    m = fs.mountpoint
    write(m / "idx", bytes(4096), sync=True)
    fsync_dir(m)
    with open(m / "idx", "r+b") as fh:
        ro = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        os.pwrite(fh.fileno(), b"written", 0)
        assert ro[:7] == b"written"  # a write is seen through an existing read-only map
        ro.close()
        rw = mmap.mmap(fh.fileno(), 0)
        rw[100:106] = b"mapped"
        rw.flush()  # msync: written back through FUSE, and then fsynced
        rw.close()
        os.fsync(fh.fileno())
    crash_and_remount(fs)
    data = (m / "idx").read_bytes()
    assert data[100:106] == b"mapped" and data[:7] == b"written"


def test_a_failed_test_leaves_no_mount(tmp_path: Path) -> None:
    mnt = tmp_path / "mnt"
    with pytest.raises(RuntimeError, match="test failed"), LazyFSMount(tmp_path / "backing", mnt):
        write(mnt / "f", b"x")
        raise RuntimeError("test failed")
    assert not mounted(mnt)
    with open("/proc/mounts", encoding="utf-8") as fh:
        assert str(mnt) not in fh.read()


def test_topic_overrides_survive_a_power_cut(fs: LazyFSMount) -> None:
    """A broker's stored topic overrides (storage.topic_overrides) are written crash-safely: before
    the fix the rename into topic-configs/ was never made durable and a power cut took a topic's
    min.insync.replicas back to the broker default (acks=all then failed NOT_ENOUGH_REPLICAS)."""
    from kafkalite.storage.config import LogConfig
    from kafkalite.storage.topic_overrides import TopicOverrides

    d = fs.mountpoint / "topic-configs"
    TopicOverrides(d, LogConfig()).set("alone", {"min.insync.replicas": "1", "flush.messages": "1"})
    crash_and_remount(fs)
    again = TopicOverrides(d, LogConfig())
    again.load()
    assert again.get("alone") == {"flush.messages": "1", "min.insync.replicas": "1"}


def test_a_new_logs_first_flush_makes_its_directory_durable(fs: LazyFSMount) -> None:
    """With flush.messages=1 an appended batch is durable at once, its partition directory with it:
    before the fix the directory's own entry in the log dir was never synced and a power cut lost
    the whole partition, acknowledged records and all."""
    from kafkalite.records.batch import build_batch
    from kafkalite.storage import Log, LogConfig

    cfg = LogConfig(flush_messages=1)
    lg = Log.create(fs.mountpoint / "orders-0", cfg)
    lg.append(build_batch([(None, b"acked", [], 1_000)]), assign_offsets=True)
    assert lg.needs_flush
    lg.flush()
    crash_and_remount(fs)
    again = Log.open(fs.mountpoint / "orders-0", cfg)
    try:
        assert again.log_end_offset == 1
    finally:
        again.close()
