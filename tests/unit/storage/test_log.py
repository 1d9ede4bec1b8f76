"""Log append/read/roll: offset assignment, segment boundaries, KIP-74 reads, timestamps, flush."""

from __future__ import annotations

import itertools
import os
import random
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from storage_helpers import batches, make_batch, open_log, read_all

from kafkalite.records.batch import build_batch
from kafkalite.records.header import iter_batch_headers
from kafkalite.storage import Log, LogConfig
from kafkalite.storage.errors import (
    CorruptRecord,
    OffsetOutOfRange,
    RecordBatchTooLarge,
    UnexpectedAppendOffset,
)


def test_append_assigns_offsets_in_place(tmp_path: Path) -> None:
    lg = open_log(tmp_path / "t-0")
    a = lg.append(make_batch(3), leader_epoch=7)
    b = lg.append(bytearray(make_batch(2)), leader_epoch=7)
    assert (a.first_offset, a.last_offset) == (0, 2)
    assert (b.first_offset, b.last_offset) == (3, 4)
    assert a.log_append_time == -1 and a.max_timestamp == 1000
    # the high watermark is the Partition's to move (the ISR decides it), not the append's
    assert lg.log_end_offset == 5 and lg.high_watermark == 0
    assert lg.update_high_watermark(99) == 5 and lg.high_watermark == 5
    got = batches(read_all(lg))
    assert [x.base_offset for x in got] == [0, 3]
    assert [r.offset for x in got for r in x.records] == [0, 1, 2, 3, 4]
    assert {x.partition_leader_epoch for x in got} == {7}
    # several batches in one append
    multi = make_batch(2, tag=1) + make_batch(4, tag=2)
    c = lg.append(multi)
    assert (c.first_offset, c.last_offset, c.num_batches) == (5, 10, 2)
    assert [x.base_offset for x in batches(read_all(lg))] == [0, 3, 5, 7]
    lg.close()


def test_log_append_time(tmp_path: Path) -> None:
    lg = Log.open(tmp_path / "t-0", LogConfig(message_timestamp_type="LogAppendTime"))
    lg.clock = lambda: 123_456
    info = lg.append(make_batch(2, timestamp=5))
    assert info.log_append_time == 123_456 and info.max_timestamp == 123_456
    (b,) = batches(read_all(lg))
    assert b.timestamp_type == 1 and b.max_timestamp == 123_456
    assert [r.timestamp for r in b.records] == [123_456, 123_456]
    lg.close()
    # the rewritten CRC is valid: recovery keeps the batch
    lg = Log.open(tmp_path / "t-0", LogConfig(message_timestamp_type="LogAppendTime"))
    assert lg.log_end_offset == 2
    lg.close()


def test_append_rejects(tmp_path: Path) -> None:
    lg = Log.open(tmp_path / "t-0", LogConfig(max_message_bytes=200, segment_bytes=1000))
    with pytest.raises(RecordBatchTooLarge) as e:
        lg.append(make_batch(1, value_size=500))
    assert e.value.error_code == 10
    with pytest.raises(CorruptRecord):
        lg.append(make_batch(1)[:-3])
    with pytest.raises(CorruptRecord):
        lg.append(b"")
    assert lg.log_end_offset == 0
    lg.close()


def test_roll_on_size_never_splits_batches(tmp_path: Path) -> None:
    lg = open_log(tmp_path / "t-0", segment_bytes=1000, index_interval_bytes=100)
    sizes = []
    for i in range(40):
        raw = make_batch(1 + i % 3, value_size=50 + 5 * i, tag=i)
        sizes.append(len(raw))
        lg.append(raw)
    segs = lg.segments
    assert len(segs) > 5
    for s in segs:
        assert s.size <= 1000
        names = sorted(os.listdir(lg.dir))
        assert f"{s.base_offset:020d}.log" in names and f"{s.base_offset:020d}.index" in names
        assert f"{s.base_offset:020d}.timeindex" in names
    for prev, nxt in itertools.pairwise(segs):
        assert prev.next_offset == nxt.base_offset
    assert len(read_all(lg)) == sum(sizes)
    lg.close()


