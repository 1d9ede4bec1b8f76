"""A failed log dir as the controller sees it: the pure decisions of offline_dirs and the machine's
reaction to a log dir event and to KAFKA_STORAGE_ERROR in LeaderAndIsr answers.
"""

from __future__ import annotations

import uuid
from typing import Any

from kafkalite.cluster.controller.events import (
    AlterPartitionItem,
    AlterPartitionRequested,
    LeaderAndIsrResponseReceived,
    LogDirEventNotified,
)
from kafkalite.cluster.controller.machine import (
    BrokerInfo,
    BrokersChanged,
    ControllerMachine,
    PartitionStatesWritten,
    ReplyAlterPartition,
    SendLeaderAndIsr,
    SendUpdateMetadata,
    Startup,
    TopicInfo,
    TopicsChanged,
    WritePartitionStates,
)
from kafkalite.cluster.controller.offline_dirs import newly_offline, offline_replica_proposals
from kafkalite.cluster.controller.states import NO_LEADER, LeaderIsr, ReplicaState
from kafkalite.protocol.errors import ErrorCode

A, B = ("t", 0), ("t", 1)


def _never(_t: str) -> bool:
    return False


def test_leader_in_failed_dir_hands_over_to_the_next_isr_member() -> None:
    st = {A: LeaderIsr(1, 4, (1, 2, 3), 7)}
    out = offline_replica_proposals(1, [A], st, {A: (1, 2, 3)}, {1, 2, 3}, {}, _never)
    assert out[A].leader == 2 and out[A].isr == (2, 3) and out[A].leader_epoch == 5


def test_follower_in_failed_dir_leaves_the_isr_only() -> None:
    st = {A: LeaderIsr(2, 4, (1, 2, 3), 7)}
    out = offline_replica_proposals(3, [A], st, {A: (1, 2, 3)}, {1, 2, 3}, {}, _never)
    assert out[A].leader == 2 and out[A].isr == (1, 2)


def test_out_of_sync_follower_changes_nothing() -> None:
    st = {A: LeaderIsr(2, 4, (1, 2), 7)}
    assert offline_replica_proposals(3, [A], st, {A: (1, 2, 3)}, {1, 2, 3}, {}, _never) == {}


def test_no_other_in_sync_replica_leaves_the_partition_leaderless() -> None:
    st = {A: LeaderIsr(1, 4, (1,), 7)}
    out = offline_replica_proposals(1, [A], st, {A: (1, 2)}, {1, 2}, {}, _never)
    assert out[A].leader == NO_LEADER and out[A].isr == (1,)
    # unclean election allowed: the live out-of-sync replica takes over
    out = offline_replica_proposals(1, [A], st, {A: (1, 2)}, {1, 2}, {}, lambda _t: True)
    assert out[A].leader == 2 and out[A].isr == (2,)


def test_a_replica_known_offline_elsewhere_is_not_elected() -> None:
    st = {A: LeaderIsr(1, 4, (1, 2, 3), 7)}
    out = offline_replica_proposals(1, [A], st, {A: (1, 2, 3)}, {1, 2, 3}, {A: {2}}, _never)
    assert out[A].leader == 3


def test_newly_offline_skips_known_and_unhosted() -> None:
    got = newly_offline(1, [A, B, ("u", 0)], {A: (1, 2), B: (1, 2), ("u", 0): (2, 3)}, {B: {1}})
    assert got == [A]


# -- the machine ----------------------------------------------------------------------------------
def _broker(i: int, epoch: int = 100) -> BrokerInfo:
    return BrokerInfo(i, "127.0.0.1", 9000 + i, None, epoch + i)


class Cluster:
    def __init__(self) -> None:
        self.m = ControllerMachine(1)
        self.v: dict[Any, int] = {}
        self.run(Startup(1, {i: _broker(i) for i in (1, 2, 3)}, {}, {}))
        self.run(TopicsChanged({"t": TopicInfo("t", uuid.uuid4(), {0: (1, 2, 3), 1: (2, 1, 3)})}))

    def run(self, event: Any) -> list[Any]:
        out: list[Any] = []
        queue = list(self.m.handle(event))
        while queue:
            eff = queue.pop(0)
            out.append(eff)
            if isinstance(eff, WritePartitionStates):
                done = {}
                for tp in eff.states:
                    self.v[tp] = self.v.get(tp, -1) + 1
                    done[tp] = self.v[tp]
                queue[:0] = self.m.handle(PartitionStatesWritten(eff.tag, done))
        return out

    def storage_error(self, broker: int, *tps: Any, epoch: int = -1) -> list[Any]:
        e = _broker(broker).epoch if epoch < 0 else epoch
        return self.run(LeaderAndIsrResponseReceived(broker, e, frozenset(tps)))


