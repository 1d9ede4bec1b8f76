"""Many partitions behind a tiny FileCache (16 files): append, read, roll, truncate, retention,
compaction and recovery stay correct while the process's descriptors stay <= the cache + a constant."""

from __future__ import annotations

import gc
import os
import random
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from storage_helpers import batches, crash, make_batch, read_all

from kafkalite.records.batch import build_batch
from kafkalite.storage import Log, LogCleaner, LogConfig, LogManager
from kafkalite.storage.file_cache import process_file_cache

CACHE = 16
# descriptors besides the cache's: a dir lock, a directory fsync, a checkpoint or snapshot being
# written, listdir's own
SLACK = 6
CFG = dict(segment_bytes=500, index_interval_bytes=100)


def fd_count() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.fixture
def tiny_cache() -> Iterator[int]:
    """The process cache at 16 files; yields the descriptor count with nothing of ours open."""
    cache = process_file_cache()
    old = cache.capacity
    cache.configure(CACHE)
    gc.collect()
    base = fd_count() - len(cache)
    yield base
    cache.configure(old)


@pytest.fixture
def tmp_path() -> Iterator[Path]:
    """On tmpfs when there is one: these tests count descriptors, and fsyncs of hundreds of
    logs on a shared disk would only make them slow."""
    root = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    d = Path(tempfile.mkdtemp(prefix="kafkalite-fd-cache-", dir=root))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _bound(base: int) -> int:
    return base + CACHE + SLACK


def _values(lg: Log) -> list[bytes | None]:
    return [r.value for b in batches(read_all(lg)) for r in b.records]


def _val(p: int, i: int) -> bytes:
    return b"p%d-r%d:" % (p, i) + b"v" * 50


def test_300_partitions_several_segments_each(tmp_path: Path, tiny_cache: int) -> None:
    base = tiny_cache
    mgr = LogManager(
        [tmp_path],
        LogConfig(**CFG),
        open_files_max=CACHE,
        cleaner_enable=False,  # type: ignore[arg-type]
    )
    mgr.startup()
    parts = 300
    expected: dict[int, list[bytes]] = {p: [] for p in range(parts)}
    peak = 0
    for i in range(12):
        for p in range(parts):
            lg = mgr.get_or_create_log("many", p)
            v = _val(p, i)
            lg.append(build_batch([(None, v, [], 1_000 + i)]))
            expected[p].append(v)
            if p % 25 == 0:
                peak = max(peak, fd_count())
    assert peak <= _bound(base), f"{peak - base} descriptors for {parts} partitions"
    assert all(len(mgr.get_log("many", p).segments) >= 3 for p in range(parts))  # type: ignore[union-attr]
    for p in range(0, parts, 7):
        lg = mgr.get_log("many", p)
        assert lg is not None
        assert _values(lg) == expected[p]
        assert fd_count() <= _bound(base)
    # follower truncation and retention (DeleteRecords and retention.bytes) under churn
    for p in range(0, parts, 3):
        lg = mgr.get_log("many", p)
        assert lg is not None
        lg.truncate_to(9)
        expected[p] = expected[p][:9]
        lg.update_high_watermark(lg.log_end_offset)
        lg.delete_records(4)
        assert _values(lg)[-5:] == expected[p][4:]
    for lg in mgr.logs():
        lg.update_high_watermark(lg.log_end_offset)  # retention deletes only below it
    mgr.set_topic_config("many", {"retention.bytes": "300"})
    mgr.cleanup_logs()
    mgr.remove_deleted_files(force=True)
    for p in range(1, parts, 3):
        lg = mgr.get_log("many", p)
        assert lg is not None and lg.log_start_offset > 0
        got = _values(lg)
        # whole batches from the one holding the log start: the tail of what was written
        assert got == expected[p][len(expected[p]) - len(got) :]
        assert fd_count() <= _bound(base)
    starts = {p: mgr.get_log("many", p).log_start_offset for p in range(parts)}  # type: ignore[union-attr]
    served = {p: _values(mgr.get_log("many", p)) for p in range(parts)}  # type: ignore[arg-type]
    mgr.shutdown()
    # clean restart: sealed segments' indexes stay unopened; everything reads back
    mgr = LogManager(
        [tmp_path],
        LogConfig(**CFG),
        open_files_max=CACHE,
        cleaner_enable=False,  # type: ignore[arg-type]
    )
    mgr.startup()
    assert fd_count() <= _bound(base)
    for p in range(parts):
        lg = mgr.get_log("many", p)
        assert lg is not None and lg.log_start_offset == starts[p]
        got = _values(lg)
        assert got == served[p] == expected[p][len(expected[p]) - len(got) :]
        assert got or lg.log_start_offset == lg.log_end_offset
        assert fd_count() <= _bound(base)
    mgr.shutdown()
    assert fd_count() <= base + SLACK


