"""RecordAccumulator and BatchWriter: batches decode with the records reader in every codec, batch.size
splits, linger readiness, buffer.memory blocking, drain limits, retry ordering and expiry."""

from __future__ import annotations

import threading
import time

import pytest

from kafkalite.client.accumulator import BatchWriter, RecordAccumulator
from kafkalite.client.config import PRODUCER, make_config
from kafkalite.client.errors import KafkaTimeoutError
from kafkalite.client.metadata import ClusterMetadata, PartitionInfo, TopicInfo
from kafkalite.records.batch import decode_batch
from kafkalite.records.header import crc_valid, parse_batch_header


def _cfg(**kw: object) -> dict[str, object]:
    return make_config(PRODUCER, None, kw)


def _metadata(leaders: dict[tuple[str, int], int]) -> ClusterMetadata:
    md = ClusterMetadata()
    for (t, p), leader in leaders.items():
        md.topics.setdefault(t, TopicInfo(t)).partitions[p] = PartitionInfo(t, p, leader)
    return md


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_batch_writer_round_trip(codec: int) -> None:
    w = BatchWriter(codec)
    records = [
        (None, b"v0", (), 1000),
        (b"k1", None, (), 1001),
        (b"k2", b"x" * 300, [("h", b"1"), ("n", None)], 1500),
        (b"k3" * 5000, b"y" * 20000, (), 1000 + 10_000),  # long fields take the slow path
        (b"", b"", (), 999),
    ]
    for i, (k, v, h, ts) in enumerate(records):
        assert w.append(k, v, h, ts) == i
    w.producer_id, w.producer_epoch, w.base_sequence = 77, 3, 10
    blob = w.build()
    hdr = parse_batch_header(blob, 0)
    assert crc_valid(blob, 0, hdr)
    batch = decode_batch(blob, 0, verify_crc=True)
    assert batch.producer_id == 77 and batch.producer_epoch == 3 and batch.base_sequence == 10
    assert batch.compression == codec and batch.last_offset_delta == len(records) - 1
    assert batch.max_timestamp == 11_000
    got = [(r.key, r.value, list(r.headers), r.timestamp) for r in batch.records]
    assert got == [(k, v, list(h), ts) for k, v, h, ts in records]
    assert [r.offset for r in batch.records] == list(range(len(records)))


def test_batch_size_splits_and_reports_full() -> None:
    acc = RecordAccumulator(_cfg(batch_size=1000, linger_ms=1000), 0)
    fulls = []
    for _ in range(30):
        fut, full, _new = acc.append(("t", 0), 1, None, b"x" * 100, ())
        assert fut is not None
        fulls.append(full)
    dq = acc.batches[("t", 0)]
    assert len(dq) >= 3
    assert all(b.builder.estimated_size <= 1000 for b in dq)
    assert sum(len(b.builder) for b in dq) == 30
    assert any(fulls)


def test_linger_and_ready() -> None:
    acc = RecordAccumulator(_cfg(linger_ms=200), 0)
    md = _metadata({("t", 0): 1, ("u", 0): -1})
    acc.append(("t", 0), 1, None, b"x", ())
    nodes, wait, unknown = acc.ready(md, time.monotonic())
    assert nodes == set() and 0 < wait <= 0.2
    nodes, _, _ = acc.ready(md, time.monotonic() + 0.25)
    assert nodes == {1}
    acc.append(("u", 0), 1, None, b"x", ())
    _, _, unknown = acc.ready(md, time.monotonic() + 1)
    assert unknown == {"u"}


