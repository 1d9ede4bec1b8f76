"""KIP-890 verification state in a partition's producer state: one guard per transaction, shared until the
transaction opens; a marker between the verification and the append voids the guard (the race KIP-890
closes); a log's client append without the right guard is refused and writes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkalite.records.builder import build_batch
from kafkalite.records.header import read_header_fields
from kafkalite.storage import Log, LogConfig
from kafkalite.storage.errors import InvalidTxnState
from kafkalite.storage.producer_state import SENTINEL_GUARD, ProducerStateManager

PID, EPOCH = 7, 0


def _txn_batch(seq: int, offset: int = 0) -> bytes:
    return build_batch(
        [(None, b"v")],
        base_offset=offset,
        producer_id=PID,
        producer_epoch=EPOCH,
        base_sequence=seq,
        is_transactional=True,
    )


def test_one_guard_per_transaction_until_it_opens() -> None:
    s = ProducerStateManager()
    g = s.maybe_start_verification(PID, EPOCH, now_ms=1)
    assert g is not SENTINEL_GUARD
    assert s.maybe_start_verification(PID, EPOCH, now_ms=2) is g  # concurrent batches share it
    s.check_verified(PID, EPOCH, g)
    with pytest.raises(InvalidTxnState):
        s.check_verified(PID, EPOCH, SENTINEL_GUARD)
    s.update_from_header(read_header_fields(_txn_batch(0)))  # the transaction opens here
    assert s.verification_guard(PID) is None
    assert s.maybe_start_verification(PID, EPOCH, now_ms=3) is SENTINEL_GUARD
    s.check_verified(PID, EPOCH, SENTINEL_GUARD)  # open: later batches need nothing


def test_a_marker_between_verification_and_append_voids_the_guard() -> None:
    s = ProducerStateManager()
    g = s.maybe_start_verification(PID, EPOCH, now_ms=1)
    g.verified = True  # the coordinator said yes...
    s.complete_txn(PID, EPOCH, 0, offset=0, commit=False, timestamp=1)  # ...then its abort landed
    with pytest.raises(InvalidTxnState):
        s.check_verified(PID, EPOCH, g)
    g2 = s.maybe_start_verification(PID, EPOCH, now_ms=2)
    assert g2 is not g and not g2.verified  # the next transaction is verified afresh


def test_a_new_epoch_gets_a_new_guard_and_stale_entries_expire() -> None:
    s = ProducerStateManager()
    g = s.maybe_start_verification(PID, EPOCH, now_ms=1)
    g1 = s.maybe_start_verification(PID, EPOCH + 1, now_ms=2)
    assert g1 is not g
    s.remove_expired(now_ms=10_000, expiration_ms=100)
    assert s.verification_guard(PID) is None


def test_the_log_refuses_an_unverified_transactional_append(tmp_path: Path) -> None:
    lg = Log.open(tmp_path / "t-0", LogConfig())
    try:
        with pytest.raises(InvalidTxnState):
            lg.append_as_leader(bytearray(_txn_batch(0)), 0, SENTINEL_GUARD)
        assert lg.log_end_offset == 0
        guard = lg.maybe_start_transaction_verification(PID, EPOCH)
        lg.append_as_leader(bytearray(_txn_batch(0)), 0, guard)
        assert lg.log_end_offset == 1
        # open now: the next batch passes with the sentinel; no guard (a coordinator's write) too
        assert lg.maybe_start_transaction_verification(PID, EPOCH) is SENTINEL_GUARD
        lg.append_as_leader(bytearray(_txn_batch(1)), 0, SENTINEL_GUARD)
        lg.append_as_leader(bytearray(_txn_batch(2)), 0)
        assert lg.log_end_offset == 3
    finally:
        lg.close()
