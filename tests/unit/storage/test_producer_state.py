"""ProducerStateManager: sequence and epoch rules of idempotent producers, duplicates, rebuild."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import kafkalite.storage.log_producers as log_module
from kafkalite.protocol.errors import ErrorCode
from kafkalite.records.builder import build_batch
from kafkalite.storage import Log, LogConfig
from kafkalite.storage.errors import InvalidProducerBatch, InvalidProducerEpoch, OutOfOrderSequence
from kafkalite.storage.producer_snapshot import (
    decode_snapshot,
    encode_snapshot,
    snapshot_offsets,
    snapshot_path,
)
from kafkalite.storage.producer_state import (
    MAX_CACHED_BATCHES,
    ProducerStateManager,
    last_sequence,
)


def append(
    state: ProducerStateManager, pid: int, epoch: int, seq: int, n: int, offset: int
) -> None:
    last = last_sequence(seq, n - 1)
    assert state.check(pid, epoch, seq, last) is None
    state.update(pid, epoch, seq, last, offset, offset + n - 1, 1000)


def test_unknown_producer_may_start_at_any_sequence() -> None:
    state = ProducerStateManager()
    assert state.check(7, 0, 0, 4) is None
    assert state.check(7, 0, 42, 50) is None  # e.g. its earlier batches were deleted by retention


def test_in_order_batches_are_accepted_and_a_gap_is_refused() -> None:
    state = ProducerStateManager()
    append(state, 7, 0, 0, 5, 100)
    append(state, 7, 0, 5, 3, 105)
    with pytest.raises(OutOfOrderSequence) as err:
        state.check(7, 0, 9, 9)
    assert err.value.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_a_retried_batch_is_a_duplicate_with_its_first_offsets() -> None:
    state = ProducerStateManager()
    append(state, 7, 0, 0, 5, 100)
    append(state, 7, 0, 5, 3, 105)
    dup = state.check(7, 0, 0, 4)
    assert dup is not None and (dup.first_offset, dup.last_offset) == (100, 104)
    dup = state.check(7, 0, 5, 7)
    assert dup is not None and dup.first_offset == 105


def test_only_the_last_five_batches_are_remembered() -> None:
    state = ProducerStateManager()
    for i in range(MAX_CACHED_BATCHES + 1):
        append(state, 7, 0, i, 1, 10 + i)
    assert state.check(7, 0, MAX_CACHED_BATCHES, MAX_CACHED_BATCHES) is not None
    # the oldest fell out: it is no longer recognised, and it is not the next sequence either
    with pytest.raises(OutOfOrderSequence):
        state.check(7, 0, 0, 0)


def test_stale_epoch_is_fenced_and_a_new_epoch_restarts_at_zero() -> None:
    state = ProducerStateManager()
    append(state, 7, 3, 0, 2, 0)
    with pytest.raises(InvalidProducerEpoch) as err:
        state.check(7, 2, 2, 2)
    assert err.value.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    with pytest.raises(OutOfOrderSequence):
        state.check(7, 4, 2, 2)
    append(state, 7, 4, 0, 1, 2)
    assert state.entry(7) is not None and state.entry(7).epoch == 4  # type: ignore[union-attr]


def test_sequence_wraps_after_int32_max() -> None:
    state = ProducerStateManager()
    top = 2**31 - 1
    append(state, 7, 0, top - 1, 2, 0)
    assert last_sequence(top - 1, 1) == top
    append(state, 7, 0, 0, 1, 2)  # the sequence after 2**31-1 is 0


def test_producers_are_independent() -> None:
    state = ProducerStateManager()
    append(state, 1, 0, 0, 1, 0)
    append(state, 2, 0, 0, 1, 1)
    append(state, 1, 0, 1, 1, 2)
    assert len(state) == 2


def test_expired_producers_are_dropped() -> None:
    state = ProducerStateManager()
    state.update(7, 0, 0, 0, 0, 0, timestamp=1_000)
    state.update(8, 0, 0, 0, 1, 1, timestamp=50_000)
    assert state.remove_expired(now_ms=60_000, expiration_ms=30_000) == 1
    assert state.entry(7) is None and state.entry(8) is not None


def _idem(seq: int, *values: bytes, pid: int = 9, epoch: int = 0) -> bytes:
    return build_batch(
        [(None, v) for v in values], producer_id=pid, producer_epoch=epoch, base_sequence=seq
    )


def test_log_rebuilds_producer_state_across_segments_and_truncation(tmp_path: Path) -> None:
    cfg = LogConfig(segment_bytes=300)  # a few batches per segment
    lg = Log.open(tmp_path / "t-0", cfg)
    for seq in range(10):
        lg.append(_idem(seq, b"v%d" % seq))
    assert len(lg.segments) > 2
    lg.close()
    lg = Log.open(tmp_path / "t-0", cfg)
    dup = lg.append(_idem(9, b"v9"))  # the last batch, found again from the headers on disk
    assert (dup.first_offset, dup.num_batches, lg.log_end_offset) == (9, 0, 10)
    with pytest.raises(OutOfOrderSequence):
        lg.append(_idem(11, b"gap"))
    lg.truncate_to(8)  # batches 8 and 9 are gone: their retry is a new append again
    info = lg.append(_idem(8, b"v8"))
    assert (info.first_offset, info.num_batches) == (8, 1)
    lg.close()


def test_idempotent_batches_must_come_one_per_append(tmp_path: Path) -> None:
    lg = Log.open(tmp_path / "t-0", LogConfig())
    with pytest.raises(InvalidProducerBatch):
        lg.append(_idem(0, b"a") + _idem(1, b"b"))
    assert lg.log_end_offset == 0
    lg.close()


def _idem_log(path: Path, count: int, *, segment_bytes: int = 300) -> Log:
    lg = Log.open(path, LogConfig(segment_bytes=segment_bytes))
    lg.producer_state  # noqa: B018  (built now, so rolls and close write snapshots)
    for seq in range(count):
        lg.append(_idem(seq, b"v%d" % seq))
    return lg


def test_snapshot_roundtrip_and_corruption_is_detected() -> None:
    state = ProducerStateManager()
    state.update(7, 2, 0, 4, 10, 14, 1234)
    state.update(7, 2, 5, 5, 15, 15, 1235)
    state.update(9, 0, 0, 0, 16, 16, 1236)
    data = encode_snapshot(state)
    back = decode_snapshot(data)
    assert back.check(7, 2, 0, 4) is not None and back.check(9, 0, 0, 0) is not None
    assert back.entry(7).epoch == 2  # type: ignore[union-attr]
    for bad in (data[:-1], data[:10] + b"\xff" + data[11:], b""):
        with pytest.raises(ValueError):
            decode_snapshot(bad)


def test_clean_close_snapshot_means_no_header_scan_on_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lg = _idem_log(tmp_path / "t-0", 10)
    lg.close()
    assert snapshot_offsets(tmp_path / "t-0")[-1] == 10

    def no_scan(seg: object) -> Iterator[object]:
        raise AssertionError("scanned the log despite a snapshot at its end")

    monkeypatch.setattr(log_module, "segment_batch_headers", no_scan)
    # the LogManager passes the recovery point it checkpointed at the clean close
    lg = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=300), recovery_point=10)
    assert lg.append(_idem(9, b"v9")).first_offset == 9  # a duplicate, known from the snapshot
    assert lg.append(_idem(10, b"v10")).first_offset == 10
    lg.close()


def test_after_a_crash_the_roll_snapshot_plus_later_headers_rebuild_the_state(
    tmp_path: Path,
) -> None:
    lg = _idem_log(tmp_path / "t-0", 10)
    assert len(snapshot_offsets(tmp_path / "t-0")) >= 1  # written at the rolls
    lg.close(flush=False)  # like a crash: no snapshot at the end
    lg = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=300))
    for seq in (5, 7, 9):  # the last five batches, from before and after the newest snapshot
        assert lg.append(_idem(seq, b"v%d" % seq)).num_batches == 0
    for seq in (0, 12):  # too old to be remembered, and a gap
        with pytest.raises(OutOfOrderSequence):
            lg.append(_idem(seq, b"x"))
    lg.close()


def test_corrupt_snapshot_is_ignored_and_the_log_is_scanned(tmp_path: Path) -> None:
    lg = _idem_log(tmp_path / "t-0", 6)
    lg.close()
    d = tmp_path / "t-0"
    for off in snapshot_offsets(d):
        snapshot_path(d, off).write_bytes(b"garbage")
    lg = Log.open(d, LogConfig(segment_bytes=300))
    dup = lg.append(_idem(5, b"v5"))
    assert (dup.first_offset, dup.num_batches) == (5, 0)
    lg.close()


def test_truncation_drops_snapshots_past_the_new_end(tmp_path: Path) -> None:
    lg = _idem_log(tmp_path / "t-0", 10)
    lg.close()
    lg = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=300))
    lg.truncate_to(4)
    assert all(off <= 4 for off in snapshot_offsets(tmp_path / "t-0"))
    assert lg.append(_idem(4, b"again")).num_batches == 1  # batch 4 is gone: a new append
    lg.close()
