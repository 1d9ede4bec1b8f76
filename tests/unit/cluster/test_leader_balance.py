"""Leader balance: the pure ElectLeaders decisions (preferred and unclean, each of Kafka's per-partition
errors), the imbalance ratio and rebalance candidates, and the controller machine answering an election
only once the new leaders are written, plus its periodic rebalance check.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from kafkalite.cluster import zk_data as zd
from kafkalite.cluster.controller.leader_balance import (
    ElectionType,
    decide_elections,
    imbalance_ratios,
    rebalance_candidates,
)
from kafkalite.cluster.controller.machine import (
    BrokerInfo,
    BrokersChanged,
    ControllerMachine,
    LeaderElectionRequested,
    LeaderImbalanceCheck,
    PartitionStatesWritten,
    ReassignmentRequested,
    ReplyLeaderElection,
    SendLeaderAndIsr,
    Startup,
    TopicInfo,
    WritePartitionStates,
)
from kafkalite.cluster.controller.states import NO_LEADER, LeaderIsr
from kafkalite.protocol.errors import ErrorCode

A = {("t", 0): (1, 2, 3), ("t", 1): (2, 3, 1), ("t", 2): (3, 1, 2)}


def st(leader: int, isr: tuple[int, ...] = (1, 2, 3), epoch: int = 5) -> LeaderIsr:
    return LeaderIsr(leader, epoch, isr, 7)


def decide(etype: int, leadership: dict[Any, LeaderIsr], live: Any = (1, 2, 3), **kw: Any) -> Any:
    tps = kw.pop("tps", list(A))
    return decide_elections(
        etype,
        tps,
        assignments=A,
        leadership=leadership,
        live=set(live),
        deleting=kw.get("deleting", ()),
    )


# -- preferred -------------------------------------------------------------------------------------------
def test_preferred_moves_leadership_back_to_the_first_replica_keeping_the_isr() -> None:
    d = decide(0, {("t", 0): st(2), ("t", 1): st(2), ("t", 2): st(1)})
    assert d.proposals == {
        ("t", 0): LeaderIsr(1, 6, (1, 2, 3), 7),
        ("t", 2): LeaderIsr(3, 6, (1, 2, 3), 7),
    }
    assert d.results == {("t", 1): (ErrorCode.ELECTION_NOT_NEEDED, None)}


def test_preferred_not_available_when_the_preferred_replica_is_down_or_out_of_sync() -> None:
    d = decide(0, {("t", 0): st(2), ("t", 1): st(3, isr=(3, 1)), ("t", 2): st(3)}, live=(2, 3))
    assert not d.proposals
    assert d.results[("t", 0)][0] == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE  # 1 is down
    assert d.results[("t", 1)][0] == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE  # 2 not in ISR
    assert "PreferredReplicaPartitionLeaderElectionStrategy" in (d.results[("t", 1)][1] or "")
    assert d.results[("t", 2)] == (ErrorCode.ELECTION_NOT_NEEDED, None)


def test_unknown_partitions_and_topics_being_deleted() -> None:
    leadership = {tp: st(tp[1] + 1) for tp in A} | {("gone", 0): st(1)}
    d = decide(0, leadership, tps=[("t", 9), ("nope", 0), ("t", 0)], deleting={"t"})
    assert d.results[("t", 9)][0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert d.results[("nope", 0)][0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert d.results[("t", 0)][0] == ErrorCode.INVALID_TOPIC_EXCEPTION


def test_an_unknown_election_type_is_an_invalid_request() -> None:
    d = decide(7, {tp: st(2) for tp in A})
    assert not d.proposals
    assert {r[0] for r in d.results.values()} == {ErrorCode.INVALID_REQUEST}


# -- unclean ---------------------------------------------------------------------------------------------
def test_unclean_not_needed_while_a_live_leader_exists() -> None:
    d = decide(1, {tp: st(2) for tp in A})
    assert not d.proposals
    assert {r[0] for r in d.results.values()} == {ErrorCode.ELECTION_NOT_NEEDED}


def test_unclean_elects_a_live_out_of_sync_replica_when_the_isr_is_gone() -> None:
    # leader 1 died as the last ISR member: only 2 and 3 are live, both out of sync
    d = decide(1, {("t", 0): st(NO_LEADER, isr=(1,))}, live=(2, 3), tps=[("t", 0)])
    assert d.proposals == {("t", 0): LeaderIsr(2, 6, (2,), 7)}
    # a live in-sync replica is preferred over an out-of-sync one
    d = decide(1, {("t", 0): st(NO_LEADER, isr=(1, 3))}, live=(2, 3), tps=[("t", 0)])
    assert d.proposals[("t", 0)].leader == 3


def test_unclean_with_no_live_replica_has_no_eligible_leader() -> None:
    d = decide(1, {("t", 0): st(NO_LEADER, isr=(1,))}, live=(4,), tps=[("t", 0)])
    code, message = d.results[("t", 0)]
    assert code == ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
    assert "OfflinePartitionLeaderElectionStrategy" in (message or "")


# -- imbalance ---------------------------------------------------------------------------------------------
def test_imbalance_ratio_per_preferred_broker() -> None:
    # broker 1 is preferred for t-0 and t-2 of this assignment; 2 leads both
    assignments = {("t", 0): (1, 2), ("t", 1): (2, 1), ("t", 2): (1, 2), ("t", 3): (2, 1)}
    leadership = {tp: st(2, isr=(1, 2)) for tp in assignments}
    ratios = imbalance_ratios(assignments, leadership)
    assert ratios[1] == (1.0, [("t", 0), ("t", 2)])
    assert ratios[2] == (0.0, [])


def test_rebalance_candidates_respect_the_percentage_and_the_preferred_replicas_state() -> None:
    assignments = {("t", p): (1, 2) if p < 10 else (2, 1) for p in range(20)}
    leadership = {tp: st(r[0], isr=(1, 2)) for tp, r in assignments.items()}
    leadership[("t", 0)] = st(2, isr=(1, 2))
    # 1 of broker 1's 10 partitions is led elsewhere: 10 % is not over the default 10 %
    assert rebalance_candidates(assignments, leadership, {1, 2}, 10) == []
    assert rebalance_candidates(assignments, leadership, {1, 2}, 5) == [("t", 0)]
    # the preferred replica out of the ISR (or down) cannot take it back
    leadership[("t", 0)] = st(2, isr=(2,))
    assert rebalance_candidates(assignments, leadership, {1, 2}, 5) == []
    leadership[("t", 0)] = st(2, isr=(1, 2))
    assert rebalance_candidates(assignments, leadership, {2}, 5) == []
    assert rebalance_candidates(assignments, leadership, {1, 2}, 5, deleting={"t"}) == []


def test_election_type_names() -> None:
    assert ElectionType(0) is ElectionType.PREFERRED and ElectionType(1) is ElectionType.UNCLEAN


# -- the machine -----------------------------------------------------------------------------------------
def broker(i: int, epoch: int = 0) -> BrokerInfo:
    return BrokerInfo(i, "127.0.0.1", 9000 + i, None, 100 + i + epoch)


class Harness:
    """Plays the driver: ZooKeeper writes succeed unless their partition is listed in `lose`."""

    def __init__(self) -> None:
        self.m = ControllerMachine(1)
        self.lose: set[Any] = set()
        topic = TopicInfo("t", uuid.uuid4(), {p: r for (_, p), r in A.items()})
        states = {tp: LeaderIsr(r[0], 0, r, 0) for tp, r in A.items()}
        self.run(Startup(1, {i: broker(i) for i in (1, 2, 3)}, {"t": topic}, states))

    def run(self, event: Any) -> list[Any]:
        out: list[Any] = []
        queue = list(self.m.handle(event))
        while queue:
            eff = queue.pop(0)
            out.append(eff)
            if isinstance(eff, WritePartitionStates):
                done = {
                    tp: s.partition_epoch + 1 for tp, s in eff.states.items() if tp not in self.lose
                }
                failed = tuple(tp for tp in eff.states if tp in self.lose)
                queue[:0] = self.m.handle(PartitionStatesWritten(eff.tag, done, failed))
        return out

    def leaders(self) -> dict[Any, int]:
        return {tp: s.leader for tp, s in self.m.leadership.items()}

    def restart(self, b: int) -> None:
        """Broker `b` dies (its leaderships move), then comes back as a new incarnation."""
        others = {i: broker(i) for i in (1, 2, 3) if i != b}
        self.run(BrokersChanged(others))
        self.run(BrokersChanged({**others, b: broker(b, epoch=10)}))


def reply_of(out: list[Any]) -> dict[Any, tuple[ErrorCode, str | None]]:
    (reply,) = [e for e in out if isinstance(e, ReplyLeaderElection)]
    return reply.results


def test_a_restarted_broker_gets_its_preferred_leaderships_back_on_request() -> None:
    h = Harness()
    h.restart(1)
    assert h.leaders()[("t", 0)] != 1  # lost it while down, not given back on return
    # the returning broker catches up; the leaders put it back in the ISR
    for tp, s in list(h.m.leadership.items()):
        h.m.leadership[tp] = s.new_isr((1, 2, 3))
    out = h.run(LeaderElectionRequested(0, None, request_id=5))
    assert reply_of(out) == {
        ("t", 0): (ErrorCode.NO_ERROR, None),
        ("t", 1): (ErrorCode.ELECTION_NOT_NEEDED, None),
        ("t", 2): (ErrorCode.ELECTION_NOT_NEEDED, None),
    }
    assert h.leaders() == {("t", 0): 1, ("t", 1): 2, ("t", 2): 3}
    # the reply comes after the write, and the replicas learn their new leader
    kinds = [type(e) for e in out]
    assert kinds.index(WritePartitionStates) < kinds.index(ReplyLeaderElection)
    lisr = [e for e in out if isinstance(e, SendLeaderAndIsr)]
    assert {e.broker_id for e in lisr} == {1, 2, 3}


def test_a_lost_compare_and_set_is_reported_not_claimed() -> None:
    h = Harness()
    h.restart(1)
    for tp, s in list(h.m.leadership.items()):
        h.m.leadership[tp] = s.new_isr((1, 2, 3))
    h.lose.add(("t", 0))
    results = reply_of(h.run(LeaderElectionRequested(0, frozenset({("t", 0)}), request_id=6)))
    assert results[("t", 0)][0] == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE


def test_an_election_nobody_waits_for_has_no_reply() -> None:
    h = Harness()
    assert h.run(LeaderElectionRequested(0, None)) == []


def test_the_periodic_check_rebalances_only_past_the_percentage() -> None:
    h = Harness()
    h.restart(1)
    for tp, s in list(h.m.leadership.items()):
        h.m.leadership[tp] = s.new_isr((1, 2, 3))
    # broker 1 leads 0 of its 1 preferred partition: 100 % > 10 %
    out = h.run(LeaderImbalanceCheck(10))
    assert [e for e in out if isinstance(e, WritePartitionStates)]
    assert not [e for e in out if isinstance(e, ReplyLeaderElection)]
    assert h.leaders()[("t", 0)] == 1
    assert h.run(LeaderImbalanceCheck(10)) == []  # balanced now


def test_the_periodic_check_waits_for_reassignments() -> None:
    h = Harness()
    h.restart(1)
    for tp, s in list(h.m.leadership.items()):
        h.m.leadership[tp] = s.new_isr((1, 2, 3))
    h.run(BrokersChanged({i: broker(i, 10 if i == 1 else 0) for i in (1, 2, 3, 4)}))
    h.run(ReassignmentRequested({("t", 1): (2, 3, 4)}, 1))
    assert h.m.reassignments()
    assert h.run(LeaderImbalanceCheck(10)) == []
    assert h.leaders()[("t", 0)] != 1


def test_partitions_with_a_write_in_flight_are_held_back() -> None:
    d = decide(0, {("t", 0): st(2), ("t", 2): st(1)}, tps=[("t", 0), ("t", 2)])
    d.hold_back({("t", 0)})
    assert list(d.proposals) == [("t", 2)]
    assert d.results[("t", 0)][0] == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    reply = d.reply(3)
    assert reply.results[("t", 2)] == (ErrorCode.NO_ERROR, None)
    assert reply.leaders == {("t", 2): 3}
    lost = d.reply(3, lost={("t", 2)})
    assert lost.results[("t", 2)][0] == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    assert lost.leaders == {}


def test_the_legacy_election_znode_round_trips_and_refuses_garbage() -> None:
    data = zd.encode_preferred_replica_election([("t", 0), ("u", 3)])
    assert zd.decode_preferred_replica_election(data) == [("t", 0), ("u", 3)]
    # Kafka's tool writes {"partitions": [...]} (with or without a version)
    assert zd.decode_preferred_replica_election(
        b'{"partitions":[{"topic":"t","partition":1}]}'
    ) == [("t", 1)]
    for bad in (
        b"{}",
        b'{"partitions":[{"topic":"t"}]}',
        b'{"partitions":[{"topic":1,"partition":0}]}',
    ):
        with pytest.raises(zd.ZkDataError):
            zd.decode_preferred_replica_election(bad)
