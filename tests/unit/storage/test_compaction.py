"""Log compaction: latest value per key, preserved offsets, tombstone expiry, crash-safe swaps, and
reads that stay consistent while the cleaner runs."""

from __future__ import annotations

import os
import random
import threading
from pathlib import Path

import pytest
from storage_helpers import batches, read_all

from kafkalite.records.batch import build_batch
from kafkalite.storage import Log, LogCleaner, LogConfig
from kafkalite.storage.errors import OutOfOrderSequence

COMPACT = dict(cleanup_policy="compact", segment_bytes=1500, index_interval_bytes=200)


def _records(lg: Log) -> dict[int, tuple[bytes | None, bytes | None]]:
    return {r.offset: (r.key, r.value) for b in batches(read_all(lg)) for r in b.records}


def _write_updates(
    lg: Log, rng: random.Random, n: int, keys: int
) -> dict[int, tuple[bytes, bytes | None]]:
    written: dict[int, tuple[bytes, bytes | None]] = {}
    for i in range(n):
        recs: list[tuple[bytes, bytes | None, list[tuple[str, bytes | None]], int]] = []
        for j in range(rng.randint(1, 3)):
            k = b"key-%d" % rng.randrange(keys)
            v = None if rng.random() < 0.1 else b"value-%d-%d" % (i, j)
            recs.append((k, v, [], 1000 + i))
        info = lg.append(build_batch(recs, compression=rng.choice([0, 1])))
        for j, (k, v, _, _) in enumerate(recs):
            written[info.first_offset + j] = (k, v)
    return written


def _check_compacted(
    lg: Log, written: dict[int, tuple[bytes, bytes | None]], cleaned_end: int, tombstones_gone: bool
) -> None:
    got = _records(lg)
    latest: dict[bytes, int] = {}
    for off in sorted(written):
        latest[written[off][0]] = off
    # nothing invented, offsets preserved: each record is the one originally at its offset
    for off, kv in got.items():
        assert written[off] == kv
    for off, (k, v) in written.items():
        if off >= cleaned_end:
            assert off in got  # the uncleaned tail (incl. the active segment) is untouched
        elif latest[k] == off:
            if v is None and tombstones_gone:
                assert off not in got
            else:
                assert off in got, f"latest record for {k!r} at {off} was lost"
        elif latest[k] < cleaned_end:
            assert off not in got, f"superseded record {off} for {k!r} survived cleaning"


def test_compaction_keeps_latest_per_key(tmp_path: Path) -> None:
    rng = random.Random(5)
    lg = Log.open(tmp_path / "c-0", LogConfig(**COMPACT, delete_retention_ms=10**12))  # type: ignore[arg-type]
    written = _write_updates(lg, rng, 300, keys=15)
    size_before, leo = lg.size_in_bytes, lg.log_end_offset
    assert len(lg.segments) > 5
    stats = LogCleaner().clean(lg, force=True)
    assert stats is not None and stats.segments_cleaned > 0 and not stats.aborted
    assert lg.size_in_bytes < size_before and lg.log_end_offset == leo
    _check_compacted(lg, written, stats.end_offset, tombstones_gone=False)
    assert not [n for n in os.listdir(lg.dir) if n.endswith((".cleaned", ".swap"))]
    # clean again: nothing dirty
    assert LogCleaner().clean(lg, force=True) is None
    # reopen: the compacted log recovers intact
    before = read_all(lg)
    lg.close()
    lg = Log.open(tmp_path / "c-0", LogConfig(**COMPACT))  # type: ignore[arg-type]
    assert read_all(lg) == before and lg.log_end_offset == leo
    assert lg.append(build_batch([(b"k", b"v")])).first_offset == leo
    lg.close()


def test_tombstones_expire_after_delete_retention(tmp_path: Path) -> None:
    lg = Log.open(tmp_path / "c-0", LogConfig(**COMPACT, delete_retention_ms=60_000))  # type: ignore[arg-type]
    for i in range(40):
        lg.append(build_batch([(b"a", b"a%d" % i), (b"b", b"b%d" % i)]))
    dead = lg.append(build_batch([(b"a", None)])).first_offset
    for i in range(40):
        lg.append(build_batch([(b"c", b"c%d" % i)]))
    cleaner = LogCleaner()
    mtime_ms = max(s.last_modified_ms() for s in lg.segments)
    cleaner.clean(lg, now=mtime_ms + 1000, force=True)
    got = _records(lg)
    assert got[dead] == (b"a", None)  # tombstone still within delete.retention.ms
    assert not any(k == b"a" and v is not None for k, v in got.values())
    lg.first_dirty_offset = lg.log_start_offset  # force a full pass
    stats = cleaner.clean(lg, now=mtime_ms + 120_000, force=True)
    assert stats is not None and stats.tombstones_removed == 1
    got = _records(lg)
    assert dead not in got and not any(k == b"a" for k, _ in got.values())
    assert any(k == b"b" and v == b"b39" for k, v in got.values())
    lg.close()