def test_log_dir_event_asks_the_broker_about_every_replica_it_hosts() -> None:
    c = Cluster()
    out = c.run(LogDirEventNotified(frozenset({1, 9})))  # 9: not a live broker
    sends = [e for e in out if isinstance(e, SendLeaderAndIsr)]
    assert [s.broker_id for s in sends] == [1]
    assert set(sends[0].partitions) == {A, B}


def test_storage_error_moves_leadership_and_shrinks_isr() -> None:
    c = Cluster()
    assert c.m.leadership[A].leader == 1 and c.m.leadership[B].leader == 2
    out = c.storage_error(1, A, B)
    assert c.m.leadership[A].leader == 2 and 1 not in c.m.leadership[A].isr
    assert c.m.leadership[B].leader == 2 and 1 not in c.m.leadership[B].isr
    assert c.m.replica_states[(A, 1)] is ReplicaState.OFFLINE
    # the brokers are told the new leaders, and every broker lists the replica as offline
    lai = [e for e in out if isinstance(e, SendLeaderAndIsr)]
    assert {e.broker_id for e in lai} >= {2, 3}
    ums = [e for e in out if isinstance(e, SendUpdateMetadata)]
    assert ums and ums[-1].partitions[A].offline == (1,)
    # the same answer again (a later LeaderAndIsr) changes nothing
    before = dict(c.m.leadership)
    assert c.storage_error(1, A, B) == []
    assert c.m.leadership == before


def test_answer_of_an_earlier_incarnation_is_ignored() -> None:
    c = Cluster()
    assert c.storage_error(1, A, epoch=5) == []
    assert c.m.leadership[A].leader == 1


def test_offline_replica_is_never_elected_nor_readmitted_to_the_isr() -> None:
    c = Cluster()
    c.storage_error(3, A)
    assert c.m.leadership[A].isr == (1, 2)
    # broker 1 dies: broker 2 leads; then 2 dies too — broker 3 is live but its replica is
    # offline, so the partition stays leaderless rather than being led from a failed dir
    c.run(BrokersChanged({i: _broker(i) for i in (2, 3)}))
    assert c.m.leadership[A].leader == 2
    st = c.m.leadership[A]
    ask = AlterPartitionItem(A, st.leader_epoch, (2, 3), st.partition_epoch)
    out = c.run(AlterPartitionRequested(2, _broker(2).epoch, (ask,), 7))
    reply = next(e for e in out if isinstance(e, ReplyAlterPartition))
    assert reply.results[A][0] == ErrorCode.INELIGIBLE_REPLICA
    c.run(BrokersChanged({3: _broker(3)}))
    assert c.m.leadership[A].leader == NO_LEADER


def test_broker_restart_forgets_its_offline_replicas() -> None:
    c = Cluster()
    c.storage_error(1, A)
    assert c.m.offline_replicas[A] == {1}
    c.run(BrokersChanged({2: _broker(2), 3: _broker(3)}))
    c.run(BrokersChanged({1: _broker(1, 200), 2: _broker(2), 3: _broker(3)}))
    assert 1 not in c.m.offline_replicas.get(A, set())


def test_log_dir_event_znode_is_kafkas_json() -> None:
    from kafkalite.cluster import zk_data as zd

    data = zd.encode_log_dir_event(3)
    assert data == b'{"version":1,"broker":3,"event":1}'
    assert zd.decode_log_dir_event(data) == 3


def test_acks_all_produce_waiting_on_a_failed_log_answers_storage_error(tmp_path: Any) -> None:
    from kafkalite.cluster.partition import LeaderAndIsrState, Partition
    from kafkalite.records.batch import build_batch
    from kafkalite.storage import Log, LogConfig

    lg = Log.open(tmp_path / "t-0", LogConfig())
    p = Partition("t", 0, 1, lg, lambda _p: None)
    p.make_leader(LeaderAndIsrState(1, 5, (1, 2), (1, 2)), now_ms=1000)
    p.append_records_to_leader(build_batch([(None, b"v", [], 1)]), required_acks=-1)
    assert p.acks_all_done(1) == (False, 0)  # broker 2 has not fetched it
    lg.go_offline()  # its log dir failed: the high watermark will never get there
    assert p.acks_all_done(1) == (True, ErrorCode.KAFKA_STORAGE_ERROR)


def test_unclean_election_skips_a_replica_in_a_failed_dir() -> None:
    c = Cluster()
    c.m.unclean = lambda _t: True
    c.storage_error(3, A)
    c.run(BrokersChanged({i: _broker(i) for i in (2, 3)}))
    c.run(BrokersChanged({3: _broker(3)}))  # only broker 3 is left, and its replica failed
    assert c.m.leadership[A].leader == NO_LEADER