def test_crash_recovery_of_many_logs(tmp_path: Path, tiny_cache: int) -> None:
    base = tiny_cache
    logs = [Log.open(tmp_path / f"crash-{p}", LogConfig(**CFG)) for p in range(120)]  # type: ignore[arg-type]
    expected: dict[int, list[bytes]] = {}
    for p, lg in enumerate(logs):
        expected[p] = [_val(p, i) for i in range(10)]
        for v in expected[p]:
            lg.append(build_batch([(None, v, [], 1_000)]))
        if p % 2:
            lg.flush()
    rps = [lg.recovery_point for lg in logs]
    for lg in logs:
        crash(lg)
    gc.collect()
    assert fd_count() <= base + SLACK
    # a torn tail on a few: recovery cuts it and the rest stays
    for p in range(0, 120, 10):
        seg = sorted((tmp_path / f"crash-{p}").glob("*.log"))[-1]
        with open(seg, "ab") as f:
            f.write(b"\x00\x00\x00\x00\x00\x00\x00\x09\x00\x00\x01\x00torn")
    logs = [
        Log.open(tmp_path / f"crash-{p}", LogConfig(**CFG), recovery_point=rps[p])  # type: ignore[arg-type]
        for p in range(120)
    ]
    assert fd_count() <= _bound(base)
    for p, lg in enumerate(logs):
        assert _values(lg) == expected[p]
        assert fd_count() <= _bound(base)
    for lg in logs:
        lg.close()


def test_compaction_with_tiny_cache(tmp_path: Path, tiny_cache: int) -> None:
    base = tiny_cache
    cfg = LogConfig(
        cleanup_policy="compact",
        segment_bytes=900,
        index_interval_bytes=100,
        delete_retention_ms=10**12,
    )
    logs = [Log.open(tmp_path / f"compact-{p}", cfg) for p in range(40)]
    latest: dict[int, dict[bytes, bytes]] = {}
    rng = random.Random(7)
    for p, lg in enumerate(logs):
        latest[p] = {}
        for i in range(40):
            k = b"k%d" % rng.randrange(6)
            v = b"p%d-%d" % (p, i)
            lg.append(build_batch([(k, v, [], 1_000 + i)]))
            latest[p][k] = v
    cleaner = LogCleaner()
    for lg in logs:
        stats = cleaner.clean(lg, force=True)
        assert stats is not None and not stats.aborted
        assert fd_count() <= _bound(base)
    for p, lg in enumerate(logs):
        lg.remove_deleted_segments(force=True)
        got: dict[bytes, bytes] = {}
        for b in batches(read_all(lg)):
            for r in b.records:
                assert r.key is not None and r.value is not None
                got[r.key] = r.value
        assert got == latest[p]
        assert sum(1 for _ in batches(read_all(lg))) < 40  # something was cleaned away
    for lg in logs:
        lg.close()


