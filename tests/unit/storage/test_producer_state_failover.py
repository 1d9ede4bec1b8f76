"""Producer state across a leader change (issue 36, anomaly a): a follower that becomes leader knows
every batch it replicated, above its high watermark too, after truncation and after a crash.

Kafka's rules, checked on two logs driven by hand (a leader's and a follower's, bytes copied as the
fetcher does): the new leader accepts last sequence + 1, answers a resend of a batch it holds with its
first offsets, refuses a gap (OUT_OF_ORDER_SEQUENCE_NUMBER), and rebuilds the state from the log when
it is truncated. A seeded differential run checks that the state kept up to date append by append is
the state a rebuild from the log finds.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

import kafkalite.storage.log_producers as log_producers
from kafkalite.records.builder import build_batch
from kafkalite.records.control import build_end_txn_marker_batch
from kafkalite.storage import Log, LogConfig
from kafkalite.storage.errors import OutOfOrderSequence
from kafkalite.storage.log_producers import LogProducers
from kafkalite.storage.producer_state import ProducerStateManager

PID = 2001


def _txn(seq: int, n: int = 1, epoch: int = 0, pid: int = PID) -> bytearray:
    values = [(None, b"s%d-%d" % (seq, i)) for i in range(n)]
    return bytearray(
        build_batch(
            values, producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=True
        )
    )


def _leader_with(path: Path, *batches: bytearray) -> tuple[Log, list[bytes]]:
    """A leader log holding `batches` (stamped in place), and their bytes as a follower fetches them."""
    lg = Log.open(path, LogConfig())
    out = []
    for b in batches:
        lg.append(b, leader_epoch=0)
        out.append(bytes(b))
    return lg, out


def _state(lg: Log) -> tuple[int, int, int]:
    entry = lg.producer_state.entry(PID)
    assert entry is not None
    return entry.epoch, entry.last_seq, entry.current_txn_first_offset


@pytest.mark.parametrize("built", ["before", "after"], ids=["state-built", "state-lazy"])
@pytest.mark.parametrize("crash", [False, True], ids=["running", "restarted"])
def test_new_leader_knows_batches_it_replicated_above_its_high_watermark(
    tmp_path: Path, built: str, crash: bool
) -> None:
    leader, fetched = _leader_with(tmp_path / "a" / "t-0", _txn(0), _txn(1, 2))
    leader.close()
    follower = Log.open(tmp_path / "b" / "t-0", LogConfig())
    if built == "before":
        follower.producer_state  # noqa: B018  (built now: the follower appends update it)
    for b in fetched:
        follower.append(b, assign_offsets=False)
    assert follower.high_watermark == 0  # the old leader died before telling us its HW
    if crash:
        follower.close(flush=False)
        follower = Log.open(tmp_path / "b" / "t-0", LogConfig())
    follower.begin_leader_epoch(1)  # elected
    assert _state(follower) == (0, 2, 0)  # seq 1..2 at offsets 1..2, transaction open since 0
    # the client resends the batch it had no answer for: the offsets it got the first time
    dup = follower.append(_txn(1, 2), leader_epoch=1)
    assert (dup.first_offset, dup.last_offset, dup.num_batches) == (1, 2, 0)
    info = follower.append(_txn(3), leader_epoch=1)
    assert (info.first_offset, info.num_batches) == (3, 1)
    follower.close()


def test_truncation_to_the_leader_epoch_reopens_what_it_cut(tmp_path: Path) -> None:
    marker = bytearray(build_end_txn_marker_batch(True, PID, 0, 0, timestamp=1000))
    _, fetched = _leader_with(tmp_path / "a" / "t-0", _txn(0), _txn(1), marker, _txn(2))
    follower = Log.open(tmp_path / "b" / "t-0", LogConfig())
    follower.producer_state  # noqa: B018
    for b in fetched:
        follower.append(b, assign_offsets=False)
    assert _state(follower) == (0, 2, 3)  # the second transaction opened at offset 3
    # the new leader's epoch ends at 2: the marker and seq 2 are cut, the first transaction is
    # open again (the last stable offset falls back to its first offset) and seq 2 is new again
    follower.truncate_to(2)
    assert _state(follower) == (0, 1, 0)
    assert follower.last_stable_offset == 0
    with pytest.raises(OutOfOrderSequence, match="sequence 3 out of order, expected 2"):
        follower.append(_txn(3), leader_epoch=1)
    assert follower.append(_txn(2), leader_epoch=1).num_batches == 1
    follower.close()


def test_a_batch_after_one_that_never_landed_is_out_of_order(tmp_path: Path) -> None:
    """What broker 1 answered in the fault run: seq 1 was refused or lost with the old leader before
    it was acknowledged (it is not in the log), so seq 2, already in flight, is a gap. Kafka answers
    the same; librdkafka then retries it after seq 1 but must bump the epoch, which aborts the
    transaction (rd_kafka_idemp_drain_epoch_bump)."""
    _, fetched = _leader_with(tmp_path / "a" / "t-0", _txn(0), _txn(1))
    follower = Log.open(tmp_path / "b" / "t-0", LogConfig())
    follower.append(fetched[0], assign_offsets=False)  # seq 1 never reached us
    follower.begin_leader_epoch(1)
    with pytest.raises(OutOfOrderSequence, match="sequence 2 out of order, expected 1"):
        follower.append(_txn(2), leader_epoch=1)
    assert follower.append(_txn(1), leader_epoch=1).first_offset == 1  # the retry of seq 1 lands
    assert follower.append(_txn(2), leader_epoch=1).first_offset == 2
    follower.close()


# -- the state kept append by append is the state a rebuild finds ------------------------------------


def _summary(state: ProducerStateManager) -> object:
    return (
        {
            pid: (
                e.epoch,
                [(b.first_seq, b.last_seq, b.first_offset, b.last_offset) for b in e.batches],
                e.current_txn_first_offset,
            )
            for pid, e in state.entries()
        },
        state.ongoing_transactions(),
    )


def _leader_history(rnd: random.Random, path: Path) -> list[tuple[int, bytes]]:
    """A leader log of two transactional producers: data, commit/abort markers, epoch bumps."""
    seq, epoch = {1: 0, 2: 0}, {1: 0, 2: 0}
    lg = Log.open(path, LogConfig())
    out = []
    for _ in range(40):
        pid = rnd.choice((1, 2))
        if rnd.random() < 0.7:
            n = rnd.randint(1, 3)
            b = _txn(seq[pid], n, epoch[pid], pid)
            seq[pid] += n
        else:
            b = bytearray(
                build_end_txn_marker_batch(rnd.random() < 0.5, pid, epoch[pid], 0, timestamp=1)
            )
            if rnd.random() < 0.3:
                epoch[pid] += 1
                seq[pid] = 0
        out.append((lg.append(b, leader_epoch=0).first_offset, bytes(b)))
    lg.close()
    return out


@pytest.mark.parametrize("seed", range(4))
def test_follower_state_equals_a_rebuild_after_fetches_truncations_and_crashes(
    tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rnd = random.Random(seed)
    history = _leader_history(rnd, tmp_path / "a" / "t-0")
    cfg = LogConfig(segment_bytes=rnd.choice((250, 400, 1 << 20)))  # snapshots at every roll
    path = tmp_path / "b" / "t-0"
    follower = Log.open(path, cfg)
    follower.producer_state  # noqa: B018
    for _ in range(24):
        r = rnd.random()
        if r < 0.6:  # a fetch of the next few batches
            todo = [b for off, b in history if off >= follower.log_end_offset][: rnd.randint(1, 4)]
            for b in todo:
                follower.append(b, assign_offsets=False)
        elif r < 0.85:  # truncation to a divergence point
            follower.truncate_to(int(follower.log_end_offset * rnd.random()))
        else:  # a crash (no final snapshot) or a clean restart, state rebuilt on open
            leo = follower.log_end_offset
            follower.close(flush=rnd.random() < 0.5)
            follower = Log.open(path, cfg, recovery_point=rnd.randint(0, leo))
        kept = _summary(follower.producer_state)
        with_snapshots = _summary(LogProducers(follower._local).load(0))
        monkeypatch.setattr(log_producers, "latest_snapshot", lambda *a, **k: None)
        from_headers = _summary(LogProducers(follower._local).load(0))
        monkeypatch.undo()
        assert kept == with_snapshots == from_headers
    follower.close()
