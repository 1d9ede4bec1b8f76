"""FileCache on its own (CLOCK eviction, leases, forget, resize) and the lazy indexes of segments
loaded below the recovery point (not opened or read until a lookup needs them; rebuilt if damaged)."""

from __future__ import annotations

import gc
import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from storage_helpers import batches, make_batch, read_all

from kafkalite.storage import Log, LogConfig
from kafkalite.storage.file_cache import (
    MIN_CAPACITY,
    FileCache,
    OpenFile,
    default_capacity,
    process_file_cache,
    raise_nofile_limit,
)


def fd_count() -> int:
    return len(os.listdir("/proc/self/fd"))


class _Owner:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh: OpenFile | None = None
        self.opened = 0

    def _open_fd(self) -> int:
        self.opened += 1
        return os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)


@pytest.fixture
def owners(tmp_path: Path) -> list[_Owner]:
    return [_Owner(tmp_path / f"f{i}") for i in range(10)]


def test_capacity_bounds_open_files(owners: list[_Owner]) -> None:
    cache = FileCache(3)
    base = fd_count()
    for o in owners:
        fh = cache.open(o)
        os.pwrite(fh.fd, b"x", 0)
        del fh
        assert len(cache) <= 3
        assert fd_count() <= base + 3
    assert sum(o._fh is not None for o in owners) == 3
    assert cache.evictions == len(owners) - 3


def test_second_chance_keeps_the_hot_file(owners: list[_Owner]) -> None:
    cache = FileCache(3)
    hot = owners[0]
    cache.open(hot)
    for o in owners[1:]:
        cache.open(o)
        assert hot._fh is not None  # the hot path sets the bit, never calling the cache
        hot._fh.used = True
    assert hot.opened == 1


def test_lease_outlives_eviction_and_forget(owners: list[_Owner]) -> None:
    cache = FileCache(2)
    lease = cache.open(owners[0])
    os.pwrite(lease.fd, b"leased", 0)
    base = fd_count()
    for o in owners[1:5]:
        cache.open(o)
    assert owners[0]._fh is None  # evicted: the owner forgot it ...
    assert os.pread(lease.fd, 6, 0) == b"leased"  # ... but the lease still reads the same file
    fd = lease.fd
    assert os.readlink(f"/proc/self/fd/{fd}") == str(owners[0].path)
    before = fd_count()
    del lease
    gc.collect()
    assert fd_count() == before - 1
    assert fd_count() <= base + 1


def test_forget_closes_without_lease_and_reopen_after(owners: list[_Owner]) -> None:
    cache = FileCache(4)
    o = owners[0]
    cache.open(o)
    n = fd_count()
    cache.forget(o)
    assert o._fh is None and fd_count() == n - 1
    cache.open(o)
    assert o.opened == 2 and len(cache) == 1


def test_configure_shrinks_at_once(owners: list[_Owner]) -> None:
    cache = FileCache(8)
    for o in owners[:8]:
        cache.open(o)
    base = fd_count()
    cache.configure(2)
    assert len(cache) == 2 and fd_count() == base - 6


def test_out_of_descriptors_closes_some_and_retries(owners: list[_Owner]) -> None:
    import errno

    cache = FileCache(8)
    for o in owners[:6]:
        cache.open(o)
    flaky = owners[6]
    real = flaky._open_fd
    calls = [0]

    def emfile_once() -> int:
        calls[0] += 1
        if calls[0] == 1:
            raise OSError(errno.EMFILE, "Too many open files")
        return real()

    flaky._open_fd = emfile_once  # type: ignore[method-assign]
    fh = cache.open(flaky)
    assert fh.fd >= 0 and calls[0] == 2
    assert len(cache) < 7  # some were given back
    refused = owners[7]
    refused._open_fd = lambda: (_ for _ in ()).throw(OSError(errno.EACCES, "no"))  # type: ignore[method-assign]
    with pytest.raises(PermissionError):
        cache.open(refused)


def test_default_capacity_and_rlimit() -> None:
    assert default_capacity(20_000) == (20_000 - 256) // 2
    assert default_capacity(100) == MIN_CAPACITY
    before, soft, hard = raise_nofile_limit()
    assert before <= soft and (soft == hard or hard < 0)


# -- lazy indexes -------------------------------------------------------------------------------
CFG = dict(segment_bytes=2000, index_interval_bytes=150)


@pytest.fixture
def small_cache() -> Iterator[None]:
    cache = process_file_cache()
    old = cache.capacity
    cache.configure(16)
    yield
    cache.configure(old)


def _write(path: Path, n: int) -> tuple[Log, list[bytes]]:
    lg = Log.open(path, LogConfig(**CFG))  # type: ignore[arg-type]
    values = []
    for i in range(n):
        b = make_batch(2, 40, tag=i, timestamp=1_000 + i)
        lg.append(b)
        values += [r.value for r in batches(b)[0].records]
    return lg, values


def _values(lg: Log) -> list[bytes | None]:
    return [r.value for b in batches(read_all(lg)) for r in b.records]


def test_sealed_segments_open_no_index_until_a_lookup(tmp_path: Path, small_cache: None) -> None:
    lg, values = _write(tmp_path / "lazy-0", 120)
    leo = lg.log_end_offset
    lg.close()
    lg = Log.open(tmp_path / "lazy-0", LogConfig(**CFG), recovery_point=leo)  # type: ignore[arg-type]
    sealed = lg.segments[:-1]
    assert len(sealed) >= 4
    for s in sealed:
        assert not s.offset_index.loaded and not s.time_index.loaded
        assert not s.offset_index._file.is_open and not s.time_index._file.is_open
    # the lazily found ends and max timestamps match what a full scan finds
    assert [s.next_offset for s in sealed] == [s.base_offset for s in lg.segments[1:]]
    mid = sealed[2]
    info = lg.read(mid.base_offset + 3, 100)
    assert info.slice is not None
    assert mid.offset_index.loaded
    assert not sealed[1].offset_index.loaded and not sealed[3].offset_index.loaded
    found = lg.offset_for_timestamp(1_000 + 40)
    assert found is not None and found[1] == 1_040
    assert _values(lg) == values
    lg.close()


def test_damaged_lazy_index_is_rebuilt_on_first_lookup(
    tmp_path: Path, small_cache: None, caplog: pytest.LogCaptureFixture
) -> None:
    lg, values = _write(tmp_path / "dmg-0", 120)
    leo = lg.log_end_offset
    seg = lg.segments[1]
    index_path, base = seg.offset_index.path, seg.base_offset
    lg.close()
    data = bytearray(index_path.read_bytes())
    assert len(data) >= 24
    data[8:16] = b"\x00\x00\x00\x00\x00\x00\x00\x00"  # entry 1: offset 0, position 0 (out of order)
    index_path.write_bytes(bytes(data))
    lg = Log.open(tmp_path / "dmg-0", LogConfig(**CFG), recovery_point=leo)  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING, logger="kafkalite.storage.log"):
        info = lg.read(base + 5, 100)
    assert info.slice is not None
    assert any("rebuilding indexes" in r.message for r in caplog.records)
    assert _values(lg) == values
    lg.close()
    rebuilt = index_path.read_bytes()
    assert len(rebuilt) % 8 == 0 and rebuilt != bytes(data)
