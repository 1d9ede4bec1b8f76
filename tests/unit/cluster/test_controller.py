"""The controller as a pure machine: state tables, elections, placement, and event sequences on a
three-broker cluster — leader death, losing the whole ISR, return, AlterPartition, controlled shutdown,
deletion — plus a property: leaders are live ISR members or none, leader epochs never go back.
"""

from __future__ import annotations

import random
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.cluster.controller.election import (
    PlacementError,
    assign_replicas,
    check_assignment,
    controlled_shutdown_leader,
    offline_partition_leader,
    rack_alternated,
)
from kafkalite.cluster.controller.machine import (
    AlterPartitionItem,
    AlterPartitionRequested,
    BrokerInfo,
    BrokersChanged,
    ControlledShutdownRequested,
    ControllerMachine,
    DeleteTopicZNodes,
    PartitionStatesWritten,
    ReplyAlterPartition,
    ReplyControlledShutdown,
    SendLeaderAndIsr,
    SendStopReplica,
    SendUpdateMetadata,
    Startup,
    TopicDeletionRequested,
    TopicInfo,
    TopicsChanged,
    WritePartitionStates,
)
from kafkalite.cluster.controller.states import (
    NO_LEADER,
    LeaderIsr,
    PartitionState,
    ReplicaState,
    partition_transition,
    replica_transition,
)
from kafkalite.protocol.errors import ErrorCode

TP = ("orders", 0)


def broker(i: int, epoch: int = 100) -> BrokerInfo:
    return BrokerInfo(i, "127.0.0.1", 9000 + i, None, epoch + i)


class Harness:
    """Plays the driver: every ZooKeeper write succeeds (versions count up) unless told otherwise."""

    def __init__(self, brokers: tuple[int, ...] = (1, 2, 3)) -> None:
        self.m = ControllerMachine(1)
        self.versions: dict[Any, int] = {}
        self.sent: list[Any] = []
        self.run(Startup(1, {i: broker(i) for i in brokers}, {}, {}))

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
        self.sent += out
        return out

    def state(self, tp: Any = TP) -> LeaderIsr:
        return self.m.leadership[tp]

    def create(self, name: str = "orders", assignment: Any = None) -> list[Any]:
        info = TopicInfo(name, uuid.uuid4(), assignment or {0: (1, 2, 3), 1: (2, 3, 1)})
        return self.run(TopicsChanged({**self.m.topics, name: info}))


# -- tables ------------------------------------------------------------------------------------------
def test_partition_and_replica_tables_refuse_invalid_moves() -> None:
    ps: dict[Any, PartitionState] = {}
    assert not partition_transition(ps, TP, PartitionState.ONLINE)  # NonExistent -> Online
    assert partition_transition(ps, TP, PartitionState.NEW)
    assert not partition_transition(ps, TP, PartitionState.NON_EXISTENT)  # only from Offline
    assert partition_transition(ps, TP, PartitionState.ONLINE)
    assert partition_transition(ps, TP, PartitionState.OFFLINE)
    assert partition_transition(ps, TP, PartitionState.NON_EXISTENT) and TP not in ps
    rs: dict[Any, ReplicaState] = {}
    assert not replica_transition(rs, TP, 1, ReplicaState.DELETION_STARTED)
    assert replica_transition(rs, TP, 1, ReplicaState.NEW)
    assert replica_transition(rs, TP, 1, ReplicaState.OFFLINE)
    assert replica_transition(rs, TP, 1, ReplicaState.DELETION_STARTED)
    assert replica_transition(rs, TP, 1, ReplicaState.DELETION_SUCCESSFUL)
    assert not replica_transition(rs, TP, 1, ReplicaState.ONLINE)
    assert replica_transition(rs, TP, 1, ReplicaState.NON_EXISTENT) and not rs


# -- elections ----------------------------------------------------------------------------------------
def test_offline_election_prefers_live_isr_and_is_clean_by_default() -> None:
    st = LeaderIsr(1, 4, (1, 3), 7)
    assert offline_partition_leader(st, (1, 2, 3), {2, 3}, False) == LeaderIsr(3, 5, (3,), 7)
    assert offline_partition_leader(st, (1, 2, 3), {2}, False) is None  # 2 is not in sync
    assert offline_partition_leader(st, (1, 2, 3), {2}, True) == LeaderIsr(2, 5, (2,), 7)
    assert controlled_shutdown_leader(st, (1, 2, 3), {1, 2, 3}, {1}) == LeaderIsr(3, 5, (3,), 7)
    assert controlled_shutdown_leader(st, (1, 2, 3), {1, 2, 3}, {1, 3}) is None