def test_active_segment_and_lag_untouched(tmp_path: Path) -> None:
    lg = Log.open(tmp_path / "c-0", LogConfig(**COMPACT, min_compaction_lag_ms=10**15))  # type: ignore[arg-type]
    for i in range(50):
        lg.append(build_batch([(b"x", b"%d" % i, [], 2000 + i)]))
    before = read_all(lg)
    assert LogCleaner().clean(lg, now=10**12, force=True) is None  # everything younger than the lag
    assert read_all(lg) == before
    lg.update_config(LogConfig(**COMPACT))  # type: ignore[arg-type]
    active_before = lg.active_segment.read_bytes(0, lg.active_segment.size)
    LogCleaner().clean(lg, force=True)
    assert lg.active_segment.read_bytes(0, lg.active_segment.size) == active_before
    lg.close()


def test_dirty_ratio_threshold(tmp_path: Path) -> None:
    lg = Log.open(tmp_path / "c-0", LogConfig(**COMPACT, min_cleanable_dirty_ratio=0.99))  # type: ignore[arg-type]
    for i in range(60):
        lg.append(build_batch([(b"k%d" % (i % 5), b"v%d" % i)]))
    cleaner = LogCleaner()
    assert cleaner.clean(lg, force=True) is not None
    for i in range(10):
        lg.append(build_batch([(b"k%d" % (i % 5), b"w%d" % i)]))
    assert cleaner.dirty_ratio(lg) < 0.99
    assert cleaner.clean(lg) is None  # below min.cleanable.dirty.ratio
    lg.close()


def test_reads_during_cleaning_stay_consistent(tmp_path: Path) -> None:
    rng = random.Random(11)
    lg = Log.open(tmp_path / "c-0", LogConfig(**COMPACT, delete_retention_ms=10**12))  # type: ignore[arg-type]
    written = _write_updates(lg, rng, 400, keys=10)
    latest = {k: off for off, (k, _) in sorted(written.items())}
    stop = threading.Event()
    problems: list[str] = []
    reads = [0]

    def reader() -> None:
        while not stop.is_set():
            got = _records(lg)
            reads[0] += 1
            for off, kv in got.items():
                if written[off] != kv:
                    problems.append(f"offset {off}: {kv} != {written[off]}")
            for k, off in latest.items():
                if off not in got:
                    problems.append(f"latest value of {k!r} at {off} missing")
            if problems:
                return

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    cleaner = LogCleaner()
    for _ in range(3):
        lg.first_dirty_offset = lg.log_start_offset
        cleaner.clean(lg, force=True)
    stop.set()
    for t in threads:
        t.join(30)
    assert not problems, problems[:5]
    assert reads[0] > 0
    lg.remove_deleted_segments(force=True)
    lg.close()


def test_crash_during_swap_is_completed_or_discarded(tmp_path: Path) -> None:
    rng = random.Random(3)
    cfg = LogConfig(**COMPACT, delete_retention_ms=10**12)  # type: ignore[arg-type]
    path = tmp_path / "c-0"
    lg = Log.open(path, cfg)
    written = _write_updates(lg, rng, 200, keys=8)
    leo = lg.log_end_offset
    uncleaned = _records(lg)
    lg.close()

    # 1) a crash while writing .cleaned files: they are discarded, the log is unchanged
    lg = Log.open(path, cfg)
    seg0 = lg.segments[0]
    cleaned = lg.new_cleaned_segment(seg0.base_offset)
    cleaned.append(b"\x00" * 10, [])  # junk that never finished
    cleaned.close()
    lg.close()
    lg = Log.open(path, cfg)
    assert _records(lg) == uncleaned and not [n for n in os.listdir(path) if ".cleaned" in n]
    lg.close()

    # 2) a crash after .cleaned -> .swap, before the old segments were replaced
    lg = Log.open(path, cfg)
    real_replace = lg.replace_segments
    swapped_names: list[str] = []

    def crash_after_swap_rename(old, new):  # type: ignore[no-untyped-def]
        new.change_suffix(".cleaned", ".swap")
        swapped_names.extend(os.listdir(path))
        raise KeyboardInterrupt  # simulate dying here

    lg.replace_segments = crash_after_swap_rename  # type: ignore[method-assign]
    try:
        LogCleaner().clean(lg, force=True)
    except KeyboardInterrupt:
        pass
    assert any(n.endswith(".log.swap") for n in os.listdir(path))
    for s in lg.segments:
        s.close()
    lg.replace_segments = real_replace  # type: ignore[method-assign]
    lg = Log.open(path, cfg)
    assert lg.log_end_offset == leo
    assert not [n for n in os.listdir(path) if n.endswith((".swap", ".cleaned"))]
    got = _records(lg)
    for off, kv in got.items():
        assert written[off] == kv
    latest = {k: off for off, (k, _) in sorted(written.items())}
    assert all(off in got for off in latest.values())
    assert len(got) < len(uncleaned)  # the swap took effect
    lg.close()


