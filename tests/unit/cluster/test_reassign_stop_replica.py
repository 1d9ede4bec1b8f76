"""A leader whose replica is stopped and deleted (it was moved away) answers its waiting acks=all
produces at once with NOT_LEADER_OR_FOLLOWER, so producers go to the new leader without a timeout.
"""

from __future__ import annotations

from pathlib import Path

from kafkalite.cluster.partition import LeaderAndIsrState
from kafkalite.cluster.replica_manager import ReplicaManager
from kafkalite.protocol.errors import ErrorCode
from kafkalite.records.builder import RecordBatchBuilder
from kafkalite.storage import LogManager


def test_stopping_a_leader_releases_its_acks_all_waiters(tmp_path: Path) -> None:
    lm = LogManager([tmp_path])
    lm.startup()
    woken: list[object] = []
    try:
        rm = ReplicaManager(1, lm, woken.append, clock=lambda: 5000)
        tp = ("moving", 0)
        rm.become_leader_or_follower(
            1, {tp: LeaderAndIsrState(1, 3, (1, 2, 3), (2, 3, 4, 1))}, {"moving": None}
        )
        b = RecordBatchBuilder()
        b.append(key=None, value=b"v", timestamp=1_700_000_000_000)
        part, result = rm.append_to_leader("moving", 0, bytearray(b.build()), required_acks=-1)
        required = result[1] + 1
        assert part.acks_all_done(required) == (False, 0)  # followers have not fetched it
        woken.clear()
        assert rm.stop_replica("moving", 0, delete=True)
        assert tp in woken
        assert part.acks_all_done(required) == (True, int(ErrorCode.NOT_LEADER_OR_FOLLOWER))
        assert not (tmp_path / "moving-0").exists()
    finally:
        lm.shutdown()