def test_placement_spreads_leaders_and_replicas() -> None:
    got = assign_replicas({i: None for i in range(5)}, 10, 3, fixed_start_index=0)
    # Kafka's rack-unaware layout for 5 brokers, 10 partitions, RF 3, start index 0
    assert got[0] == (0, 1, 2) and got[1] == (1, 2, 3) and got[5] == (0, 2, 3)
    leaders = [r[0] for r in got.values()]
    assert sorted(leaders) == sorted(list(range(5)) * 2)
    assert all(len(set(r)) == 3 for r in got.values())
    with pytest.raises(PlacementError, match="larger than available brokers: 2"):
        assign_replicas({1: None, 2: None}, 1, 3)
    with pytest.raises(PlacementError, match="rack information"):
        assign_replicas({1: "a", 2: None}, 1, 1)


def test_rack_aware_placement_puts_replicas_on_distinct_racks() -> None:
    racks = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
    assert rack_alternated(racks) == [1, 3, 5, 2, 4, 6]
    got = assign_replicas(racks, 12, 3, rng=random.Random(7))
    assert all(len({racks[b] for b in r}) == 3 for r in got.values())
    assert check_assignment({0: [1, 2], 1: [2]}, {1, 2}) is not None
    assert check_assignment({0: [1, 1]}, {1}) is not None
    assert check_assignment({0: [1, 9]}, {1}) is not None
    assert check_assignment({0: [1, 2], 1: [2, 1]}, {1, 2}) is None


# -- the machine --------------------------------------------------------------------------------------
def test_new_topic_gets_leaders_and_every_replica_hears_of_it() -> None:
    h = Harness()
    out = h.create()
    assert h.state() == LeaderIsr(1, 0, (1, 2, 3), 0)
    assert h.state(("orders", 1)) == LeaderIsr(2, 0, (2, 3, 1), 0)
    lai = [e for e in out if isinstance(e, SendLeaderAndIsr)]
    assert sorted(e.broker_id for e in lai) == [1, 2, 3]
    assert all(p.is_new for e in lai for p in e.partitions.values())
    um = [e for e in out if isinstance(e, SendUpdateMetadata)]
    assert um and um[-1].broker_ids == (1, 2, 3)


def test_leader_death_elects_from_the_isr_and_shrinks_it() -> None:
    h = Harness()
    h.create()
    out = h.run(BrokersChanged({2: broker(2), 3: broker(3)}))
    assert h.state() == LeaderIsr(2, 1, (2, 3), 1)
    assert h.state(("orders", 1)) == LeaderIsr(2, 1, (2, 3), 1)  # follower 1 left the ISR
    told = {e.broker_id for e in out if isinstance(e, SendLeaderAndIsr)}
    assert told == {2, 3}
    # broker 1 returns (a new broker epoch): it follows, nobody's leadership changes
    out = h.run(
        BrokersChanged({i: broker(i, 200) for i in (1, 2, 3)} | {2: broker(2), 3: broker(3)})
    )
    assert h.state().leader == 2
    back = [e for e in out if isinstance(e, SendLeaderAndIsr) and e.broker_id == 1]
    assert back and all(p.state.leader == 2 for p in back[0].partitions.values())


def test_losing_the_whole_isr_leaves_the_partition_offline_until_a_member_returns() -> None:
    h = Harness()
    h.create(assignment={0: (1, 2, 3)})
    h.run(BrokersChanged({1: broker(1), 3: broker(3)}))  # 2 dies: ISR 1,3
    h.run(BrokersChanged({1: broker(1)}))  # 3 dies: ISR 1
    assert h.state().isr == (1,)
    h.run(BrokersChanged({2: broker(2, 300)}))  # 1 dies; only the out-of-sync 2 is alive
    st = h.state()
    assert st.leader == NO_LEADER and st.isr == (1,)  # no data-losing election
    assert h.m.partition_states[TP] is PartitionState.OFFLINE
    h.run(BrokersChanged({2: broker(2, 300), 1: broker(1, 400)}))  # 1 returns
    assert h.state().leader == 1 and h.m.partition_states[TP] is PartitionState.ONLINE


def test_alter_partition_validates_then_writes_the_new_isr() -> None:
    h = Harness()
    h.create(assignment={0: (1, 2, 3)})
    st = h.state()

    def alter(
        isr: tuple[int, ...],
        *,
        by: int = 1,
        epoch: int | None = None,
        pe: int | None = None,
        broker_epoch: int = 101,
    ) -> ReplyAlterPartition:
        item = AlterPartitionItem(
            TP,
            st.leader_epoch if epoch is None else epoch,
            isr,
            h.state().partition_epoch if pe is None else pe,
        )
        out = h.run(AlterPartitionRequested(by, broker_epoch, (item,), 7))
        return next(e for e in out if isinstance(e, ReplyAlterPartition))

    r = alter((1, 2))
    assert r.results[TP][0] == ErrorCode.NO_ERROR and h.state().isr == (1, 2)
    assert h.state().leader_epoch == st.leader_epoch  # KIP-497: ISR changes keep the leader epoch
    assert alter((1,), by=2, broker_epoch=102).results[TP][0] == ErrorCode.FENCED_LEADER_EPOCH
    assert alter((1,), pe=0).results[TP][0] == ErrorCode.INVALID_UPDATE_VERSION
    assert alter((1,), broker_epoch=5).error == ErrorCode.STALE_BROKER_EPOCH
    h.run(BrokersChanged({1: broker(1), 2: broker(2)}))  # 3 is gone
    assert alter((1, 2, 3)).results[TP][0] == ErrorCode.INELIGIBLE_REPLICA