def test_roll_on_time(tmp_path: Path) -> None:
    lg = Log.open(tmp_path / "t-0", LogConfig(segment_ms=1000))
    now = [10_000_000]
    lg.clock = lambda: now[0]
    lg.append(make_batch(1, timestamp=now[0]))
    lg.append(make_batch(1, timestamp=now[0]))
    assert len(lg.segments) == 1
    now[0] += 1001
    lg.append(make_batch(1, timestamp=now[0]))
    assert [s.base_offset for s in lg.segments] == [0, 2]
    lg.close()


def test_read_out_of_range_and_end(tmp_path: Path) -> None:
    lg = open_log(tmp_path / "t-0")
    lg.append(make_batch(5))
    with pytest.raises(OffsetOutOfRange) as e:
        lg.read(6, 100)
    assert e.value.error_code == 1
    with pytest.raises(OffsetOutOfRange):
        lg.read(-1, 100)
    info = lg.read(5, 100)
    assert info.slice is None and info.offset_metadata.message_offset == 5
    # an offset inside a batch returns the whole batch containing it
    info = lg.read(3, 10_000)
    assert info.slice is not None and batches(info.slice.read_bytes())[0].base_offset == 0
    lg.close()


def test_kip74_first_batch_larger_than_max_bytes(tmp_path: Path) -> None:
    lg = open_log(tmp_path / "t-0", segment_bytes=100_000, index_interval_bytes=50)
    small = lg.append(make_batch(1, value_size=10))
    big = lg.append(make_batch(1, value_size=5000))
    lg.append(make_batch(1, value_size=10))
    info = lg.read(big.first_offset, 100)
    assert info.slice is not None and info.slice.length > 5000
    assert [b.base_offset for b in batches(info.slice.read_bytes())] == [big.first_offset]
    info = lg.read(big.first_offset, 100, min_one_message=False)
    assert info.slice is None
    # max_bytes just short of two batches gives one
    first_size = lg.read(small.first_offset, 10**6).slice
    assert first_size is not None
    info = lg.read(small.first_offset, 200)
    assert info.slice is not None
    assert [b.base_offset for b in batches(info.slice.read_bytes())] == [0]
    lg.close()


def test_read_max_offset(tmp_path: Path) -> None:
    lg = open_log(tmp_path / "t-0", index_interval_bytes=0)
    for i in range(10):
        lg.append(make_batch(2, tag=i))
    info = lg.read(0, 10**6, max_offset=6)
    assert info.slice is not None
    assert [b.base_offset for b in batches(info.slice.read_bytes())] == [0, 2, 4]
    assert lg.read(6, 10**6, max_offset=6).slice is None
    lg.close()


def test_offset_for_timestamp(tmp_path: Path) -> None:
    lg = open_log(tmp_path / "t-0", segment_bytes=600, index_interval_bytes=80)
    ts_of: dict[int, int] = {}
    for i in range(60):
        b = build_batch([(None, b"v", [], 1000 + 10 * i), (None, b"w", [], 1005 + 10 * i)])
        info = lg.append(b)
        ts_of[info.first_offset] = 1000 + 10 * i
        ts_of[info.first_offset + 1] = 1005 + 10 * i
    assert len(lg.segments) > 3
    for target in [0, 999, 1000, 1001, 1005, 1006, 1234, 1590, 1595, 1596, 5000]:
        expect = min(((o, t) for o, t in ts_of.items() if t >= target), default=None)
        assert lg.offset_for_timestamp(target) == expect, target
    assert lg.max_timestamp_and_offset() == (1595, 119)
    lg.close()


