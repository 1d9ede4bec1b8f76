"""The controller machine driven through partition moves on four brokers: start, completion once the
target is in sync (leader handed over, removed replica deleted), cancel, replace, errors that change
nothing, a controller failover that resumes a move from the topic znode, and a topic deletion
that waits for the moves of its partitions (Kafka: ineligible while a reassignment is in progress).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from kafkalite.cluster.controller.machine import (
    AlterPartitionItem,
    AlterPartitionRequested,
    BrokerInfo,
    BrokersChanged,
    ControllerMachine,
    DeleteTopicZNodes,
    LegacyReassignmentRequested,
    PartitionStatesWritten,
    ReassignmentRequested,
    ReplyReassignment,
    SendLeaderAndIsr,
    SendStopReplica,
    SendUpdateMetadata,
    Startup,
    TopicDeletionRequested,
    TopicInfo,
    TopicsChanged,
    WriteLegacyReassignments,
    WritePartitionStates,
    WriteTopicAssignment,
)
from kafkalite.cluster.controller.reassignment import ReplicaAssignment
from kafkalite.cluster.controller.states import LeaderIsr
from kafkalite.protocol.errors import ErrorCode

TP = ("orders", 0)
TID = uuid.uuid4()


def broker(i: int) -> BrokerInfo:
    return BrokerInfo(i, "127.0.0.1", 9000 + i, None, 100 + i)


class Harness:
    """Plays the driver: every ZooKeeper write succeeds; topic znode writes are recorded."""

    def __init__(self, topics: dict[str, TopicInfo] | None = None, states: Any = None) -> None:
        self.m = ControllerMachine(1)
        self.versions: dict[Any, int] = {tp: s.partition_epoch for tp, s in (states or {}).items()}
        self.znodes: dict[str, TopicInfo] = dict(topics or {})
        self.rid = 0
        self.last: list[Any] = []
        self.run(
            Startup(1, {i: broker(i) for i in (1, 2, 3, 4, 5)}, dict(topics or {}), states or {})
        )

    def run(self, event: Any) -> list[Any]:
        out: list[Any] = []
        queue = list(self.m.handle(event))
        while queue:
            eff = queue.pop(0)
            out.append(eff)
            if isinstance(eff, WritePartitionStates):
                done = {}
                for tp, s in eff.states.items():
                    assert s.partition_epoch == self.versions.get(tp, -1), "CAS on a stale version"
                    self.versions[tp] = self.versions.get(tp, -1) + 1
                    done[tp] = self.versions[tp]
                queue[:0] = self.m.handle(PartitionStatesWritten(eff.tag, done))
            elif isinstance(eff, WriteTopicAssignment):
                self.znodes[eff.topic.name] = eff.topic
        self.last = out
        return out

    def reassign(self, targets: dict[Any, Any]) -> dict[Any, ErrorCode]:
        self.rid += 1
        out = self.run(ReassignmentRequested(targets, self.rid))
        (reply,) = [e for e in out if isinstance(e, ReplyReassignment)]
        return {tp: code for tp, (code, _msg) in reply.results.items()}

    def isr(self, isr: tuple[int, ...], tp: Any = TP) -> None:
        st = self.m.leadership[tp]
        item = AlterPartitionItem(tp, st.leader_epoch, isr, st.partition_epoch)
        self.run(AlterPartitionRequested(st.leader, 100 + st.leader, (item,), 99))

    def sent(self, kind: type) -> list[Any]:
        return [e for e in self.last if isinstance(e, kind)]

    def znode(self, tp: Any = TP) -> ReplicaAssignment:
        t = self.znodes[tp[0]]
        p = tp[1]
        return ReplicaAssignment(t.assignment[p], t.adding.get(p, ()), t.removing.get(p, ()))


def on_123() -> Harness:
    h = Harness()
    h.run(TopicsChanged({"orders": TopicInfo("orders", TID, {0: (1, 2, 3), 1: (2, 3, 4)})}))
    h.znodes["orders"] = h.m.topics["orders"]
    return h


def test_a_move_runs_on_the_union_then_switches_to_the_target_once_in_sync() -> None:
    h = on_123()
    before = h.m.leadership[TP]
    assert h.reassign({TP: (2, 3, 4)}) == {TP: ErrorCode.NO_ERROR}
    # the znode holds the union (target first) with adding / removing, before anything else
    assert h.znode() == ReplicaAssignment((2, 3, 4, 1), (4,), (1,))
    assert isinstance(h.last[0], WriteTopicAssignment)
    # the leader epoch moves and all four replicas hear of the union; nothing stops yet
    st = h.m.leadership[TP]
    assert (st.leader, st.leader_epoch, st.isr) == (1, before.leader_epoch + 1, (1, 2, 3))
    lai = {e.broker_id: e.partitions[TP] for e in h.sent(SendLeaderAndIsr)}
    assert sorted(lai) == [1, 2, 3, 4] and lai[4].replicas == (2, 3, 4, 1)
    assert not h.sent(SendStopReplica)
    assert h.m.reassignments() == {TP: ReplicaAssignment((2, 3, 4, 1), (4,), (1,))}
    # broker 4 caught up: the leader adds it to the ISR, which completes the move
    h.isr((1, 2, 3, 4))
    st = h.m.leadership[TP]
    assert st.leader == 2 and st.isr == (2, 3, 4) and st.leader_epoch == before.leader_epoch + 2
    assert h.znode() == ReplicaAssignment((2, 3, 4))
    assert h.m.reassignments() == {}
    kinds = [type(e).__name__ for e in h.last]
    # the new leader is told before the old one is stopped and deleted
    assert kinds.index("SendLeaderAndIsr") < kinds.index("SendStopReplica")
    assert sorted(e.broker_id for e in h.sent(SendLeaderAndIsr)) == [2, 3, 4]
    (stop,) = h.sent(SendStopReplica)
    assert (stop.broker_id, stop.partitions, stop.delete) == (1, (TP,), True)
    assert any(TP in e.partitions for e in h.sent(SendUpdateMetadata))


def test_cancel_goes_back_to_the_original_replicas_and_deletes_the_added_ones() -> None:
    h = on_123()
    h.reassign({TP: (2, 3, 4)})
    h.isr((1, 2, 3))  # nothing changes: 4 has not caught up
    assert h.reassign({TP: None}) == {TP: ErrorCode.NO_ERROR}
    assert h.znode() == ReplicaAssignment((2, 3, 1))  # the original set, in Kafka's order
    st = h.m.leadership[TP]
    assert st.leader == 1 and set(st.isr) == {1, 2, 3}
    (stop,) = h.sent(SendStopReplica)
    assert (stop.broker_id, stop.delete) == (4, True)
    assert h.m.reassignments() == {}
    # nothing left to cancel
    assert h.reassign({TP: None}) == {TP: ErrorCode.NO_REASSIGNMENT_IN_PROGRESS}


def test_a_new_target_replaces_the_one_in_flight() -> None:
    h = on_123()
    h.reassign({TP: (2, 3, 4)})
    h.isr((1, 2, 3, 4))  # completes... so start a fresh move and replace it mid-way
    h.reassign({TP: (3, 4, 5)})
    assert h.znode() == ReplicaAssignment((3, 4, 5, 2), (5,), (2,))
    assert h.reassign({TP: (3, 4, 1)}) == {TP: ErrorCode.NO_ERROR}
    assert h.znode() == ReplicaAssignment((3, 4, 1, 2), (1,), (2,))
    (stop,) = h.sent(SendStopReplica)
    assert (stop.broker_id, stop.delete) == (5, True)  # added by the old target, not the new one
    h.isr((2, 3, 4, 1))
    assert h.znode() == ReplicaAssignment((3, 4, 1))
    assert h.m.leadership[TP].leader == 3


@pytest.mark.parametrize(
    ("targets", "code"),
    [
        ({TP: (2, 3, 9)}, ErrorCode.INVALID_REPLICATION_ASSIGNMENT),  # no broker 9
        ({TP: (2, 2, 4)}, ErrorCode.INVALID_REPLICATION_ASSIGNMENT),
        ({TP: ()}, ErrorCode.INVALID_REPLICATION_ASSIGNMENT),
        ({("orders", 7): (1, 2, 3)}, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ({("nope", 0): (1, 2, 3)}, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ({TP: None}, ErrorCode.NO_REASSIGNMENT_IN_PROGRESS),
    ],
)
def test_bad_requests_get_kafkas_codes_and_change_nothing(targets: Any, code: ErrorCode) -> None:
    h = on_123()
    topics, states = dict(h.m.topics), dict(h.m.leadership)
    assert h.reassign(targets) == {tp: code for tp in targets}
    assert [type(e) for e in h.last] == [ReplyReassignment]
    assert h.m.topics == topics and h.m.leadership == states


def test_one_bad_partition_does_not_stop_the_others() -> None:
    h = on_123()
    res = h.reassign({TP: (2, 3, 4), ("orders", 1): (2, 3, 9)})
    assert res == {TP: ErrorCode.NO_ERROR, ("orders", 1): ErrorCode.INVALID_REPLICATION_ASSIGNMENT}
    assert h.znode(("orders", 1)) == ReplicaAssignment((2, 3, 4))


@pytest.mark.parametrize(("isr", "done"), [((1, 2, 3), False), ((1, 2, 3, 4), True)])
def test_a_new_controller_resumes_a_move_from_the_topic_znode(
    isr: tuple[int, ...], done: bool
) -> None:
    topic = TopicInfo("orders", TID, {0: (2, 3, 4, 1)}, {0: (4,)}, {0: (1,)})
    h = Harness({"orders": topic}, {TP: LeaderIsr(1, 7, isr, 12)})
    # every replica of the union hears of it at startup
    assert 4 in {e.broker_id for e in h.last if isinstance(e, SendLeaderAndIsr)}
    if done:
        assert h.znode() == ReplicaAssignment((2, 3, 4))
        assert h.m.leadership[TP].leader == 2
        assert [e.broker_id for e in h.last if isinstance(e, SendStopReplica)] == [1]
    else:
        assert h.m.reassignments() == {TP: ReplicaAssignment((2, 3, 4, 1), (4,), (1,))}
        h.isr((1, 2, 3, 4))
        assert h.znode() == ReplicaAssignment((2, 3, 4))


def legacy_writes(h: Harness) -> list[dict[Any, Any]]:
    return [e.targets for e in h.last if isinstance(e, WriteLegacyReassignments)]


def test_the_legacy_znode_starts_moves_and_is_deleted_when_they_are_done() -> None:
    h = on_123()
    p1 = ("orders", 1)
    h.run(LegacyReassignmentRequested({TP: (2, 3, 4), p1: (2, 3, 9), ("orders", 2): (1,)}))
    # the refused partitions (no broker 9, no partition 2) leave the znode; the other runs
    assert legacy_writes(h) == [{TP: (2, 3, 4)}]
    assert h.znode() == ReplicaAssignment((2, 3, 4, 1), (4,), (1,))
    assert h.znode(p1) == ReplicaAssignment((2, 3, 4))
    # the controller's own rewrite fires the watch again: nothing new to do
    h.run(LegacyReassignmentRequested({TP: (2, 3, 4)}))
    assert h.last == []
    h.isr((1, 2, 3, 4))
    assert h.znode() == ReplicaAssignment((2, 3, 4))
    assert legacy_writes(h) == [{}]  # all done: the znode is deleted


def test_an_api_request_takes_a_partition_over_from_the_legacy_znode() -> None:
    h = on_123()
    h.run(LegacyReassignmentRequested({TP: (2, 3, 4), ("orders", 1): (1, 2, 3)}))
    assert h.reassign({TP: (2, 3, 5)}) == {TP: ErrorCode.NO_ERROR}
    assert legacy_writes(h) == [{("orders", 1): (1, 2, 3)}]
    assert h.znode() == ReplicaAssignment((2, 3, 5, 1), (5,), (1,))


def test_a_request_arriving_while_the_switch_is_written_is_not_overwritten() -> None:
    h = on_123()
    h.reassign({TP: (2, 3, 4)})
    st = h.m.leadership[TP]
    item = AlterPartitionItem(TP, st.leader_epoch, (1, 2, 3, 4), st.partition_epoch)
    # drive by hand: the ISR grows, the completion write goes out but has not come back yet
    effects = h.m.handle(AlterPartitionRequested(1, 101, (item,), 7))
    (isr_write,) = [e for e in effects if isinstance(e, WritePartitionStates)]
    follow = h.m.handle(PartitionStatesWritten(isr_write.tag, {TP: st.partition_epoch + 1}))
    (switch,) = [e for e in follow if isinstance(e, WritePartitionStates)]
    h.versions[TP] = st.partition_epoch + 1
    assert h.reassign({TP: (2, 3, 5)}) == {TP: ErrorCode.NO_ERROR}  # replaces the move
    h.versions[TP] += 1
    h.run(PartitionStatesWritten(switch.tag, {TP: h.versions[TP]}))
    assert h.m.assignment(TP) == ReplicaAssignment((2, 3, 5, 1), (5,), (1,))
    assert h.m.reassignments() == {TP: ReplicaAssignment((2, 3, 5, 1), (5,), (1,))}


def test_brokers_dying_and_returning_mid_move() -> None:
    h = on_123()
    h.reassign({TP: (2, 3, 4)})
    h.isr((1, 2, 3))
    # the leader dies: the union's order (target first) picks an in-sync replica of the target
    h.run(BrokersChanged({i: broker(i) for i in (2, 3, 4, 5)}))
    st = h.m.leadership[TP]
    assert st.leader == 2 and 1 not in st.isr
    assert h.m.reassignments() == {TP: ReplicaAssignment((2, 3, 4, 1), (4,), (1,))}
    # the joining broker restarts: it hears of the partition again and the move goes on
    h.run(BrokersChanged({i: broker(i) for i in (2, 3, 5)}))
    back = {**{i: broker(i) for i in (2, 3, 5)}, 4: BrokerInfo(4, "127.0.0.1", 9004, None, 999)}
    h.run(BrokersChanged(back))
    assert TP in next(e for e in h.sent(SendLeaderAndIsr) if e.broker_id == 4).partitions
    h.isr((2, 3, 4))
    assert h.znode() == ReplicaAssignment((2, 3, 4)) and h.m.leadership[TP].leader == 2
    # broker 1 was down when the move finished: nothing can be sent to it
    assert not h.sent(SendStopReplica)


def test_a_legacy_target_that_is_already_the_assignment_is_done_at_once() -> None:
    h = on_123()
    h.run(LegacyReassignmentRequested({("orders", 1): (2, 3, 4)}))
    assert legacy_writes(h) == [{}]
    assert h.m.reassignments() == {}


def stopped(h: Harness) -> list[tuple[int, tuple[Any, ...]]]:
    return sorted((e.broker_id, e.partitions) for e in h.sent(SendStopReplica))


@pytest.mark.parametrize("finish", ["in sync", "leader dies first"])
def test_deleting_a_topic_with_a_move_in_flight_waits_for_the_move(finish: str) -> None:
    h = on_123()
    h.reassign({TP: (2, 3, 4)})
    h.run(TopicDeletionRequested(frozenset({"orders"})))
    # held back: nothing deleted, the topic still served and its move still listed and running
    assert not h.sent(DeleteTopicZNodes) and not h.sent(SendStopReplica)
    assert "orders" in h.m.topics and h.m.deletion_held == {"orders"}
    assert all(e.partitions[TP].state.leader == 1 for e in h.sent(SendUpdateMetadata))
    assert h.m.reassignments() == {TP: ReplicaAssignment((2, 3, 4, 1), (4,), (1,))}
    # the watch fires again: still held, nothing sent
    h.run(TopicDeletionRequested(frozenset({"orders"})))
    assert h.last == []
    # a topic queued for deletion takes no new move, nor a cancel (as Kafka)
    p1 = ("orders", 1)
    assert h.reassign({p1: (1, 2, 3)}) == {p1: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert h.reassign({TP: None}) == {TP: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    if finish == "leader dies first":
        # the leader (a removed replica) dies: leadership moves, the move (and deletion) wait on
        h.run(BrokersChanged({i: broker(i) for i in (2, 3, 4, 5)}))
        assert "orders" in h.m.topics and not h.sent(DeleteTopicZNodes)
        h.isr((2, 3, 4))
    else:
        h.isr((1, 2, 3, 4))
    # the move is done: the deletion goes ahead
    assert DeleteTopicZNodes("orders") in h.last
    assert "orders" not in h.m.topics and h.m.deletion_held == set()
    assert ("orders", 0) in {tp for _b, tps in stopped(h) for tp in tps}


def test_a_new_controller_holds_a_deletion_whose_topic_is_moving() -> None:
    moving = TopicInfo("orders", TID, {0: (2, 3, 4, 1)}, {0: (4,)}, {0: (1,)})
    still = TopicInfo("gone", uuid.uuid4(), {0: (1, 2, 3)})
    states = {TP: LeaderIsr(1, 7, (1, 2, 3), 12), ("gone", 0): LeaderIsr(1, 3, (1, 2, 3), 4)}
    h = Harness({"orders": moving, "gone": still}, states)
    h.run(
        Startup(
            2,
            {i: broker(i) for i in (1, 2, 3, 4, 5)},
            {"orders": h.m.topics["orders"], "gone": h.m.topics["gone"]},
            dict(h.m.leadership),
            frozenset({"orders", "gone"}),
        )
    )
    # the topic that does not move goes at once; the moving one waits, its move resumed
    assert h.sent(DeleteTopicZNodes) == [DeleteTopicZNodes("gone")]
    assert h.m.deletion_held == {"orders"} and "orders" not in h.m.deleting
    assert 4 in {e.broker_id for e in h.sent(SendLeaderAndIsr) if TP in e.partitions}
    h.isr((1, 2, 3, 4))
    assert DeleteTopicZNodes("orders") in h.last and "orders" not in h.m.topics