def test_controlled_shutdown_moves_leadership_away_first() -> None:
    h = Harness()
    h.create()
    out = h.run(ControlledShutdownRequested(1, 101, 9))
    reply = next(e for e in out if isinstance(e, ReplyControlledShutdown))
    assert reply.error == ErrorCode.NO_ERROR and reply.remaining == ()
    assert h.state().leader == 2 and 1 not in h.state().isr
    assert 1 not in h.state(("orders", 1)).isr
    assert any(isinstance(e, SendStopReplica) and e.broker_id == 1 and not e.delete for e in out)
    stale = h.run(ControlledShutdownRequested(2, 5, 10))
    assert stale == [ReplyControlledShutdown(10, ErrorCode.STALE_BROKER_EPOCH, ())]


def test_a_single_replica_partition_does_not_hold_up_controlled_shutdown() -> None:
    h = Harness()
    h.create(assignment={0: (1,)})
    out = h.run(ControlledShutdownRequested(1, 101, 3))
    reply = next(e for e in out if isinstance(e, ReplyControlledShutdown))
    assert reply.remaining == ()  # nowhere to move it: Kafka does not wait for it either
    assert h.state().leader == 1  # still led here until the broker stops


def test_topic_deletion_stops_replicas_and_removes_znodes() -> None:
    h = Harness()
    h.create()
    out = h.run(TopicDeletionRequested(frozenset({"orders"})))
    stops = [e for e in out if isinstance(e, SendStopReplica)]
    assert sorted(e.broker_id for e in stops) == [1, 2, 3] and all(e.delete for e in stops)
    um = next(e for e in out if isinstance(e, SendUpdateMetadata))
    assert all(p.state.leader == -2 for p in um.partitions.values())
    assert DeleteTopicZNodes("orders") in out and "orders" not in h.m.topics


def test_a_lost_compare_and_set_asks_zookeeper_again() -> None:
    h = Harness()
    h.create(assignment={0: (1, 2, 3)})
    out = h.m.handle(BrokersChanged({2: broker(2), 3: broker(3)}))
    write = next(e for e in out if isinstance(e, WritePartitionStates))
    after = h.m.handle(PartitionStatesWritten(write.tag, {}, (TP,)))
    assert any(type(e).__name__ == "ReadPartitionStates" for e in after)
    assert h.state().leader == 1  # nothing applied without the write


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sets(st.integers(1, 4), max_size=4), min_size=1, max_size=12))
def test_random_failures_keep_leaders_live_and_epochs_growing(lives: list[set[int]]) -> None:
    h = Harness((1, 2, 3, 4))
    h.create(assignment={0: (1, 2, 3), 1: (2, 3, 4), 2: (4, 1, 2)})
    epochs = {tp: s.leader_epoch for tp, s in h.m.leadership.items()}
    for gen, live in enumerate(lives, start=1):
        h.run(BrokersChanged({i: broker(i, 1000 * gen if i in live else 0) for i in live}))
        for tp, s in h.m.leadership.items():
            assert s.leader == NO_LEADER or (s.leader in live and s.leader in s.isr), (tp, s, live)
            assert s.isr, "an ISR never empties"
            assert s.leader_epoch >= epochs[tp]
            epochs[tp] = s.leader_epoch


def test_deleting_a_topic_waits_for_replicas_on_brokers_that_are_down() -> None:
    h = Harness()
    h.create()
    h.run(BrokersChanged({1: broker(1), 2: broker(2)}))  # broker 3 dies
    out = h.run(TopicDeletionRequested(frozenset({"orders"})))
    assert sorted(e.broker_id for e in out if isinstance(e, SendStopReplica)) == [1, 2]
    assert DeleteTopicZNodes("orders") not in out and h.m.deletion_waits == {"orders": {3}}
    again = h.run(TopicDeletionRequested(frozenset({"orders"})))  # the watch fires again
    assert not any(isinstance(e, SendStopReplica) for e in again)
    back = h.run(BrokersChanged({1: broker(1), 2: broker(2), 3: broker(3)}))
    stop = [e for e in back if isinstance(e, SendStopReplica)]
    assert [(e.broker_id, e.delete) for e in stop] == [(3, True)]
    assert not any(isinstance(e, SendLeaderAndIsr) and e.broker_id == 3 for e in back)
    um = [e for e in back if isinstance(e, SendUpdateMetadata)]
    assert all(
        p.state.leader == -2 for e in um for tp, p in e.partitions.items() if tp[0] == "orders"
    )
    assert DeleteTopicZNodes("orders") in back and "orders" not in h.m.topics