def test_max_timestamp_names_the_record_not_the_batch_end(tmp_path: Path) -> None:
    """KAFKA-16310: CreateTime records of one batch differ; the answer is the first record holding
    the largest timestamp, across segments and after a reopen."""
    lg = open_log(tmp_path / "t-0", segment_bytes=300)
    assert lg.max_timestamp_and_offset() == (-1, -1)
    lg.append(build_batch([(None, b"a", [], 1000), (None, b"b", [], 9000), (None, b"c", [], 2000)]))
    assert lg.max_timestamp_and_offset() == (9000, 1)
    for i in range(8):  # later segments, all older timestamps
        lg.append(build_batch([(None, b"x" * 40, [], 3000 + i), (None, b"y", [], 3100 + i)]))
    assert len(lg.segments) > 1
    lg.append(build_batch([(None, b"d", [], 9000), (None, b"e", [], 100)]))  # a tie comes later
    assert lg.max_timestamp_and_offset() == (9000, 1)
    lg.append(build_batch([(None, b"f", [], 5), (None, b"g", [], 9500), (None, b"h", [], 9500)]))
    assert lg.max_timestamp_and_offset() == (9500, 22)
    lg.close()
    lg = open_log(tmp_path / "t-0", segment_bytes=300)
    assert lg.max_timestamp_and_offset() == (9500, 22)
    lg.close()


def test_flush_and_recovery_point(tmp_path: Path) -> None:
    lg = open_log(tmp_path / "t-0", flush_messages=3, segment_bytes=300)
    for i in range(2):
        lg.append(make_batch(1, tag=i))
    assert not lg.needs_flush and lg.recovery_point == 0
    assert not lg.flush_if_needed()
    lg.append(make_batch(1))
    assert lg.needs_flush
    assert lg.flush_if_needed()
    assert lg.recovery_point == 3 and lg.unflushed_messages == 0
    lg.append(make_batch(1))
    lg.flush(offset=3)  # already durable: no-op
    assert lg.recovery_point == 3
    lg.flush()
    assert lg.recovery_point == 4
    lg.close()


def test_group_commit_shares_fsyncs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = os.fdatasync
    calls = []
    lock = threading.Lock()

    def slow_fdatasync(fd: int) -> None:
        with lock:
            calls.append(fd)
        threading.Event().wait(0.003)
        real(fd)

    monkeypatch.setattr(os, "fdatasync", slow_fdatasync)
    lg = open_log(tmp_path / "t-0", flush_messages=1)
    errors: list[str] = []
    n_threads, per_thread = 8, 25

    def worker() -> None:
        for _ in range(per_thread):
            info = lg.append(make_batch(1))
            lg.flush(info.last_offset + 1)
            if lg.recovery_point < info.last_offset + 1:
                errors.append(f"flush returned before {info.last_offset} was durable")

    threads = [threading.Thread(target=worker) for _ in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors
    assert lg.recovery_point == n_threads * per_thread
    # concurrent flushers shared fsyncs
    assert len(calls) < n_threads * per_thread
    lg.close()


def test_reads_survive_segment_deletion(tmp_path: Path) -> None:
    lg = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=300, file_delete_delay_ms=60_000))
    for i in range(20):
        lg.append(make_batch(1, value_size=50, tag=i))
    sl = lg.read(0, 10**6).slice
    assert sl is not None
    before = sl.read_bytes()
    lg.update_high_watermark(lg.log_end_offset)
    lg.delete_records(10)
    assert any(n.endswith(".deleted") for n in os.listdir(lg.dir))
    assert sl.read_bytes() == before  # the descriptor stays valid until the delayed removal
    lg.remove_deleted_segments(now=lg.clock() + 60_001)
    assert not any(n.endswith(".deleted") for n in os.listdir(lg.dir))
    lg.close()


# -- properties ------------------------------------------------------------------------------


