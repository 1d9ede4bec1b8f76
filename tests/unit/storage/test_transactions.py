"""The log's side of transactions: open transactions and the last stable offset, commit/abort markers,
the aborted-transaction index (written, rebuilt after a crash, cut by truncation) and compaction."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkalite.protocol.errors import ErrorCode
from kafkalite.records.batch import iter_batches
from kafkalite.records.builder import build_batch
from kafkalite.storage import Log, LogCleaner, LogConfig
from kafkalite.storage.errors import InvalidProducerEpoch, InvalidTxnState, TxnCoordinatorFenced
from kafkalite.storage.txn_index import ENTRY_SIZE, AbortedTxn, TransactionIndex

CFG = LogConfig(segment_bytes=1000, index_interval_bytes=100)


def txn_batch(
    pid: int, seq: int, *values: bytes, epoch: int = 0, key: bytes | None = None
) -> bytes:
    return build_batch(
        [(key, v) for v in values],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=True,
    )


def plain(*values: bytes, key: bytes | None = None) -> bytes:
    return build_batch([(key, v) for v in values])


def settle(lg: Log) -> None:
    """Single-replica: the high watermark is the log end."""
    lg.update_high_watermark(lg.log_end_offset)


def test_open_transaction_holds_the_last_stable_offset_until_its_marker(tmp_path: Path) -> None:
    lg = Log.open(tmp_path / "t-0", CFG)
    lg.append(plain(b"a", b"b"))  # 0-1
    lg.append(txn_batch(7, 0, b"t1", b"t2"))  # 2-3
    lg.append(plain(b"c"))  # 4
    settle(lg)
    assert lg.high_watermark == 5
    assert lg.last_stable_offset == 2
    assert lg.ongoing_transactions() == {7: 2}
    marker = lg.append_control_marker(7, 0, 0, commit=True, leader_epoch=0)
    assert marker[0] == 5
    # the marker is not yet below the high watermark: still unstable
    assert lg.last_stable_offset == 2
    settle(lg)
    assert lg.last_stable_offset == 6
    assert lg.collect_aborted_transactions(0, 6) == []
    lg.close()


def test_an_abort_marker_is_indexed_and_found_by_a_fetch(tmp_path: Path) -> None:
    lg = Log.open(tmp_path / "t-0", CFG)
    lg.append(txn_batch(7, 0, b"x1"))  # 0
    lg.append(txn_batch(8, 0, b"y1"))  # 1
    lg.append(txn_batch(7, 1, b"x2"))  # 2
    lg.append_control_marker(7, 0, 3, commit=False, leader_epoch=0)  # 3
    settle(lg)
    assert lg.last_stable_offset == 1  # producer 8 is still open
    lg.append_control_marker(8, 0, 3, commit=True, leader_epoch=0)  # 4
    settle(lg)
    assert lg.last_stable_offset == 5
    # Kafka's entry: the LSO recorded with the abort is producer 8's first offset
    assert lg.collect_aborted_transactions(0, 5) == [AbortedTxn(7, 0, 3, 1)]
    assert lg.collect_aborted_transactions(4, 5) == []
    path = lg.segments[0].txn_index.path
    assert path.name == "00000000000000000000.txnindex"
    assert path.stat().st_size == ENTRY_SIZE
    lg.close()


def test_markers_from_old_epochs_are_fenced_and_write_nothing(tmp_path: Path) -> None:
    lg = Log.open(tmp_path / "t-0", CFG)
    lg.append(txn_batch(7, 0, b"x", epoch=2))
    lg.append_control_marker(7, 2, 5, commit=True, leader_epoch=0)
    end = lg.log_end_offset
    with pytest.raises(InvalidProducerEpoch) as old_producer:
        lg.append_control_marker(7, 1, 5, commit=False, leader_epoch=0)
    assert old_producer.value.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    with pytest.raises(TxnCoordinatorFenced) as old_coordinator:
        lg.append_control_marker(7, 2, 4, commit=False, leader_epoch=0)
    assert old_coordinator.value.error_code == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    assert lg.log_end_offset == end
    lg.close()


def test_a_plain_batch_inside_an_open_transaction_is_refused(tmp_path: Path) -> None:
    lg = Log.open(tmp_path / "t-0", CFG)
    lg.append(txn_batch(7, 0, b"x"))
    idempotent_plain = build_batch([(None, b"y")], producer_id=7, producer_epoch=0, base_sequence=1)
    with pytest.raises(InvalidTxnState):
        lg.append(idempotent_plain)
    assert lg.log_end_offset == 1
    lg.close()


def test_state_and_index_survive_a_clean_restart(tmp_path: Path) -> None:
    lg = Log.open(tmp_path / "t-0", CFG)
    lg.append(txn_batch(7, 0, b"x"))
    lg.append_control_marker(7, 0, 0, commit=False, leader_epoch=0)
    lg.append(txn_batch(9, 0, b"open"))  # 2, still open
    settle(lg)
    hw = lg.high_watermark
    lg.close()
    lg = Log.open(tmp_path / "t-0", CFG, recovery_point=3, high_watermark=hw)
    assert lg.last_stable_offset == 2
    assert lg.ongoing_transactions() == {9: 2}
    assert lg.collect_aborted_transactions(0, 3) == [AbortedTxn(7, 0, 1, 2)]
    lg.close()


def test_a_lost_index_is_rebuilt_by_replay_after_a_crash(tmp_path: Path) -> None:
    lg = Log.open(tmp_path / "t-0", CFG)
    for i in range(30):  # enough batches for several segments
        lg.append(txn_batch(7, 2 * i, b"v%03d" % i, b"w%03d" % i))
        lg.append_control_marker(7, 0, 0, commit=i % 3 != 0, leader_epoch=0)
    assert len(lg.segments) > 2
    expected = lg.collect_aborted_transactions(0, lg.log_end_offset)
    assert len(expected) == 10
    lg.close(flush=False)  # like a crash: no snapshot at the end
    for p in (tmp_path / "t-0").glob("*.txnindex"):
        p.unlink()
    for p in (tmp_path / "t-0").glob("*.snapshot"):
        p.unlink()
    lg = Log.open(tmp_path / "t-0", CFG)  # recovery point 0: everything is rescanned
    assert lg.collect_aborted_transactions(0, lg.log_end_offset) == expected
    # and replaying over an index that already holds the entries adds none twice
    lg.close(flush=False)
    for p in (tmp_path / "t-0").glob("*.snapshot"):
        p.unlink()
    lg = Log.open(tmp_path / "t-0", CFG)
    assert lg.collect_aborted_transactions(0, lg.log_end_offset) == expected
    lg.close()


def test_truncating_a_marker_reopens_its_transaction(tmp_path: Path) -> None:
    lg = Log.open(tmp_path / "t-0", CFG)
    lg.append(txn_batch(7, 0, b"x"))  # 0
    lg.append_control_marker(7, 0, 0, commit=False, leader_epoch=0)  # 1
    settle(lg)
    assert lg.collect_aborted_transactions(0, 2) != []
    lg.truncate_to(1)  # a follower cutting a divergent suffix
    assert lg.ongoing_transactions() == {7: 0}
    assert lg.last_stable_offset == 0
    assert lg.collect_aborted_transactions(0, 2) == []
    lg.close()


def test_a_damaged_index_file_keeps_its_good_entries(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.txnindex"
    idx = TransactionIndex(path)
    idx.append(AbortedTxn(1, 0, 5, 3))  # producer 2's transaction (from 3) was open at its abort
    idx.append(AbortedTxn(2, 3, 9, 10))
    assert not idx.append(AbortedTxn(2, 3, 9, 10))  # a replayed marker is not indexed twice
    idx.close()
    path.write_bytes(path.read_bytes() + b"\x00\x01torn")
    again = TransactionIndex(path)
    assert again.entries() == [AbortedTxn(1, 0, 5, 3), AbortedTxn(2, 3, 9, 10)]
    assert path.stat().st_size == 2 * ENTRY_SIZE
    assert again.collect(6, 100) == ([AbortedTxn(2, 3, 9, 10)], False)
    assert again.collect(0, 4) == ([AbortedTxn(1, 0, 5, 3), AbortedTxn(2, 3, 9, 10)], True)
    assert again.collect(0, 2) == ([AbortedTxn(1, 0, 5, 3)], True)


def test_compaction_removes_aborted_records_and_keeps_markers(tmp_path: Path) -> None:
    cfg = LogConfig(cleanup_policy="compact", segment_bytes=600, index_interval_bytes=100)
    lg = Log.open(tmp_path / "t-0", cfg)
    lg.append(plain(b"committed-1", key=b"k"))  # 0
    lg.append(txn_batch(7, 0, b"aborted", key=b"k"))  # 1: must not shadow offset 0
    lg.append_control_marker(7, 0, 0, commit=False, leader_epoch=0)  # 2
    for i in range(12):
        lg.append(plain(b"filler-%d" % i, key=b"f%d" % i))
    lg.append(txn_batch(8, 0, b"open", key=b"j"))  # 15: open, beyond the cleanable range
    lg.append(txn_batch(8, 1, b"open-again", key=b"j"))  # 16
    for i in range(12):
        lg.append(plain(b"later-%d" % i, key=b"f%d" % i))
    settle(lg)
    assert lg.first_unstable_offset == 15
    stats = LogCleaner().clean(lg, force=True)
    assert stats is None or not stats.aborted
    values: dict[int, bytes | None] = {}
    controls = []
    for seg in lg.segments:
        for b in iter_batches(seg.read_bytes(0, seg.size)):
            if b.is_control:
                controls.append(b.base_offset)
            for r in b.records:
                if not b.is_control:
                    values[r.offset] = r.value
    assert values[0] == b"committed-1"
    assert 1 not in values
    assert controls == [2]
    # the open transaction and everything after it were not touched
    assert (values[15], values[16]) == (b"open", b"open-again")
    assert all(values.get(17 + i) == b"later-%d" % i for i in range(12))
    lg.close()