def test_eviction_during_a_long_sendfile(tmp_path: Path, tiny_cache: int) -> None:
    base = tiny_cache
    big = Log.open(tmp_path / "big-0", LogConfig(segment_bytes=1 << 20))
    for i in range(200):
        big.append(make_batch(4, 500, tag=i))
    want = read_all(big)
    others = [Log.open(tmp_path / f"o-{p}", LogConfig(**CFG)) for p in range(40)]  # type: ignore[arg-type]
    for p, lg in enumerate(others):
        lg.append(make_batch(1, 20, tag=p))
    info = big.read(0, 1 << 20)
    sl = info.slice
    assert sl is not None and sl.length == len(want)
    seg = big.segments[0]
    a, b = socket.socketpair()
    a.setblocking(True)
    got = bytearray()
    pos, left, step = sl.position, sl.length, 4096
    while left:
        # churn between chunks: every other log's file opens, evicting the one being sent
        for lg in others:
            lg.read(0, 100)
        assert not seg.is_open or len(process_file_cache()) <= CACHE
        n = os.sendfile(a.fileno(), sl.fileno, pos, min(step, left))
        assert n > 0
        got += b.recv(n, socket.MSG_WAITALL)
        pos += n
        left -= n
    assert bytes(got) == want
    assert not seg.is_open  # evicted while the slice held the descriptor
    held = fd_count()
    del info, sl
    gc.collect()
    assert fd_count() == held - 1  # the lease was the last reference: now it is closed
    assert fd_count() <= _bound(base) + 2  # + the socket pair
    a.close()
    b.close()
    big.close()
    for lg in others:
        lg.close()


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_randomized_against_a_model(tmp_path: Path, tiny_cache: int, seed: int) -> None:
    """Random appends, reads, rolls, truncations, DeleteRecords, clean and crash reopenings over 40
    logs; every read matches a model and descriptors stay bounded after every step."""
    base = tiny_cache
    rng = random.Random(seed)
    cfg = LogConfig(**CFG)  # type: ignore[arg-type]
    n = 40
    logs = [Log.open(tmp_path / f"r-{p}", cfg) for p in range(n)]
    # the model: per log, the batches as (base offset, [values]), and the log start offset
    model: list[list[tuple[int, list[bytes]]]] = [[] for _ in range(n)]
    start = [0] * n
    counter = 0

    def leo(p: int) -> int:
        return model[p][-1][0] + len(model[p][-1][1]) if model[p] else start[p]

    for _step in range(1500):
        p = rng.randrange(n)
        lg = logs[p]
        op = rng.random()
        if op < 0.55:
            vals = [b"%d-%d" % (p, counter + j) for j in range(rng.randint(1, 3))]
            counter += len(vals)
            info = lg.append(build_batch([(None, v, [], 1_000) for v in vals]))
            assert info.first_offset == leo(p)
            model[p].append((info.first_offset, vals))
        elif op < 0.75 and model[p]:
            off = rng.randrange(start[p], leo(p)) if leo(p) > start[p] else start[p]
            info = lg.read(off, rng.choice([50, 300, 5000]))
            if info.slice is not None:
                got = [
                    (b.base_offset, [r.value for r in b.records])
                    for b in batches(info.slice.read_bytes())
                ]
                want = [(bo, v) for bo, v in model[p] if bo + len(v) > off]
                assert got == want[: len(got)] and got
        elif op < 0.80:
            lg.roll()
        elif op < 0.86 and len(model[p]) > 1:
            k = rng.randrange(1, len(model[p]))
            cut = model[p][k][0]
            if cut >= start[p]:
                lg.truncate_to(cut)
                del model[p][k:]
        elif op < 0.90 and model[p]:
            lg.update_high_watermark(lg.log_end_offset)
            target = rng.randint(start[p], leo(p))
            assert lg.delete_records(target) == max(target, start[p])
            start[p] = max(target, start[p])
        elif op < 0.95:
            rp = lg.log_end_offset
            lg.close()
            logs[p] = Log.open(lg.dir, cfg, recovery_point=rp, log_start_offset=start[p])
        else:
            rp = lg.recovery_point
            crash(lg)
            logs[p] = Log.open(lg.dir, cfg, recovery_point=rp, log_start_offset=start[p])
        assert fd_count() <= _bound(base)
        assert logs[p].log_end_offset == leo(p)
    for p, lg in enumerate(logs):
        lg.remove_deleted_segments(force=True)
        want_vals = [v for bo, vals in model[p] for i, v in enumerate(vals) if bo + i >= start[p]]
        got_recs = [r for b in batches(read_all(lg)) for r in b.records if r.offset >= start[p]]
        assert [r.value for r in got_recs] == want_vals
        lg.close()
    gc.collect()
    assert fd_count() <= base + SLACK


def test_a_fetch_of_many_partitions_holds_no_descriptors_until_sent(
    tmp_path: Path, tiny_cache: int
) -> None:
    """One Fetch answer's slices for 200 partitions: descriptors are taken when a slice is read
    or sent, not when it is made, so holding them all stays within the cache."""
    base = tiny_cache
    logs = [Log.open(tmp_path / f"f-{p}", LogConfig(**CFG)) for p in range(200)]  # type: ignore[arg-type]
    for p, lg in enumerate(logs):
        lg.append(build_batch([(None, _val(p, 0), [], 1_000)]))
    slices = [lg.read(0, 1000).slice for lg in logs]
    assert fd_count() <= _bound(base)
    for p, sl in enumerate(slices):
        assert sl is not None
        assert [r.value for r in batches(sl.read_bytes())[0].records] == [_val(p, 0)]
        assert fd_count() <= _bound(base)
    for lg in logs:
        lg.close()