@st.composite
def log_shapes(draw: st.DrawFn) -> tuple[list[tuple[int, int]], int, int]:
    specs = draw(
        st.lists(st.tuples(st.integers(1, 4), st.integers(0, 600)), min_size=1, max_size=40)
    )
    seg = draw(st.integers(2600, 8000))
    interval = draw(st.sampled_from([0, 1, 100, 500, 4096]))
    return specs, seg, interval


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(shape=log_shapes(), data=st.data())
def test_reads_return_whole_batches_from_any_offset(
    tmp_path_factory: pytest.TempPathFactory,
    shape: tuple[list[tuple[int, int]], int, int],
    data: st.DataObject,
) -> None:
    specs, seg_bytes, interval = shape
    lg = open_log(
        tmp_path_factory.mktemp("p") / "t-0", segment_bytes=seg_bytes, index_interval_bytes=interval
    )
    stored: list[tuple[int, int, bytes]] = []  # base, next, bytes
    for i, (n, size) in enumerate(specs):
        raw = make_batch(n, value_size=size, tag=i)
        info = lg.append(raw)
        stored.append((info.first_offset, info.last_offset + 1, b""))
    full = read_all(lg)
    pieces = [full[p : p + h.size] for p, h in iter_batch_headers(full)]
    assert len(pieces) == len(stored)
    stored = [(b, n, p) for (b, n, _), p in zip(stored, pieces)]
    boundaries = sorted({s.base_offset for s in lg.segments} | {b for b, _, _ in stored})
    probes = set(boundaries) | {max(0, x - 1) for x in boundaries}
    probes |= set(data.draw(st.lists(st.integers(0, lg.log_end_offset - 1), max_size=5)))
    for off in sorted(probes):
        max_bytes = data.draw(st.integers(1, 3000))
        min_one = data.draw(st.booleans())
        fetched = lg.read(off, max_bytes, min_one_message=min_one)
        k = next(i for i, (b, n, _) in enumerate(stored) if b <= off < n)
        if fetched.slice is None:
            assert not min_one and len(stored[k][2]) > max_bytes
            continue
        blob = fetched.slice.read_bytes()
        # starts at the batch holding `off`, whole consecutive batches, within the segment
        expect = bytearray()
        j = k
        seg_end = next(
            (s.next_offset for s in lg.segments if s.base_offset <= off < s.next_offset), None
        )
        while j < len(stored) and (not expect or len(expect) + len(stored[j][2]) <= max_bytes):
            if seg_end is not None and stored[j][0] >= seg_end:
                break
            expect += stored[j][2]
            j += 1
            if len(expect) > max_bytes:
                break
        assert blob == bytes(expect)
        assert len(blob) <= max_bytes or len(blob) == len(stored[k][2])
    lg.close()


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(seed=st.integers(0, 2**32 - 1))
def test_reopen_preserves_everything(tmp_path_factory: pytest.TempPathFactory, seed: int) -> None:
    rng = random.Random(seed)
    path = tmp_path_factory.mktemp("r") / "t-0"
    cfg = LogConfig(
        segment_bytes=rng.randint(1400, 5000), index_interval_bytes=rng.choice([0, 200, 4096])
    )
    lg = Log.open(path, cfg)
    for i in range(rng.randint(1, 50)):
        lg.append(make_batch(rng.randint(1, 3), value_size=rng.randint(0, 400), tag=i))
    before, leo = read_all(lg), lg.log_end_offset
    rp = lg.recovery_point
    lg.close()
    lg = Log.open(path, cfg, recovery_point=rng.choice([0, rp, leo]))
    assert lg.log_end_offset == leo and read_all(lg) == before
    assert lg.append(make_batch(1)).first_offset == leo
    lg.close()


