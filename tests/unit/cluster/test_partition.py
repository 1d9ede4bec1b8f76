"""Partition and ReplicaManager over real logs: the high-watermark rule, acks=all decisions, leader
epochs, ISR lag, and LeaderAndIsr transitions — without sockets or a controller.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkalite.cluster.errors import (
    FencedLeaderEpoch,
    NotEnoughReplicas,
    NotLeaderOrFollower,
    UnknownLeaderEpoch,
)
from kafkalite.cluster.partition import LeaderAndIsrState, Partition
from kafkalite.cluster.replica_manager import ReplicaManager
from kafkalite.protocol.errors import ErrorCode
from kafkalite.records.builder import RecordBatchBuilder
from kafkalite.storage import Log, LogConfig, LogManager

ME = 1


def batch(n: int = 1) -> bytearray:
    b = RecordBatchBuilder()
    for i in range(n):
        b.append(key=None, value=f"v{i}".encode(), timestamp=1_700_000_000_000 + i)
    return bytearray(b.build())


def leader(
    tmp_path: Path, isr: tuple[int, ...], replicas: tuple[int, ...] = (1, 2, 3), **cfg: int
) -> tuple[Partition, list[int]]:
    lg = Log.open(tmp_path / "t-0", LogConfig(**cfg))  # type: ignore[arg-type]
    moved: list[int] = []
    p = Partition("t", 0, ME, lg, lambda part: moved.append(part.high_watermark))
    p.make_leader(LeaderAndIsrState(ME, 5, isr, replicas), now_ms=1000)
    return p, moved


def test_single_replica_high_watermark_is_the_log_end(tmp_path: Path) -> None:
    p, moved = leader(tmp_path, isr=(ME,), replicas=(ME,))
    first, last, *_ = p.append_records_to_leader(batch(3), required_acks=-1)
    assert (first, last) == (0, 2)
    assert p.high_watermark == 3 and moved == [3]
    assert p.acks_all_done(3) == (True, 0)


def test_high_watermark_is_the_smallest_log_end_in_the_isr(tmp_path: Path) -> None:
    p, moved = leader(tmp_path, isr=(1, 2, 3))
    p.append_records_to_leader(batch(2), required_acks=-1)
    assert p.high_watermark == 0 and p.acks_all_done(2) == (False, 0)
    p.update_follower_fetch_state(2, 2, now_ms=1100)
    assert p.high_watermark == 0  # broker 3 has nothing yet
    p.update_follower_fetch_state(3, 1, now_ms=1100)
    assert p.high_watermark == 1
    p.update_follower_fetch_state(3, 2, now_ms=1200)
    assert p.high_watermark == 2 and moved == [1, 2]
    assert p.acks_all_done(2) == (True, 0)


def test_acks_all_below_min_insync_is_refused_before_appending(tmp_path: Path) -> None:
    p, _ = leader(tmp_path, isr=(1,), min_insync_replicas=2)
    with pytest.raises(NotEnoughReplicas):
        p.append_records_to_leader(batch(), required_acks=-1)
    assert p.log_end_offset == 0
    p.append_records_to_leader(batch(), required_acks=1)  # acks=1 does not care
    assert p.log_end_offset == 1


def test_isr_shrinking_below_the_minimum_after_append(tmp_path: Path) -> None:
    p, _ = leader(tmp_path, isr=(1, 2), min_insync_replicas=2)
    p.append_records_to_leader(batch(), required_acks=-1)
    p.apply_isr((1,), partition_epoch=3)  # the controller accepted a shrink
    assert p.high_watermark == 1
    assert p.acks_all_done(1) == (True, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)


def test_leader_epochs_fence_old_and_unknown_new_requests(tmp_path: Path) -> None:
    p, _ = leader(tmp_path, isr=(ME,), replicas=(ME,))
    p.require_leader(-1)
    p.require_leader(5)
    with pytest.raises(FencedLeaderEpoch):
        p.require_leader(4)
    with pytest.raises(UnknownLeaderEpoch):
        p.require_leader(6)
    p.make_follower(LeaderAndIsrState(2, 6, (1, 2), (1, 2)))
    with pytest.raises(NotLeaderOrFollower):
        p.append_records_to_leader(batch(), required_acks=1)


def test_a_follower_that_caught_up_may_rejoin_and_a_lagging_one_drops_out(tmp_path: Path) -> None:
    p, _ = leader(tmp_path, isr=(1, 2))
    p.append_records_to_leader(batch(4), required_acks=1)
    p.update_follower_fetch_state(2, 4, now_ms=2000)
    assert p.high_watermark == 4
    assert p.update_follower_fetch_state(3, 2, now_ms=2000) is False  # below the HW
    assert p.update_follower_fetch_state(3, 4, now_ms=2100) is True  # caught up: may join
    # broker 2 stops fetching while the leader moves on
    p.append_records_to_leader(batch(), required_acks=1)
    assert p.out_of_sync_followers(now_ms=2000 + 5_000, max_lag_ms=30_000) == set()
    assert p.out_of_sync_followers(now_ms=2000 + 30_001, max_lag_ms=30_000) == {2}


def test_follower_high_watermark_follows_the_leader_capped_at_its_log_end(tmp_path: Path) -> None:
    lg = Log.open(tmp_path / "t-0", LogConfig())
    p = Partition("t", 0, 2, lg)
    p.make_follower(LeaderAndIsrState(1, 3, (1, 2), (1, 2)))
    leader_log = Log.open(tmp_path / "leader" / "t-0", LogConfig())
    leader_log.append_as_leader(batch(2), 3)
    copied = leader_log.read(0, 1 << 20).slice
    assert copied is not None
    assert p.append_records_as_follower(copied.read_bytes(), leader_hw=10) == 2
    assert lg.high_watermark == 2


def test_replica_manager_applies_leader_and_isr_and_ignores_stale_epochs(tmp_path: Path) -> None:
    lm = LogManager([tmp_path])
    lm.startup()
    woken: list[object] = []
    try:
        rm = ReplicaManager(ME, lm, woken.append, clock=lambda: 5000)
        tp = ("orders", 0)
        change = rm.become_leader_or_follower(
            1, {tp: LeaderAndIsrState(ME, 1, (1, 2), (1, 2))}, {"orders": None}
        )
        assert [p.key for p in change.became_leader] == [tp] and change.errors[tp] == 0
        change = rm.become_leader_or_follower(
            1, {tp: LeaderAndIsrState(2, 2, (2,), (1, 2))}, {"orders": None}
        )
        assert [p.key for p in change.became_follower] == [tp]
        stale = rm.become_leader_or_follower(
            1, {tp: LeaderAndIsrState(ME, 1, (1, 2), (1, 2))}, {"orders": None}
        )
        assert stale.became_leader == [] and stale.errors[tp] == ErrorCode.STALE_CONTROLLER_EPOCH
        part = rm.get_partition(*tp)
        assert part is not None and not part.is_leader and part.leader_id == 2
        with pytest.raises(NotLeaderOrFollower):
            rm.leader_partition(*tp)
        not_mine = rm.become_leader_or_follower(
            1, {("other", 0): LeaderAndIsrState(2, 1, (2, 3), (2, 3))}, {}
        )
        assert not_mine.errors[("other", 0)] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert rm.get_partition("other", 0) is None
        assert tp in woken
    finally:
        lm.shutdown()
