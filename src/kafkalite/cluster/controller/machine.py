"""ControllerMachine: the controller's decisions as a function of events — brokers joining and dying,
new topics, deletions, controlled shutdown, AlterPartition — returning effects (ZooKeeper writes,
LeaderAndIsr / UpdateMetadata / StopReplica to brokers, replies) for KafkaController to carry out.

Partition leadership changes only after its ZooKeeper write succeeded (PartitionStatesWritten).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from kafkalite.cluster.controller.election import (
    controlled_shutdown_leader,
    initial_leader,
    offline_partition_leader,
)
from kafkalite.cluster.controller.events import (
    AlterPartitionItem,
    AlterPartitionRequested,
    BrokerInfo,
    BrokersChanged,
    ControlledShutdownRequested,
    DeleteTopicZNodes,
    Effect,
    Event,
    LeaderAndIsrResponseReceived,
    LeaderElectionRequested,
    LeaderImbalanceCheck,
    LegacyReassignmentRequested,
    LogDirEventNotified,
    PartitionInfo,
    PartitionStatesReloaded,
    PartitionStatesWritten,
    ReadPartitionStates,
    ReassignmentRequested,
    ReplyAlterPartition,
    ReplyControlledShutdown,
    ReplyLeaderElection,
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
from kafkalite.cluster.controller.leader_balance import (
    ElectionDecision,
    decide_elections,
    rebalance_candidates,
)
from kafkalite.cluster.controller.offline_dirs import (
    newly_offline,
    offline_replica_proposals,
    usable_replicas,
)
from kafkalite.cluster.controller.reassignment import (
    ReplicaAssignment,
    check_reassignments,
    is_complete,
    reassignment_step,
    topics_being_reassigned,
)
from kafkalite.cluster.controller.states import (
    NO_LEADER,
    LeaderIsr,
    PartitionState,
    ReplicaState,
    TopicPartition,
    partition_transition,
    replica_transition,
)
from kafkalite.protocol.errors import ErrorCode

log = logging.getLogger("kafkalite.cluster.controller")

__all__ = [
    "AlterPartitionItem",
    "AlterPartitionRequested",
    "BrokerInfo",
    "BrokersChanged",
    "ControlledShutdownRequested",
    "ControllerMachine",
    "DeleteTopicZNodes",
    "Effect",
    "Event",
    "LEADER_DURING_DELETE",
    "LeaderElectionRequested",
    "LeaderImbalanceCheck",
    "LegacyReassignmentRequested",
    "PartitionInfo",
    "PartitionStatesReloaded",
    "PartitionStatesWritten",
    "ReadPartitionStates",
    "ReassignmentRequested",
    "ReplyAlterPartition",
    "ReplyControlledShutdown",
    "ReplyLeaderElection",
    "ReplyReassignment",
    "SendLeaderAndIsr",
    "SendStopReplica",
    "SendUpdateMetadata",
    "Startup",
    "TopicDeletionRequested",
    "TopicInfo",
    "TopicsChanged",
    "WriteLegacyReassignments",
    "WritePartitionStates",
    "WriteTopicAssignment",
]

P, R = PartitionState, ReplicaState
LEADER_DURING_DELETE = -2


@dataclass
class _Pending:
    """What to do once a WritePartitionStates comes back."""

    kind: str  # "elect" | "alter" | "shutdown" | "reassign" | "leaders" (ElectLeaders)
    states: dict[TopicPartition, LeaderIsr]
    # "reassign": the assignment each partition takes once written, and the replicas to delete
    final: dict[TopicPartition, ReplicaAssignment] = field(default_factory=dict)
    stop: dict[TopicPartition, tuple[int, ...]] = field(default_factory=dict)
    base: dict[TopicPartition, ReplicaAssignment] = field(default_factory=dict)  # decided from
    new: frozenset[TopicPartition] = frozenset()
    request_id: int = -1
    broker_id: int = -1
    rejected: dict[TopicPartition, ErrorCode] = field(default_factory=dict)
    election: ElectionDecision | None = None  # "leaders": the answers decided without a write


def _without_brokers(st: LeaderIsr, dead: set[int]) -> LeaderIsr:
    """Dead brokers leave the ISR, except that an ISR never empties: when every member is gone the
    last leader (or first member) stays, as Kafka keeps it, so no out-of-sync replica leads later.
    A dead leader leaves the partition leaderless (NO_LEADER) at a new leader epoch."""
    isr = tuple(r for r in st.isr if r not in dead)
    if not isr:
        isr = (st.leader,) if st.leader in st.isr else st.isr[:1]
    leader = NO_LEADER if st.leader in dead else st.leader
    return LeaderIsr(leader, st.leader_epoch + 1, isr, st.partition_epoch)


class ControllerMachine:
    """The controller's state (Kafka's ControllerContext) and its reactions to events."""

    def __init__(self, broker_id: int, unclean: Callable[[str], bool] = lambda _t: False) -> None:
        self.broker_id = broker_id
        self.unclean = unclean
        self.epoch = -1
        self.brokers: dict[int, BrokerInfo] = {}
        self.shutting_down: set[int] = set()
        self.topics: dict[str, TopicInfo] = {}
        self.leadership: dict[TopicPartition, LeaderIsr] = {}
        self.partition_states: dict[TopicPartition, PartitionState] = {}
        self.replica_states: dict[tuple[TopicPartition, int], ReplicaState] = {}
        self.deleting: set[str] = set()
        # topics whose deletion waits for replicas on brokers that are down (Kafka's "ineligible"
        # replicas): topic -> those brokers; the deletion finishes when each has been told
        self.deletion_waits: dict[str, set[int]] = {}
        # topics marked for deletion while a partition of theirs moves (Kafka: ineligible, "topic
        # reassignment in progress"): deleted once their moves are done
        self.deletion_held: set[str] = set()
        self._pending: dict[str, _Pending] = {}
        self._writing: set[TopicPartition] = set()  # partitions with a ZooKeeper write in flight
        # reassignment steps held back by a write in flight: partition -> replicas to drop
        self._reassign_later: dict[TopicPartition, set[int]] = {}
        # moves asked for through /admin/reassign_partitions that still run: partition -> target
        self.legacy: dict[TopicPartition, tuple[int, ...]] = {}
        # replicas in a failed log dir of a live broker (Kafka's replicasOnOfflineDirs): partition
        # -> those brokers; forgotten when the broker dies or comes back (it recovers its dirs)
        self.offline_replicas: dict[TopicPartition, set[int]] = {}
        self._next_tag = 0

    # -- queries ---------------------------------------------------------------------------------------
    def replicas(self, tp: TopicPartition) -> tuple[int, ...]:
        t = self.topics.get(tp[0])
        return t.assignment.get(tp[1], ()) if t is not None else ()

    def assignment(self, tp: TopicPartition) -> ReplicaAssignment:
        t = self.topics.get(tp[0])
        if t is None:
            return ReplicaAssignment(())
        p = tp[1]
        return ReplicaAssignment(
            t.assignment.get(p, ()), t.adding.get(p, ()), t.removing.get(p, ())
        )

    def reassignments(
        self, tps: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, ReplicaAssignment]:
        """ListPartitionReassignments: the partitions (of `tps`, or all) with a move in flight."""
        out: dict[TopicPartition, ReplicaAssignment] = {}
        for tp in tps if tps is not None else self.all_partitions():
            a = self.assignment(tp)
            if a.is_being_reassigned and tp[0] not in self.deleting:
                out[tp] = a
        return out

    def all_partitions(self) -> list[TopicPartition]:
        return [(t.name, p) for t in self.topics.values() for p in sorted(t.assignment)]

    @property
    def live(self) -> set[int]:
        return set(self.brokers)

    def _tag(self) -> str:
        self._next_tag += 1
        return f"w{self._next_tag}"

    # -- the one entry point --------------------------------------------------------------------------------
    def handle(self, event: Event) -> list[Effect]:
        if isinstance(event, Startup):
            return self._startup(event)
        if isinstance(event, BrokersChanged):
            return self._brokers_changed(event.brokers)
        if isinstance(event, TopicsChanged):
            return self._topics_changed(event.topics)
        if isinstance(event, TopicDeletionRequested):
            return self._delete_topics(event.names)
        if isinstance(event, PartitionStatesWritten):
            return self._written(event)
        if isinstance(event, PartitionStatesReloaded):
            return self._reloaded(event.states)
        if isinstance(event, ControlledShutdownRequested):
            return self._controlled_shutdown(event)
        if isinstance(event, AlterPartitionRequested):
            return self._alter_partition(event)
        if isinstance(event, ReassignmentRequested):
            return self._reassign(event)
        if isinstance(event, LegacyReassignmentRequested):
            return self._legacy_reassign(event)
        if isinstance(event, LeaderImbalanceCheck):
            return self._rebalance_check(event.per_broker_percentage)
        if isinstance(event, LogDirEventNotified):
            return self._log_dir_event(event.broker_ids)
        if isinstance(event, LeaderAndIsrResponseReceived):
            return self._replicas_offline(event)
        return self._leader_election(event)

    # -- startup and membership -----------------------------------------------------------------------------
    def _startup(self, ev: Startup) -> list[Effect]:
        self.epoch = ev.epoch
        self.brokers = dict(ev.brokers)
        self.topics = dict(ev.topics)
        self.leadership = dict(ev.states)
        self.deletion_held = set(ev.deleting) & topics_being_reassigned(ev.topics.values())
        self.deleting = set(ev.deleting) - self.deletion_held
        self.deletion_waits.clear()
        self.shutting_down.clear()
        self._pending.clear()
        self._writing.clear()
        self._reassign_later.clear()
        self.legacy.clear()
        self.offline_replicas.clear()
        self.partition_states.clear()
        self.replica_states.clear()
        live = self.live
        for tp in self.all_partitions():
            st = self.leadership.get(tp)
            if st is None:
                self.partition_states[tp] = P.NEW
            else:
                self.partition_states[tp] = P.ONLINE if st.leader in live else P.OFFLINE
            for r in self.replicas(tp):
                self.replica_states[(tp, r)] = R.ONLINE if r in live else R.OFFLINE
        effects: list[Effect] = []
        # everyone learns the cluster first, then the partitions that need a leader get one
        effects.append(self._update_metadata(tuple(sorted(live)), self.all_partitions()))
        effects += self._send_leader_and_isr(
            [
                tp
                for tp in self.all_partitions()
                if tp in self.leadership and tp[0] not in self.deleting
            ]
        )
        # replicas on brokers that died while no controller watched leave their ISRs now, and
        # partitions they led get a leader (Kafka's OfflineReplica transitions at startup)
        gone = {r for tp in self.all_partitions() for r in self.replicas(tp)} - live
        if gone:
            effects += self._on_brokers_dead(gone)
        effects += self._elect(self._needing_leader())
        if self.deleting:
            effects += self._delete_topics(frozenset(self.deleting))
        # moves in flight resume from the topic znodes: every replica of the union was just told
        # its state; those whose target is in sync finish now, the others when their ISR grows
        effects += self._progress(self.reassignments())
        return effects

    def _needing_leader(self) -> list[TopicPartition]:
        return [
            tp
            for tp, s in self.partition_states.items()
            if s in (P.NEW, P.OFFLINE) and tp[0] not in self.deleting
        ]

    def _brokers_changed(self, brokers: dict[int, BrokerInfo]) -> list[Effect]:
        old = self.brokers
        dead = {b for b in old if b not in brokers or brokers[b].epoch != old[b].epoch}
        joined = {b for b in brokers if b not in old or brokers[b].epoch != old[b].epoch}
        self.brokers = dict(brokers)
        self.shutting_down -= dead
        for gone in self.offline_replicas.values():
            gone -= dead | joined  # a new incarnation reports its failed dirs again
        effects: list[Effect] = []
        if dead:
            log.info("brokers %s are gone", sorted(dead))
            effects += self._on_brokers_dead(dead)
        if joined:
            log.info("brokers %s joined", sorted(joined))
            effects += self._on_brokers_joined(joined)
        return effects

    def _on_brokers_dead(self, dead: set[int]) -> list[Effect]:
        live = self.live
        proposals: dict[TopicPartition, LeaderIsr] = {}
        for tp in self.all_partitions():
            if tp[0] in self.deleting:
                continue
            for r in self.replicas(tp):
                if r in dead:
                    replica_transition(self.replica_states, tp, r, R.OFFLINE)
            st = self.leadership.get(tp)
            if st is None:
                continue
            if st.leader in dead:
                partition_transition(self.partition_states, tp, P.OFFLINE)
                usable = usable_replicas(tp, live, self.offline_replicas)
                elected = offline_partition_leader(
                    st, self.replicas(tp), usable, self.unclean(tp[0])
                )
                if elected is not None:
                    proposals[tp] = elected
                    continue
            if st.leader in dead or any(r in dead for r in st.isr):
                proposals[tp] = _without_brokers(st, dead)
        effects = self._write("elect", proposals)
        if not effects:  # no election (e.g. a drained broker): still tell the others who is gone
            effects.append(self._update_metadata(tuple(sorted(live)), ()))
        return effects

    def _on_brokers_joined(self, joined: set[int]) -> list[Effect]:
        hosted = [tp for tp in self.all_partitions() if any(r in joined for r in self.replicas(tp))]
        for tp in hosted:
            for r in self.replicas(tp):
                if r in joined:
                    replica_transition(self.replica_states, tp, r, R.ONLINE)
        effects: list[Effect] = [
            self._update_metadata(tuple(sorted(self.live)), self.all_partitions())
        ]
        effects += self._send_leader_and_isr(
            [tp for tp in hosted if tp in self.leadership and tp[0] not in self.deleting],
            only=joined,
        )
        effects += self._resume_deletions(joined)
        effects += self._elect(self._needing_leader())
        return effects

    # -- topics --------------------------------------------------------------------------------------
    def _topics_changed(self, topics: dict[str, TopicInfo]) -> list[Effect]:
        new_parts: list[TopicPartition] = []
        for name, info in topics.items():
            old = self.topics.get(name)
            if old is not None and old.topic_id != info.topic_id and old.topic_id.int != 0:
                log.warning("topic %s changed id %s -> %s", name, old.topic_id, info.topic_id)
            self.topics[name] = info
            for p in sorted(info.assignment):
                tp = (name, p)
                if tp not in self.partition_states and tp not in self.leadership:
                    partition_transition(self.partition_states, tp, P.NEW)
                    for r in info.assignment[p]:
                        replica_transition(self.replica_states, tp, r, R.NEW)
                    new_parts.append(tp)
        for name in [n for n in self.topics if n not in topics]:
            self._forget_topic(name)  # deleted behind our back
        return self._elect(new_parts)

    def _elect(self, tps: Iterable[TopicPartition]) -> list[Effect]:
        """Leaders for partitions that have none (new or offline)."""
        proposals: dict[TopicPartition, LeaderIsr] = {}
        new: set[TopicPartition] = set()
        for tp in tps:
            live = usable_replicas(tp, self.live - self.shutting_down, self.offline_replicas)
            replicas = self.replicas(tp)
            st = self.leadership.get(tp)
            if st is None:
                elected = initial_leader(replicas, live)
                if elected is not None:
                    new.add(tp)
            else:
                elected = offline_partition_leader(st, replicas, live, self.unclean(tp[0]))
            if elected is not None:
                proposals[tp] = elected
            else:
                log.warning(
                    "%s-%d has no live in-sync replica to lead it (replicas %s, ISR %s); it stays "
                    "offline", tp[0], tp[1], list(replicas), list(st.isr) if st else [],
                )  # fmt: skip
        return self._write("elect", proposals, new=frozenset(new))

    def _delete_topics(self, names: frozenset[str]) -> list[Effect]:
        effects: list[Effect] = []
        live = self.live
        moving = topics_being_reassigned(self.topics.values())
        for name in sorted(names):
            if name in self.deletion_waits:
                continue  # already under way, waiting for brokers that are down
            if name in moving:
                log.info("deletion of topic %s waits for its partition reassignments", name)
                self.deletion_held.add(name)
                continue
            info = self.topics.get(name)
            self.deleting.add(name)
            if info is None:
                effects.append(DeleteTopicZNodes(name))
                self.deleting.discard(name)
                continue
            tps = [(name, p) for p in sorted(info.assignment)]
            # brokers first forget the topic (leader -2), then replicas stop and delete their logs
            effects.append(self._update_metadata(tuple(sorted(live)), tps))
            by_broker: dict[int, list[TopicPartition]] = {}
            down: set[int] = set()
            for tp in tps:
                for r in self.replicas(tp):
                    if r in live:
                        by_broker.setdefault(r, []).append(tp)
                    else:
                        down.add(r)
            for b, bt in sorted(by_broker.items()):
                effects.append(SendStopReplica(b, self.epoch, tuple(bt), True))
            if down:
                # as Kafka: the topic stays marked for deletion until every replica has been told
                # to delete its log, so a broker that was down does not keep a stray copy
                log.info("deletion of topic %s waits for brokers %s", name, sorted(down))
                self.deletion_waits[name] = down
                continue
            effects.append(DeleteTopicZNodes(name))
            self._forget_topic(name)
        return effects

    def _resume_deletions(self, joined: set[int]) -> list[Effect]:
        """Brokers came back: their replicas of topics being deleted are deleted now."""
        effects: list[Effect] = []
        for name in sorted(self.deletion_waits):
            waiting = self.deletion_waits[name]
            back = waiting & joined
            if not back:
                continue
            info = self.topics.get(name)
            tps = [(name, p) for p in sorted(info.assignment)] if info is not None else []
            for b in sorted(back):
                mine = tuple(tp for tp in tps if b in self.replicas(tp))
                if mine:
                    effects.append(SendStopReplica(b, self.epoch, mine, True))
            waiting -= back
            if not waiting:
                del self.deletion_waits[name]
                effects.append(DeleteTopicZNodes(name))
                self._forget_topic(name)
        return effects

    def _resume_held_deletions(self) -> list[Effect]:
        """Moves finished: the topic deletions they held back go ahead."""
        moving = topics_being_reassigned(
            self.topics[n] for n in self.deletion_held if n in self.topics
        )
        ready = self.deletion_held - moving
        self.deletion_held -= ready
        return self._delete_topics(frozenset(ready)) if ready else []

    def _forget_topic(self, name: str) -> None:
        info = self.topics.pop(name, None)
        self.deleting.discard(name)
        self.deletion_held.discard(name)
        self.deletion_waits.pop(name, None)
        if info is None:
            return
        for p in info.assignment:
            tp = (name, p)
            self._reassign_later.pop(tp, None)
            self.offline_replicas.pop(tp, None)
            self.leadership.pop(tp, None)
            self.partition_states.pop(tp, None)
            for r in info.assignment[p]:
                self.replica_states.pop((tp, r), None)

    # -- controlled shutdown --------------------------------------------------------------------------
    def _controlled_shutdown(self, ev: ControlledShutdownRequested) -> list[Effect]:
        b = self.brokers.get(ev.broker_id)
        if b is None:
            return [ReplyControlledShutdown(ev.request_id, ErrorCode.BROKER_NOT_AVAILABLE, ())]
        if ev.broker_epoch >= 0 and ev.broker_epoch != b.epoch:
            return [ReplyControlledShutdown(ev.request_id, ErrorCode.STALE_BROKER_EPOCH, ())]
        self.shutting_down.add(ev.broker_id)
        live = self.live
        proposals: dict[TopicPartition, LeaderIsr] = {}
        stop: list[TopicPartition] = []
        for tp in self.all_partitions():
            st = self.leadership.get(tp)
            replicas = self.replicas(tp)
            if st is None or ev.broker_id not in replicas or len(replicas) <= 1:
                continue
            if st.leader == ev.broker_id:
                elected = controlled_shutdown_leader(st, replicas, live, self.shutting_down)
                if elected is not None:
                    proposals[tp] = elected
            elif ev.broker_id in st.isr and len(st.isr) > 1:
                proposals[tp] = st.new_isr(tuple(r for r in st.isr if r != ev.broker_id))
                stop.append(tp)
        effects: list[Effect] = []
        if stop:
            effects.append(SendStopReplica(ev.broker_id, self.epoch, tuple(stop), False))
        tag = self._tag()
        proposals = {tp: s for tp, s in proposals.items() if tp not in self._writing}
        pending = _Pending("shutdown", proposals, request_id=ev.request_id, broker_id=ev.broker_id)
        if not proposals:
            return [*effects, self._shutdown_reply(pending)]
        self._pending[tag] = pending
        self._writing.update(proposals)
        return [*effects, WritePartitionStates(tag, proposals, self.epoch)]

    def _shutdown_reply(self, pending: _Pending) -> ReplyControlledShutdown:
        # as Kafka: a partition with one replica has nowhere to go and does not hold up the shutdown
        remaining = tuple(
            tp
            for tp in self.all_partitions()
            if (st := self.leadership.get(tp)) is not None
            and st.leader == pending.broker_id
            and len(self.replicas(tp)) > 1
        )
        return ReplyControlledShutdown(pending.request_id, ErrorCode.NO_ERROR, remaining)

    # -- AlterPartition (KIP-497) -------------------------------------------------------------------------
    def _alter_partition(self, ev: AlterPartitionRequested) -> list[Effect]:
        b = self.brokers.get(ev.broker_id)
        if b is None or (ev.broker_epoch >= 0 and ev.broker_epoch != b.epoch):
            return [ReplyAlterPartition(ev.request_id, ErrorCode.STALE_BROKER_EPOCH, {})]
        rejected: dict[TopicPartition, ErrorCode] = {}
        proposals: dict[TopicPartition, LeaderIsr] = {}
        for item in ev.items:
            tp = item.tp
            st = self.leadership.get(tp)
            if st is None or tp[0] in self.deleting:
                rejected[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif st.leader != ev.broker_id or item.leader_epoch < st.leader_epoch:
                rejected[tp] = ErrorCode.FENCED_LEADER_EPOCH
            elif item.leader_epoch > st.leader_epoch or item.partition_epoch != st.partition_epoch:
                rejected[tp] = ErrorCode.INVALID_UPDATE_VERSION
            elif ev.broker_id not in item.new_isr or not set(item.new_isr) <= set(
                self.replicas(tp)
            ):
                rejected[tp] = ErrorCode.INVALID_REQUEST
            elif any(
                r not in st.isr
                and (
                    r not in self.brokers
                    or r in self.shutting_down
                    or r in self.offline_replicas.get(tp, ())
                )
                for r in item.new_isr
            ):
                rejected[tp] = ErrorCode.INELIGIBLE_REPLICA
            elif tp in self._writing:
                rejected[tp] = ErrorCode.OPERATION_NOT_ATTEMPTED  # another change is being written
            elif tuple(item.new_isr) == st.isr:
                rejected[tp] = ErrorCode.NO_ERROR  # nothing to change: answer with the state
            else:
                proposals[tp] = st.new_isr(tuple(item.new_isr))
        pending = _Pending(
            "alter", proposals, request_id=ev.request_id, broker_id=ev.broker_id, rejected=rejected
        )
        if not proposals:
            return [self._alter_reply(pending, {})]
        tag = self._tag()
        self._pending[tag] = pending
        self._writing.update(proposals)
        return [WritePartitionStates(tag, proposals, self.epoch)]

    def _alter_reply(self, pending: _Pending, failed: dict[TopicPartition, ErrorCode]) -> Effect:
        results: dict[TopicPartition, tuple[ErrorCode, LeaderIsr | None]] = {}
        for tp, code in {**pending.rejected, **failed}.items():
            results[tp] = (code, self.leadership.get(tp) if code == ErrorCode.NO_ERROR else None)
        for tp in pending.states:
            if tp not in failed:
                results[tp] = (ErrorCode.NO_ERROR, self.leadership.get(tp))
        return ReplyAlterPartition(pending.request_id, ErrorCode.NO_ERROR, results)

    # -- leader balance (ElectLeaders, auto.leader.rebalance.enable); decisions in leader_balance --------
    def _leader_election(self, ev: LeaderElectionRequested) -> list[Effect]:
        tps = ev.partitions if ev.partitions is not None else self.all_partitions()
        decision = decide_elections(
            ev.election_type,
            tps,
            assignments={tp: self.replicas(tp) for tp in tps},
            leadership=self.leadership,
            live=self.live - self.shutting_down,
            deleting=self.deleting,
        )
        decision.hold_back(self._writing)
        for tp, s in sorted(decision.proposals.items()):
            log.info(
                "leader election of %s-%d: %d -> %d", *tp, self.leadership[tp].leader, s.leader
            )
        if not decision.proposals:
            return [decision.reply(ev.request_id)] if ev.request_id >= 0 else []
        tag = self._tag()
        self._pending[tag] = _Pending(
            "leaders", decision.proposals, request_id=ev.request_id, election=decision
        )
        self._writing.update(decision.proposals)
        return [WritePartitionStates(tag, decision.proposals, self.epoch)]

    def _rebalance_check(self, per_broker_percentage: int) -> list[Effect]:
        """auto.leader.rebalance.enable's periodic check; none while a partition is being moved."""
        if self.reassignments():
            return []
        tps = rebalance_candidates(
            {tp: self.replicas(tp) for tp in self.all_partitions()},
            self.leadership,
            self.live - self.shutting_down,
            per_broker_percentage,
            self.deleting,
        )
        return self._leader_election(LeaderElectionRequested(0, frozenset(tps))) if tps else []

    # -- writing and announcing --------------------------------------------------------------------------------
    def _write(
        self,
        kind: str,
        proposals: dict[TopicPartition, LeaderIsr],
        new: frozenset[TopicPartition] = frozenset(),
    ) -> list[Effect]:
        # one write per partition at a time: a partition whose write is in flight is decided again
        # when that write has come back (see _written)
        proposals = {tp: s for tp, s in proposals.items() if tp not in self._writing}
        if not proposals:
            return []
        tag = self._tag()
        self._pending[tag] = _Pending(kind, proposals, new=new)
        self._writing.update(proposals)
        return [WritePartitionStates(tag, proposals, self.epoch)]

    def _written(self, ev: PartitionStatesWritten) -> list[Effect]:
        pending = self._pending.pop(ev.tag, None)
        if pending is None:
            return []
        self._writing.difference_update(pending.states)
        changed: list[TopicPartition] = []
        stops: list[Effect] = []
        for tp, version in ev.done.items():
            proposed = pending.states.get(tp)
            if proposed is None or tp[0] not in self.topics:
                continue
            if tp in pending.final and self.assignment(tp) != pending.base.get(tp):
                # a newer request changed the move while this was written: decided again below
                log.info("%s-%d: the move changed while its switch was written", tp[0], tp[1])
            elif tp in pending.final:
                stops += self._switch_assignment(tp, pending.final[tp], pending.stop.get(tp, ()))
            elif tp in pending.stop:
                stops += self._stop_replicas(tp, pending.stop[tp])
            self.leadership[tp] = LeaderIsr(
                proposed.leader, proposed.leader_epoch, proposed.isr, version
            )
            target = P.ONLINE if proposed.leader != NO_LEADER else P.OFFLINE
            if self.partition_states.get(tp) is P.NEW and target is P.ONLINE:
                for r in self.replicas(tp):
                    if r in self.brokers:
                        replica_transition(self.replica_states, tp, r, R.ONLINE)
            partition_transition(self.partition_states, tp, target)
            changed.append(tp)
        effects: list[Effect] = []
        for tp in ev.failed:  # dropped replicas not stopped yet: again after the reload
            gone = [r for r in pending.stop.get(tp, ()) if r not in self.replicas(tp)]
            if gone:
                self._reassign_later.setdefault(tp, set()).update(gone)
        if pending.kind != "alter":
            effects += self._send_leader_and_isr(changed, new=pending.new)
        effects += stops
        if changed:
            effects.append(self._update_metadata(tuple(sorted(self.live)), changed))
        if ev.failed:
            effects.append(ReadPartitionStates(tuple(ev.failed)))
        if pending.kind == "alter":
            effects.append(
                self._alter_reply(
                    pending, {tp: ErrorCode.INVALID_UPDATE_VERSION for tp in ev.failed}
                )
            )
        elif pending.kind == "shutdown":
            effects.append(self._shutdown_reply(pending))
        elif pending.election is not None and pending.request_id >= 0:
            effects.append(pending.election.reply(pending.request_id, ev.failed))
        # a partition left without a leader while its write was in flight gets one now
        effects += self._elect(self._needing_leader())
        effects += self._resume_held_deletions()
        # an ISR that grew may complete a move; steps held back by this write go now
        effects += self._progress([*changed, *pending.states, *self._reassign_later])
        return effects

    def _reloaded(self, states: dict[TopicPartition, LeaderIsr]) -> list[Effect]:
        """Someone else wrote these partition states (a CAS lost): take ZooKeeper's word, then
        elect again where the partition still has no live leader."""
        for tp, st in states.items():
            if tp[0] in self.topics:
                self.leadership[tp] = st
                self.partition_states[tp] = P.ONLINE if st.leader in self.brokers else P.OFFLINE
        effects = self._elect([tp for tp in states if self.partition_states.get(tp) is P.OFFLINE])
        return effects + self._progress(list(states))

    def _info(self, tp: TopicPartition, is_new: bool = False) -> PartitionInfo:
        replicas = self.replicas(tp)
        if tp[0] in self.deleting:
            st = LeaderIsr(LEADER_DURING_DELETE, -1, (), -1)  # brokers forget it (UpdateMetadata)
        else:
            st = self.leadership.get(tp) or LeaderIsr(NO_LEADER, -1, (), -1)
        gone = self.offline_replicas.get(tp, ())
        offline = tuple(r for r in replicas if r not in self.brokers or r in gone)
        return PartitionInfo(st, replicas, offline, is_new)

    def _send_leader_and_isr(
        self,
        tps: Iterable[TopicPartition],
        *,
        new: frozenset[TopicPartition] = frozenset(),
        only: set[int] | None = None,
    ) -> list[Effect]:
        """One LeaderAndIsr per live replica broker, for the partitions it hosts."""
        by_broker: dict[int, dict[TopicPartition, PartitionInfo]] = {}
        for tp in tps:
            info = self._info(tp, tp in new)
            for r in info.replicas:
                if r in self.brokers and (only is None or r in only):
                    by_broker.setdefault(r, {})[tp] = info
        return [
            SendLeaderAndIsr(b, self.epoch, parts, self._topic_ids(parts))
            for b, parts in sorted(by_broker.items())
        ]

    def _update_metadata(
        self, broker_ids: tuple[int, ...], tps: Iterable[TopicPartition]
    ) -> SendUpdateMetadata:
        parts = {tp: self._info(tp) for tp in tps}
        return SendUpdateMetadata(
            broker_ids,
            self.epoch,
            parts,
            tuple(sorted(self.brokers.values(), key=lambda b: b.broker_id)),
            self._topic_ids(parts),
        )

    def _topic_ids(self, parts: Iterable[TopicPartition]) -> dict[str, uuid.UUID]:
        return {t: self.topics[t].topic_id for t, _ in parts if t in self.topics}

    # -- partition reassignment (KIP-455) ------------------------------------------------------------------
    def _reassign(self, ev: ReassignmentRequested) -> list[Effect]:
        """AlterPartitionReassignments: the latest request wins over /admin/reassign_partitions."""
        results, accepted = check_reassignments(
            ev.targets, self.assignment, self.live, self.deleting | self.deletion_held
        )
        effects: list[Effect] = []
        if any(tp in self.legacy for tp in accepted):
            for tp in accepted:
                self.legacy.pop(tp, None)
            effects.append(WriteLegacyReassignments(dict(self.legacy)))
        effects += self._start_reassignments(accepted)
        effects.append(ReplyReassignment(ev.request_id, results))
        return effects

    def _legacy_reassign(self, ev: LegacyReassignmentRequested) -> list[Effect]:
        """/admin/reassign_partitions: partitions not seen yet start (or replace) their move; those
        refused leave the znode, as Kafka's controller removes them."""
        fresh = {tp: t for tp, t in ev.targets.items() if self.legacy.get(tp) != t}
        if not fresh:
            return []
        results, accepted = check_reassignments(
            fresh, self.assignment, self.live, self.deleting | self.deletion_held
        )
        for tp, (code, why) in results.items():
            if code != ErrorCode.NO_ERROR:
                log.warning(
                    "/admin/reassign_partitions: %s-%d refused (%s): %s",
                    tp[0], tp[1], ErrorCode.name_of(code), why,
                )  # fmt: skip
        # a target that is already the assignment (nothing to move) is done at once
        self.legacy = {
            tp: t
            for tp, t in ev.targets.items()
            if (tp in accepted and accepted[tp].is_being_reassigned)
            or (tp in self.legacy and tp not in fresh)
        }
        return [WriteLegacyReassignments(dict(self.legacy)), *self._start_reassignments(accepted)]

    def _start_reassignments(
        self, accepted: dict[TopicPartition, ReplicaAssignment]
    ) -> list[Effect]:
        """Per partition: record the new assignment (union of original and target) in the topic
        znode, stop the replicas an earlier target added that this one drops, take the next step."""
        effects: list[Effect] = []
        topics: set[str] = set()
        for tp, new in accepted.items():
            current = self.assignment(tp)
            unneeded = [r for r in current.replicas if r not in new.replicas]
            if new != current:
                log.info(
                    "reassigning %s-%d: %s -> %s (adding %s, removing %s)", tp[0], tp[1],
                    list(current.replicas), list(new.replicas), list(new.adding), list(new.removing),
                )  # fmt: skip
                self._set_assignment(tp, new)
                topics.add(tp[0])
                for r in new.adding:
                    if (tp, r) not in self.replica_states:
                        replica_transition(self.replica_states, tp, r, R.NEW)
                        replica_transition(self.replica_states, tp, r, R.ONLINE)
            self._reassign_later.setdefault(tp, set()).update(unneeded)
        effects += [WriteTopicAssignment(self.topics[t]) for t in sorted(topics)]
        effects += self._progress(list(accepted), start=True)
        return effects

    def _progress(self, tps: Iterable[TopicPartition], start: bool = False) -> list[Effect]:
        """Take the next step of each partition's move where one is due: the switch to the target
        once it is in sync, the stop of replicas a new target dropped, or (on a request: `start`)
        a leader-epoch bump that tells the union of replicas the new replica set."""
        live = self.live - self.shutting_down
        proposals: dict[TopicPartition, LeaderIsr] = {}
        pending = _Pending("reassign", proposals)
        for tp in dict.fromkeys(tps):
            assignment = self.assignment(tp)
            st = self.leadership.get(tp)
            if tp[0] not in self.topics or tp[0] in self.deleting:
                self._reassign_later.pop(tp, None)
                continue
            unneeded = self._reassign_later.get(tp, set())
            due = start or unneeded or is_complete(assignment, st.isr if st else ())
            if not due:
                self._reassign_later.pop(tp, None)
                continue
            if st is None or tp in self._writing:
                self._reassign_later.setdefault(tp, set())  # decided again after that write
                continue
            step = reassignment_step(st, assignment, unneeded, live)
            self._reassign_later.pop(tp, None)
            proposals[tp] = step.state
            pending.base[tp] = assignment
            if step.final is not None:
                pending.final[tp] = step.final
            if step.stop:
                pending.stop[tp] = step.stop
        if not proposals:
            return []
        tag = self._tag()
        self._pending[tag] = pending
        self._writing.update(proposals)
        return [WritePartitionStates(tag, proposals, self.epoch)]

    def _set_assignment(self, tp: TopicPartition, a: ReplicaAssignment) -> None:
        t = self.topics[tp[0]]
        p = tp[1]
        adding = {k: v for k, v in t.adding.items() if k != p}
        removing = {k: v for k, v in t.removing.items() if k != p}
        if a.adding:
            adding[p] = a.adding
        if a.removing:
            removing[p] = a.removing
        self.topics[tp[0]] = TopicInfo(
            t.name, t.topic_id, {**t.assignment, p: a.replicas}, adding, removing
        )

    def _switch_assignment(
        self, tp: TopicPartition, final: ReplicaAssignment, stop: tuple[int, ...]
    ) -> list[Effect]:
        """The move is done (its leadership written): the replicas become the target."""
        log.info("reassignment of %s-%d complete: replicas %s", tp[0], tp[1], list(final.replicas))
        self._set_assignment(tp, final)
        effects: list[Effect] = [WriteTopicAssignment(self.topics[tp[0]])]
        effects += self._stop_replicas(tp, stop)
        if self.legacy.pop(tp, None) is not None:
            effects.append(WriteLegacyReassignments(dict(self.legacy)))
        return effects

    def _stop_replicas(self, tp: TopicPartition, replicas: tuple[int, ...]) -> list[Effect]:
        """Replicas that left the assignment: offline, then deleted (StopReplica with delete)."""
        effects: list[Effect] = []
        for r in replicas:
            if (tp, r) in self.replica_states:
                for target in (R.OFFLINE, R.DELETION_STARTED, R.DELETION_SUCCESSFUL):
                    replica_transition(self.replica_states, tp, r, target)
                replica_transition(self.replica_states, tp, r, R.NON_EXISTENT)
            if r in self.brokers:
                effects.append(SendStopReplica(r, self.epoch, (tp,), True))
            else:
                log.warning(
                    "replica of %s-%d on broker %d (down) left the assignment; its log stays there",
                    tp[0], tp[1], r,
                )  # fmt: skip
        return effects

    # -- failed log dirs (JBOD); decisions in offline_dirs --------------------------------------------------
    def _log_dir_event(self, broker_ids: frozenset[int]) -> list[Effect]:
        """A broker's log dir failed: send it LeaderAndIsr for every replica it hosts; it answers
        KAFKA_STORAGE_ERROR for those in an offline dir (LeaderAndIsrResponseReceived)."""
        effects: list[Effect] = []
        for b in sorted(broker_ids & self.live):
            hosted = [
                tp
                for tp in self.all_partitions()
                if b in self.replicas(tp) and tp in self.leadership and tp[0] not in self.deleting
            ]
            effects += self._send_leader_and_isr(hosted, only={b})
        return effects

    def _replicas_offline(self, ev: LeaderAndIsrResponseReceived) -> list[Effect]:
        """Replicas of a live broker in an offline log dir: OfflineReplica; their partitions get a
        new leader or lose the replica from their ISR."""
        b = self.brokers.get(ev.broker_id)
        if b is None or b.epoch != ev.broker_epoch:
            return []  # an answer of an earlier incarnation
        tps = [
            tp for tp in ev.storage_errors if tp[0] in self.topics and tp[0] not in self.deleting
        ]
        assignments = {tp: self.replicas(tp) for tp in tps}
        # a partition with a write in flight is left for the broker's answer to the LeaderAndIsr
        # that follows that write (it reports the same storage error again)
        fresh = [
            tp
            for tp in newly_offline(ev.broker_id, tps, assignments, self.offline_replicas)
            if tp not in self._writing
        ]
        if not fresh:
            return []
        log.warning(
            "replicas on broker %d are in an offline log dir: %s",
            ev.broker_id, ", ".join(f"{t}-{p}" for t, p in fresh),
        )  # fmt: skip
        for tp in fresh:
            self.offline_replicas.setdefault(tp, set()).add(ev.broker_id)
            replica_transition(self.replica_states, tp, ev.broker_id, R.OFFLINE)
        proposals = offline_replica_proposals(
            ev.broker_id,
            fresh,
            self.leadership,
            assignments,
            self.live - self.shutting_down,
            self.offline_replicas,
            self.unclean,
        )
        for tp, st in proposals.items():
            if st.leader == NO_LEADER:
                partition_transition(self.partition_states, tp, P.OFFLINE)
        effects = self._write("elect", proposals)
        unwritten = [tp for tp in fresh if tp not in proposals]
        if unwritten:  # no leadership change, but every broker lists the replica as offline
            effects.append(self._update_metadata(tuple(sorted(self.live)), unwritten))
        return effects