def test_replica_append_keeps_offsets_and_truncate(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "l-0", segment_bytes=700)
    for i in range(12):
        leader.append(make_batch(2, value_size=80, tag=i), leader_epoch=3)
    follower = open_log(tmp_path / "f-0", segment_bytes=700)
    blob = read_all(leader)
    for pos, h in iter_batch_headers(blob):
        follower.append(blob[pos : pos + h.size], assign_offsets=False)
    assert follower.log_end_offset == 24 and read_all(follower) == blob
    with pytest.raises(UnexpectedAppendOffset):
        follower.append(blob[: next(iter_batch_headers(blob))[1].size], assign_offsets=False)
    # truncation removes whole batches holding offsets >= the target
    follower.truncate_to(9)
    assert follower.log_end_offset == 8
    assert [b.base_offset for b in batches(read_all(follower))] == [0, 2, 4, 6]
    assert follower.append(make_batch(1)).first_offset == 8
    follower.truncate_fully_and_start_at(100)
    assert follower.log_start_offset == follower.log_end_offset == 100
    assert follower.append(make_batch(1)).first_offset == 100
    follower.close()
    leader.close()
    again = open_log(tmp_path / "f-0", segment_bytes=700)
    assert again.log_end_offset == 101
    again.close()


def test_multi_batch_append_is_not_split(tmp_path: Path) -> None:
    lg = open_log(tmp_path / "t-0", segment_bytes=1000)
    lg.append(make_batch(1, value_size=500))
    info = lg.append(make_batch(1, value_size=300, tag=1) + make_batch(1, value_size=300, tag=2))
    assert info.num_batches == 2
    # the pair did not fit after the first batch, so both moved to a new segment together
    assert [s.base_offset for s in lg.segments] == [0, 1]
    assert lg.segments[1].next_offset == 3
    lg.close()


def test_log_append_time_multi_batch(tmp_path: Path) -> None:
    lg = Log.open(tmp_path / "t-0", LogConfig(message_timestamp_type="LogAppendTime"))
    lg.clock = lambda: 777
    info = lg.append(make_batch(2, timestamp=5) + make_batch(3, timestamp=6))
    assert (info.first_offset, info.last_offset, info.log_append_time) == (0, 4, 777)
    assert lg.offset_for_timestamp(700) == (0, 777)
    assert lg.offset_for_timestamp(778) is None
    assert [b.max_timestamp for b in batches(read_all(lg))] == [777, 777]
    lg.close()


def test_concurrent_append_read_flush_retention(tmp_path: Path) -> None:
    lg = Log.open(
        tmp_path / "t-0",
        LogConfig(
            segment_bytes=2000, retention_bytes=6000, retention_ms=-1, file_delete_delay_ms=0
        ),
    )
    stop = threading.Event()
    problems: list[str] = []
    written: dict[int, bytes] = {}

    def appender() -> None:
        for i in range(1500):
            raw = make_batch(1, value_size=100, tag=i)
            info = lg.append(raw)
            lg.update_high_watermark(info.last_offset + 1)
            written[info.first_offset] = raw[61:]
        stop.set()

    def reader() -> None:
        while not stop.is_set():
            start = lg.log_start_offset
            try:
                fetched = lg.read(start, 3000)
            except OffsetOutOfRange:
                continue  # retention moved the start meanwhile
            if fetched.slice is None:
                continue
            blob = fetched.slice.read_bytes()
            for _, h in iter_batch_headers(blob, verify_crc=True):
                body = written.get(h.base_offset)
                if body is not None and blob.find(body) < 0:
                    problems.append(f"batch {h.base_offset} content differs")

    def housekeeper() -> None:
        while not stop.is_set():
            lg.flush()
            lg.delete_old_segments()
            lg.remove_deleted_segments()

    threads = [threading.Thread(target=f) for f in (appender, reader, reader, housekeeper)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not problems, problems[:3]
    assert lg.log_end_offset == 1500
    lg.delete_old_segments()  # the housekeeper may have stopped before the last appends
    assert lg.size_in_bytes < 6000 + 2000 + 200
    lg.flush()
    assert lg.recovery_point == 1500
    lg.close()
