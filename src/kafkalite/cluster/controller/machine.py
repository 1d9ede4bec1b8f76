"""ControllerMachine: the controller's decisions as a function of events — brokers joining and dying,
new topics, deletions, controlled shutdown, AlterPartition — returning effects (ZooKeeper writes,
LeaderAndIsr / UpdateMetadata / StopReplica to brokers, replies) for KafkaController to carry out.

Partition leadership changes only after its ZooKeeper write succeeded (PartitionStatesWritten). Its state
is a ControllerContext (controller.context); topic deletion, reassignment and failed log dirs are
in their own modules.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from kafkalite.cluster.controller.context import (
    LEADER_DURING_DELETE,
    ControllerContext,
    PendingWrite,
)
from kafkalite.cluster.controller.election import (
    controlled_shutdown_leader,
    initial_leader,
    offline_partition_leader,
    without_brokers,
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
    decide_elections,
    rebalance_candidates,
)
from kafkalite.cluster.controller.log_dir_events import log_dir_event, replicas_offline
from kafkalite.cluster.controller.offline_dirs import (
    usable_replicas,
)
from kafkalite.cluster.controller.reassigning import (
    legacy_reassign,
    progress,
    reassign,
    stop_replicas,
    switch_assignment,
)
from kafkalite.cluster.controller.reassignment import topics_being_reassigned
from kafkalite.cluster.controller.states import (
    NO_LEADER,
    LeaderIsr,
    PartitionState,
    ReplicaState,
    TopicPartition,
    partition_transition,
    replica_transition,
)
from kafkalite.cluster.controller.topic_deletion import (
    delete_topics,
    resume_deletions,
    resume_held_deletions,
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


class ControllerMachine(ControllerContext):
    """The controller's reactions to events, over its state (ControllerContext)."""

    # -- the one entry point --------------------------------------------------------------------------------
    def handle(self, event: Event) -> list[Effect]:
        if isinstance(event, Startup):
            return self._startup(event)
        if isinstance(event, BrokersChanged):
            return self._brokers_changed(event.brokers)
        if isinstance(event, TopicsChanged):
            return self._topics_changed(event.topics)
        if isinstance(event, TopicDeletionRequested):
            return delete_topics(self, event.names)
        if isinstance(event, PartitionStatesWritten):
            return self._written(event)
        if isinstance(event, PartitionStatesReloaded):
            return self._reloaded(event.states)
        if isinstance(event, ControlledShutdownRequested):
            return self._controlled_shutdown(event)
        if isinstance(event, AlterPartitionRequested):
            return self._alter_partition(event)
        if isinstance(event, ReassignmentRequested):
            return reassign(self, event)
        if isinstance(event, LegacyReassignmentRequested):
            return legacy_reassign(self, event)
        if isinstance(event, LeaderImbalanceCheck):
            return self._rebalance_check(event.per_broker_percentage)
        if isinstance(event, LogDirEventNotified):
            return log_dir_event(self, event.broker_ids)
        if isinstance(event, LeaderAndIsrResponseReceived):
            return replicas_offline(self, event)
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
        self.pending_writes.clear()
        self.writing.clear()
        self.reassign_later.clear()
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
        effects.append(self.update_metadata(tuple(sorted(live)), self.all_partitions()))
        effects += self.send_leader_and_isr(
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
            effects += delete_topics(self, frozenset(self.deleting))
        # moves in flight resume from the topic znodes: every replica of the union was just told
        # its state; those whose target is in sync finish now, the others when their ISR grows
        effects += progress(self, self.reassignments())
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
                proposals[tp] = without_brokers(st, dead)
        effects = self.write_states("elect", proposals)
        if not effects:  # no election (e.g. a drained broker): still tell the others who is gone
            effects.append(self.update_metadata(tuple(sorted(live)), ()))
        return effects

    def _on_brokers_joined(self, joined: set[int]) -> list[Effect]:
        hosted = [tp for tp in self.all_partitions() if any(r in joined for r in self.replicas(tp))]
        for tp in hosted:
            for r in self.replicas(tp):
                if r in joined:
                    replica_transition(self.replica_states, tp, r, R.ONLINE)
        effects: list[Effect] = [
            self.update_metadata(tuple(sorted(self.live)), self.all_partitions())
        ]
        effects += self.send_leader_and_isr(
            [tp for tp in hosted if tp in self.leadership and tp[0] not in self.deleting],
            only=joined,
        )
        effects += resume_deletions(self, joined)
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
            self.forget_topic(name)  # deleted behind our back
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
        return self.write_states("elect", proposals, new=frozenset(new))

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
        tag = self.next_tag()
        proposals = {tp: s for tp, s in proposals.items() if tp not in self.writing}
        pending = PendingWrite(
            "shutdown", proposals, request_id=ev.request_id, broker_id=ev.broker_id
        )
        if not proposals:
            return [*effects, self._shutdown_reply(pending)]
        self.pending_writes[tag] = pending
        self.writing.update(proposals)
        return [*effects, WritePartitionStates(tag, proposals, self.epoch)]

    def _shutdown_reply(self, pending: PendingWrite) -> ReplyControlledShutdown:
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
            elif tp in self.writing:
                rejected[tp] = ErrorCode.OPERATION_NOT_ATTEMPTED  # another change is being written
            elif tuple(item.new_isr) == st.isr:
                rejected[tp] = ErrorCode.NO_ERROR  # nothing to change: answer with the state
            else:
                proposals[tp] = st.new_isr(tuple(item.new_isr))
        pending = PendingWrite(
            "alter", proposals, request_id=ev.request_id, broker_id=ev.broker_id, rejected=rejected
        )
        if not proposals:
            return [self._alter_reply(pending, {})]
        tag = self.next_tag()
        self.pending_writes[tag] = pending
        self.writing.update(proposals)
        return [WritePartitionStates(tag, proposals, self.epoch)]

    def _alter_reply(
        self, pending: PendingWrite, failed: dict[TopicPartition, ErrorCode]
    ) -> Effect:
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
        decision.hold_back(self.writing)
        for tp, s in sorted(decision.proposals.items()):
            log.info(
                "leader election of %s-%d: %d -> %d", *tp, self.leadership[tp].leader, s.leader
            )
        if not decision.proposals:
            return [decision.reply(ev.request_id)] if ev.request_id >= 0 else []
        tag = self.next_tag()
        self.pending_writes[tag] = PendingWrite(
            "leaders", decision.proposals, request_id=ev.request_id, election=decision
        )
        self.writing.update(decision.proposals)
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

    def _written(self, ev: PartitionStatesWritten) -> list[Effect]:
        pending = self.pending_writes.pop(ev.tag, None)
        if pending is None:
            return []
        self.writing.difference_update(pending.states)
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
                stops += switch_assignment(self, tp, pending.final[tp], pending.stop.get(tp, ()))
            elif tp in pending.stop:
                stops += stop_replicas(self, tp, pending.stop[tp])
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
                self.reassign_later.setdefault(tp, set()).update(gone)
        if pending.kind != "alter":
            effects += self.send_leader_and_isr(changed, new=pending.new)
        effects += stops
        if changed:
            effects.append(self.update_metadata(tuple(sorted(self.live)), changed))
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
        effects += resume_held_deletions(self)
        # an ISR that grew may complete a move; steps held back by this write go now
        effects += progress(self, [*changed, *pending.states, *self.reassign_later])
        return effects

    def _reloaded(self, states: dict[TopicPartition, LeaderIsr]) -> list[Effect]:
        """Someone else wrote these partition states (a CAS lost): take ZooKeeper's word, then
        elect again where the partition still has no live leader."""
        for tp, st in states.items():
            if tp[0] in self.topics:
                self.leadership[tp] = st
                self.partition_states[tp] = P.ONLINE if st.leader in self.brokers else P.OFFLINE
        effects = self._elect([tp for tp in states if self.partition_states.get(tp) is P.OFFLINE])
        return effects + progress(self, list(states))