def test_max_compaction_lag_cleans_below_the_dirty_ratio(tmp_path: Path) -> None:
    """KIP-354: once the oldest uncleaned record has waited max.compaction.lag.ms, the log is cleaned
    whatever min.cleanable.dirty.ratio says."""
    cfg = dict(COMPACT, min_cleanable_dirty_ratio=0.99, max_compaction_lag_ms=60_000)
    lg = Log.open(tmp_path / "c-0", LogConfig(**cfg))  # type: ignore[arg-type]
    for i in range(60):
        lg.append(build_batch([(b"k%d" % (i % 5), b"v%d" % i, [], 1_000 + i)]))
    cleaner = LogCleaner()
    assert cleaner.clean(lg, force=True) is not None
    for i in range(10):
        lg.append(build_batch([(b"k%d" % (i % 5), b"w%d" % i, [], 2_000 + i)]))
    lg.roll()
    assert cleaner.dirty_ratio(lg, now=3_000) < 0.99
    assert cleaner.clean(lg, now=3_000) is None  # not overdue yet: the ratio decides
    stats = cleaner.clean(lg, now=2_000 + 60_001)  # the first dirty batch waited past the lag
    assert stats is not None and not stats.aborted
    lg.close()


def test_max_compaction_lag_rolls_the_active_segment_of_a_compacted_log() -> None:
    compacted = LogConfig(cleanup_policy="compact", segment_ms=10**9, max_compaction_lag_ms=5_000)
    assert compacted.max_segment_ms == 5_000
    deleted = LogConfig(cleanup_policy="delete", segment_ms=10**9, max_compaction_lag_ms=5_000)
    assert deleted.max_segment_ms == 10**9


def test_active_segment_rolls_by_max_compaction_lag(tmp_path: Path) -> None:
    cfg = LogConfig(cleanup_policy="compact", max_compaction_lag_ms=5_000)
    lg = Log.open(tmp_path / "c-0", cfg)
    lg.append(build_batch([(b"k", b"old", [], 10_000)]))
    lg.append(build_batch([(b"k", b"new", [], 16_000)]))  # 6 s after the segment's first record
    assert len(lg.segments) == 2
    lg.close()


def _idem(pid: int, seq: int, key: bytes, value: bytes) -> bytes:
    return build_batch([(key, value)], producer_id=pid, producer_epoch=0, base_sequence=seq)


def _fill_until_rolled(lg: Log, segments: int) -> None:
    i = 0
    while len(lg.segments) < segments:
        lg.append(build_batch([(b"filler-%d" % (i % 4), b"x" * 200)]))
        i += 1


def test_an_idempotent_producers_last_batch_survives_as_an_empty_batch(tmp_path: Path) -> None:
    cfg = LogConfig(**COMPACT, delete_retention_ms=10**12)  # type: ignore[arg-type]
    lg = Log.open(tmp_path / "c-0", cfg)
    first = lg.append(_idem(7, 0, b"a", b"a1")).first_offset
    last = lg.append(_idem(7, 1, b"b", b"b1")).first_offset
    lg.append(
        build_batch([(b"a", b"a2"), (b"b", b"b2")])
    )  # supersedes both of producer 7's records
    _fill_until_rolled(lg, 3)
    stats = LogCleaner().clean(lg, force=True)
    assert stats is not None and stats.empty_batches_retained == 1
    producer_batches = [b for b in batches(read_all(lg)) if b.producer_id == 7]
    assert [(b.base_offset, b.last_offset_delta, b.base_sequence) for b in producer_batches] == [
        (last, 0, 1)
    ]  # the older batch is gone, the newest stays with its offsets and sequence but no records
    assert producer_batches[0].records == []
    assert first not in _records(lg) and last not in _records(lg)
    _fill_until_rolled(lg, len(lg.segments) + 1)
    again = LogCleaner().clean(lg, force=True)  # still the producer's newest batch: kept as it is
    assert again is not None and again.empty_batches_retained == 0
    assert [b.base_offset for b in batches(read_all(lg)) if b.producer_id == 7] == [last]

    # a restart with no producer snapshot replays the headers: the empty batch still fences
    lg.close(flush=False)
    for snap in (tmp_path / "c-0").glob("*.snapshot"):
        snap.unlink()
    lg = Log.open(tmp_path / "c-0", cfg)
    assert lg.append(_idem(7, 1, b"b", b"b1")).num_batches == 0  # a retry of seq 1: a duplicate
    with pytest.raises(OutOfOrderSequence):
        lg.append(_idem(7, 5, b"c", b"gap"))
    nxt = lg.append(_idem(7, 2, b"c", b"c1")).first_offset

    # once a newer batch of the producer exists, the empty one goes at the next cleaning
    lg.append(build_batch([(b"c", b"c2")]))
    _fill_until_rolled(lg, len(lg.segments) + 2)
    LogCleaner().clean(lg, force=True)
    assert [b.base_offset for b in batches(read_all(lg)) if b.producer_id == 7] == [nxt]
    lg.close()