def test_drain_respects_max_request_size_and_in_flight() -> None:
    acc = RecordAccumulator(_cfg(batch_size=500, linger_ms=0), 0)
    md = _metadata({("t", 0): 1, ("t", 1): 1, ("t", 2): 2})
    for p in (0, 1, 2):
        for _ in range(3):
            acc.append(("t", p), 1, None, b"x" * 150, ())
    now = time.monotonic()
    drained = acc.drain(md, {1}, max_size=600, per_partition=5, now=now)
    assert set(drained) == {1}
    assert sum(b.builder.estimated_size for b in drained[1]) <= 600 or len(drained[1]) == 1
    # one batch per partition per drain, and the per-partition in-flight limit holds
    acc2 = RecordAccumulator(_cfg(batch_size=500, linger_ms=0), 0)
    for _ in range(6):
        acc2.append(("t", 0), 1, None, b"x" * 150, ())
    first = acc2.drain(md, {1}, 1 << 20, per_partition=1, now=now)[1]
    assert len(first) == 1
    assert acc2.drain(md, {1}, 1 << 20, per_partition=1, now=now) == {}
    acc2.batch_done(first[0])
    assert len(acc2.drain(md, {1}, 1 << 20, per_partition=1, now=now)[1]) == 1


def test_reenqueue_goes_first_with_backoff() -> None:
    acc = RecordAccumulator(_cfg(batch_size=200, linger_ms=0, retry_backoff_ms=50), 0)
    md = _metadata({("t", 0): 1})
    for i in range(3):
        acc.append(("t", 0), 1, None, b"%d" % i * 100, ())
    now = time.monotonic()
    [b0] = acc.drain(md, {1}, 1 << 20, 5, now)[1]
    acc.batch_done(b0)
    acc.reenqueue(b0, now)
    assert acc.batches[("t", 0)][0] is b0
    assert acc.drain(md, {1}, 1 << 20, 5, now) == {}  # backing off
    assert acc.drain(md, {1}, 1 << 20, 5, now + 0.2)[1] == [b0]


def test_buffer_memory_blocks_then_times_out() -> None:
    acc = RecordAccumulator(_cfg(batch_size=1000, buffer_memory=2500, max_block_ms=200), 0)
    acc.append(("t", 0), 1, None, b"x" * 900, ())
    acc.append(("t", 1), 1, None, b"x" * 900, ())
    t0 = time.monotonic()
    with pytest.raises(KafkaTimeoutError):
        acc.append(("t", 2), 1, None, b"x" * 900, ())
    assert 0.15 < time.monotonic() - t0 < 2


def test_buffer_memory_unblocks_on_release() -> None:
    acc = RecordAccumulator(_cfg(batch_size=1000, buffer_memory=2500, max_block_ms=5000), 0)
    acc.append(("t", 0), 1, None, b"x" * 900, ())
    acc.append(("t", 1), 1, None, b"x" * 900, ())
    batch = acc.batches[("t", 0)][0]
    threading.Timer(0.1, acc.release, args=(batch,)).start()
    t0 = time.monotonic()
    fut, _, new = acc.append(("t", 2), 1, None, b"x" * 900, ())
    assert fut is not None and new and time.monotonic() - t0 < 3


def test_expired_batches() -> None:
    acc = RecordAccumulator(_cfg(delivery_timeout_ms=100, linger_ms=0), 0)
    acc.append(("t", 0), 1, None, b"x", ())
    assert acc.expired(time.monotonic()) == []
    assert len(acc.expired(time.monotonic() + 0.2)) == 1
    assert not acc.has_undrained()


def test_retried_batch_takes_no_new_records() -> None:
    """A drained batch is sealed: once re-enqueued for a retry (its bytes already built), later records
    go to a new batch behind it instead of into bytes that will never be re-encoded."""
    acc = RecordAccumulator(_cfg(batch_size=10_000, linger_ms=0, retry_backoff_ms=1), 0)
    md = _metadata({("t", 0): 1})
    acc.append(("t", 0), 1, None, b"a", ())
    now = time.monotonic()
    [b0] = acc.drain(md, {1}, 1 << 20, 5, now)[1]
    built = b0.build()
    acc.batch_done(b0)
    acc.reenqueue(b0, now)
    fut, _, new = acc.append(("t", 0), 2, None, b"b", ())
    assert fut is not None and new and fut.delta == 0
    dq = acc.batches[("t", 0)]
    assert dq[0] is b0 and len(dq) == 2 and len(b0.builder) == 1
    assert b0.build() == built
    assert [r.value for r in decode_batch(dq[1].build(), 0).records] == [b"b"]


