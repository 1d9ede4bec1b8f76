"""Crash recovery: randomized torn tails, appended garbage, corrupted batches and damaged or missing
index files. Reopening keeps every batch wholly written before the damage, serves nothing else, and
continues at the right offset."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from storage_helpers import crash, make_batch, random_batch, read_all

from kafkalite.records.header import iter_batch_headers
from kafkalite.storage import Log, LogConfig
from kafkalite.storage import segment_scan as segment_module
from kafkalite.storage.epoch_cache import LEADER_EPOCH_CHECKPOINT
from kafkalite.storage.file_cache import read_file

N_CASES = 210
DAMAGE_KINDS = ("truncate", "garbage", "truncate+garbage", "corrupt-batch")


def _damage_indexes(rng: random.Random, path: Path) -> list[str]:
    done = []
    for name in sorted(os.listdir(path)):
        if not name.endswith((".index", ".timeindex")) or rng.random() < 0.6:
            continue
        p = path / name
        action = rng.choice(["delete", "truncate", "scribble", "garbage"])
        data = p.read_bytes()
        if action == "delete":
            p.unlink()
        elif action == "truncate":
            p.write_bytes(data[: rng.randint(0, len(data))])
        elif action == "scribble" and data:
            b = bytearray(data)
            for _ in range(rng.randint(1, 4)):
                b[rng.randrange(len(b))] = rng.randrange(256)
            p.write_bytes(bytes(b))
        else:
            p.write_bytes(data + rng.randbytes(rng.randint(1, 40)))
        done.append(f"{action}:{name}")
    return done


@pytest.mark.parametrize("case", range(N_CASES))
def test_random_crash_recovery(tmp_path: Path, case: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(case * 7919 + 17)
    # recovery reads a small segment in one call and maps a big one: both ways, every shape
    monkeypatch.setattr(segment_module, "_READ_SMALL_SEGMENT", 0 if case % 2 else 1 << 20)
    kind = DAMAGE_KINDS[case % len(DAMAGE_KINDS)]
    cfg = LogConfig(
        segment_bytes=rng.choice([2000, 4000, 16_000, 1 << 20]),
        index_interval_bytes=rng.choice([0, 64, 500, 4096]),
    )
    path = tmp_path / "topic-0"
    lg = Log.open(path, cfg)
    written: list[tuple[int, int]] = []  # (first offset, next offset) per append
    for _ in range(rng.randint(1, 60)):
        info = lg.append(random_batch(rng))
        written.append((info.first_offset, info.last_offset + 1))
        if rng.random() < 0.05:
            lg.flush()
    if rng.random() < 0.5:
        lg.flush()
    full = read_all(lg)
    spans = [(p, h) for p, h in iter_batch_headers(full)]
    rp = lg.recovery_point
    active = lg.active_segment
    active_path, active_base, active_size = active.log_path, active.base_offset, active.size
    crash(lg)

    # which batches of the active segment survive: those wholly before the damage point
    data = active_path.read_bytes()
    assert len(data) == active_size
    if kind == "truncate":
        cut = rng.randint(0, len(data))
        active_path.write_bytes(data[:cut])
        damage_at = cut
    elif kind == "garbage":
        active_path.write_bytes(data + rng.randbytes(rng.randint(1, 3000)))
        damage_at = len(data)
    elif kind == "truncate+garbage":
        cut = rng.randint(0, len(data))
        active_path.write_bytes(data[:cut] + rng.randbytes(rng.randint(1, 3000)))
        damage_at = cut
    else:
        if not data:
            damage_at = 0
        else:
            # flip a CRC-covered byte (attributes onwards) of a random batch
            seg_batches = list(iter_batch_headers(data))
            p, h = rng.choice(seg_batches)
            at = p + 21 + rng.randrange(h.size - 21)
            b = bytearray(data)
            b[at] ^= 1 << rng.randrange(8)
            active_path.write_bytes(bytes(b))
            damage_at = p
    _damage_indexes(rng, path)

    # expected content: earlier segments in full, then active-segment batches ending <= damage_at
    expected = bytearray()
    seg_offset = 0  # position inside the active segment, tracked by walking the full log
    for p, h in spans:
        if h.base_offset < active_base:
            expected += full[p : p + h.size]
            continue
        if seg_offset + h.size <= damage_at:
            expected += full[p : p + h.size]
        else:
            break
        seg_offset += h.size
    exp_batches = list(iter_batch_headers(bytes(expected)))
    exp_leo = exp_batches[-1][1].next_offset if exp_batches else active_base
    exp_leo = (
        max(exp_leo, active_base)
        if not any(h.base_offset >= active_base for _, h in exp_batches)
        else exp_leo
    )

    reopened = Log.open(path, cfg, recovery_point=rng.choice([0, rp]))
    try:
        assert reopened.log_end_offset == exp_leo, (kind, damage_at)
        assert read_all(reopened) == bytes(expected)
        # lookups through the rebuilt indexes agree with a linear walk
        for _, h in exp_batches[:: max(1, len(exp_batches) // 10)]:
            got = reopened.read(h.base_offset, 1)
            assert got.slice is not None
            first = next(iter_batch_headers(got.slice.read_bytes()))[1]
            assert first.base_offset == h.base_offset
        info = reopened.append(make_batch(2))
        assert info.first_offset == exp_leo
        assert reopened.read(exp_leo, 1 << 20).slice is not None
    finally:
        reopened.close()
    # and a clean reopen after that is identical
    again = Log.open(path, cfg, recovery_point=exp_leo + 2)
    try:
        assert again.log_end_offset == exp_leo + 2
        assert read_all(again)[: len(expected)] == bytes(expected)
    finally:
        again.close()


def test_corrupt_middle_segment_drops_later_segments(tmp_path: Path) -> None:
    cfg = LogConfig(segment_bytes=1000, index_interval_bytes=100)
    path = tmp_path / "t-0"
    lg = Log.open(path, cfg)
    for i in range(30):
        lg.append(make_batch(2, value_size=60, tag=i))
    segs = lg.segments
    assert len(segs) >= 4
    victim = segs[1]
    keep_until = victim.base_offset
    crash(lg)
    raw = bytearray(victim.log_path.read_bytes())
    raw[30] ^= 0xFF  # CRC-covered byte of the victim's first batch
    victim.log_path.write_bytes(bytes(raw))
    reopened = Log.open(path, cfg, recovery_point=0)
    try:
        assert reopened.log_end_offset == keep_until
        assert [s.base_offset for s in reopened.segments] == [0, keep_until]
        assert reopened.append(make_batch(1)).first_offset == keep_until
    finally:
        reopened.close()


def test_missing_indexes_below_recovery_point_are_rebuilt(tmp_path: Path) -> None:
    cfg = LogConfig(segment_bytes=1000, index_interval_bytes=100)
    path = tmp_path / "t-0"
    lg = Log.open(path, cfg)
    for i in range(30):
        lg.append(make_batch(1, value_size=60, tag=i, timestamp=1000 + i))
    full = read_all(lg)
    leo = lg.log_end_offset
    lg.close()
    for name in os.listdir(path):
        if name.endswith((".index", ".timeindex")):
            (path / name).unlink()
    reopened = Log.open(path, cfg, recovery_point=leo)
    try:
        assert read_all(reopened) == full
        assert reopened.offset_for_timestamp(1015) == (15, 1015)
        assert all(len(s.offset_index) > 0 for s in reopened.segments if s.size > 300)
    finally:
        reopened.close()


def test_leftover_cleaned_and_deleted_files_are_removed(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    lg = Log.open(path, LogConfig())
    lg.append(make_batch(1))
    lg.close()
    (path / "00000000000000000000.log.cleaned").write_bytes(b"junk")
    (path / "00000000000000000500.log.deleted").write_bytes(b"junk")
    (path / "00000000000000000500.index.deleted").write_bytes(b"junk")
    lg = Log.open(path, LogConfig())
    try:
        assert sorted(n for n in os.listdir(path) if n[0].isdigit()) == [
            "00000000000000000000.index",
            "00000000000000000000.log",
            "00000000000000000000.timeindex",
            "00000000000000000001.snapshot",  # producer state at the clean close
        ]
        assert lg.log_end_offset == 1
    finally:
        lg.close()


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    sizes=st.lists(st.integers(0, 900), min_size=1, max_size=25),
    cut=st.floats(0, 1),
    garbage=st.binary(max_size=200),
)
def test_torn_tail_property(
    tmp_path_factory: pytest.TempPathFactory, sizes: list[int], cut: float, garbage: bytes
) -> None:
    """Any prefix of the active segment plus any junk recovers to the whole batches in the prefix."""
    path = tmp_path_factory.mktemp("h") / "t-0"
    cfg = LogConfig(segment_bytes=4000, index_interval_bytes=300)
    lg = Log.open(path, cfg)
    for i, n in enumerate(sizes):
        lg.append(make_batch(1, value_size=n, tag=i))
    full = read_all(lg)
    active = lg.active_segment
    data = active.read_bytes(0, active.size)
    base, log_path = active.base_offset, active.log_path
    crash(lg)
    at = int(cut * len(data))
    written = data[:at] + garbage
    log_path.write_bytes(written)
    # whole batches survive; junk that happens to restore a cut batch's own last bytes
    # (a trailing zero, say) makes that batch whole again
    kept = []
    for p, h in iter_batch_headers(data):
        if written[p : p + h.size] != data[p : p + h.size]:
            break
        kept.append(data[p : p + h.size])
    kept_active = b"".join(kept)
    before_active = full[: len(full) - len(data)]
    again = Log.open(path, cfg)
    try:
        assert read_all(again) == before_active + kept_active
        batches_kept = list(iter_batch_headers(kept_active))
        expect_leo = batches_kept[-1][1].next_offset if batches_kept else base
        assert again.log_end_offset == expect_leo
        assert again.append(make_batch(1)).first_offset == expect_leo
    finally:
        again.close()


def test_crash_restart_of_a_small_partition_writes_and_makes_nothing(tmp_path: Path) -> None:
    """A restart after a crash reads a partition with one small segment, never flushed: it makes
    no file (no index), and rebuilds its epochs from the batches without writing a checkpoint while
    they all start at 0 (as a new log defers it); the first flush writes both. A rebuilt epoch
    that starts later is written at once."""
    path = tmp_path / "t-0"
    lg = Log.create(path, LogConfig())
    lg.begin_leader_epoch(3)
    lg.append_as_leader(make_batch(2), 3)
    crash(lg)
    before = sorted(os.listdir(path))
    assert LEADER_EPOCH_CHECKPOINT not in before and not any(".index" in n for n in before)

    lg = Log.open(path, LogConfig(), recovery_point=0)
    assert sorted(os.listdir(path)) == before
    assert lg.leader_epoch_cache.entries() == [(3, 0)]
    assert lg.log_end_offset == 2 and lg.read(0, 1 << 20).slice is not None
    lg.flush()
    assert read_file(path / LEADER_EPOCH_CHECKPOINT) == b"0\n1\n3 0\n"
    lg.begin_leader_epoch(5)
    lg.append_as_leader(make_batch(1), 5)
    crash(lg)

    (path / LEADER_EPOCH_CHECKPOINT).unlink()
    lg = Log.open(path, LogConfig(), recovery_point=0)
    try:
        assert lg.leader_epoch_cache.entries() == [(3, 0), (5, 2)]
        assert read_file(path / LEADER_EPOCH_CHECKPOINT) == b"0\n2\n3 0\n5 2\n"
    finally:
        lg.close()
    index_files = {"00000000000000000000.index", "00000000000000000000.timeindex"}
    assert index_files <= set(os.listdir(path))  # (a clean close writes them)


@pytest.mark.parametrize("size", [0, 1, 4095, 1 << 16, (1 << 16) + 1, 200_000])
def test_read_file_reads_every_byte(tmp_path: Path, size: int) -> None:
    data = random.Random(size).randbytes(size)
    (tmp_path / "f").write_bytes(data)
    assert read_file(tmp_path / "f") == data
    with pytest.raises(FileNotFoundError):
        read_file(tmp_path / "missing")


def test_garbage_epoch_checkpoint_and_partition_metadata_are_rebuilt_not_fatal(
    tmp_path: Path,
) -> None:
    """Bytes that are not text in leader-epoch-checkpoint or partition.metadata (a damaged disk):
    the log opens, its epochs come from the batches, and nothing it holds is lost."""
    path = tmp_path / "t-0"
    lg = Log.create(path, LogConfig())
    lg.begin_leader_epoch(4)
    lg.append_as_leader(make_batch(3), 4)
    lg.flush()
    full = read_all(lg)
    crash(lg)
    (path / LEADER_EPOCH_CHECKPOINT).write_bytes(b"\xff\xfe\x00garbage\x80")
    (path / "partition.metadata").write_bytes(b"\xffversion\x00: \x81\n")
    lg = Log.open(path, LogConfig(), recovery_point=0)
    try:
        assert lg.leader_epoch_cache.entries() == [(4, 0)]
        assert read_all(lg) == full and lg.topic_id is None
        assert lg.append(make_batch(1)).first_offset == 3
    finally:
        lg.close()