def test_batch_leaving_its_deque_is_sealed_for_the_lock_free_send() -> None:
    """send()'s lock-free path reads the deque's last batch and its limit, then appends: when a drain,
    expiry or abort runs in between, the buffer itself refuses the record (-1: the slow way)."""
    md = _metadata({("t", 0): 1, ("t", 1): 1})
    acc = RecordAccumulator(_cfg(batch_size=10_000, linger_ms=0, delivery_timeout_ms=100), 0)
    seen = []
    for p in (0, 1):
        acc.append(("t", p), 1, None, b"a", ())
        last = acc.topic_deques["t"][p][-1]
        seen.append((last, last.limit))
    acc.drain(md, {1}, 1 << 20, 5, time.monotonic())
    acc.append(("t", 0), 1, None, b"b", ())
    expiring = acc.topic_deques["t"][0][-1]
    seen.append((expiring, expiring.limit))
    assert len(acc.expired(time.monotonic() + 1)) == 1
    acc.append(("t", 1), 1, None, b"c", ())
    aborted = acc.topic_deques["t"][1][-1]
    seen.append((aborted, aborted.limit))
    assert acc.abort_all() == [aborted]
    for batch, limit in seen:
        assert limit > 0 and batch.records.sealed
        assert batch.records.try_append(None, b"late", 1, limit) == -1
        assert len(batch.builder) == 1


@pytest.mark.parametrize("codec", [0, 1, 4])
def test_batch_writer_same_bytes_with_and_without_speedups(
    codec: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kafkalite.client import accumulator
    from kafkalite.records.builder import PyRecordBuffer

    def fill() -> BatchWriter:
        w = BatchWriter(codec, None, 1 << 16)
        for i in range(300):
            key = None if i % 3 else b"k%d" % i
            w.append(key, b"v" * (i % 70), [("h", b"x")] if i % 50 == 0 else (), 1000 + i)
        w.producer_id, w.producer_epoch, w.base_sequence = 5, 1, 42
        return w

    built = fill().build()
    assert bytes(fill().build(copy=False)) == built
    monkeypatch.setattr(accumulator, "RecordBuffer", PyRecordBuffer)
    assert isinstance(fill().records, PyRecordBuffer)
    assert fill().build() == built
    assert bytes(fill().build(copy=False)) == built
    assert decode_batch(built, 0, verify_crc=True).last_offset_delta == 299


def test_yield_to_sender_waits_for_a_write_only_while_the_sender_writes() -> None:
    from kafkalite.client import accumulator as acc_mod

    acc = RecordAccumulator(_cfg(batch_size=100, linger_ms=0), 0)
    tp = ("t", 0)
    for _ in range(acc_mod.PACE_BATCHES + 2):
        acc.append(tp, 1, None, b"x" * 90, ())
    assert len(acc.batches[tp]) > acc_mod.PACE_BATCHES
    # a Sender that wrote nothing lately (no leader, broker down) is not waited for
    t0 = time.monotonic()
    acc.yield_to_sender(tp)
    assert time.monotonic() - t0 < acc_mod.PACE_WAIT
    # a writing Sender: send() waits until its next write (or PACE_WAIT at most)
    acc.batches_written()
    threading.Timer(0.001, acc.batches_written).start()
    t0 = time.monotonic()
    acc.yield_to_sender(tp)
    assert time.monotonic() - t0 < 1
    # few batches queued, or flushing: no wait at all
    acc.batches_written()
    acc.yield_to_sender(("t", 1))
    acc.flushing += 1
    t0 = time.monotonic()
    acc.yield_to_sender(tp)
    assert time.monotonic() - t0 < acc_mod.PACE_WAIT
