"""ControllerContext: what the controller knows (Kafka's ControllerContext) — brokers, topics, leadership, the
partition and replica state tables, deletions and moves under way, partition-state writes in flight — and its queries.

It also builds the LeaderAndIsr and UpdateMetadata requests that announce that knowledge to brokers.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from kafkalite.cluster.controller.events import (
    BrokerInfo,
    Effect,
    PartitionInfo,
    SendLeaderAndIsr,
    SendUpdateMetadata,
    TopicInfo,
    WritePartitionStates,
)
from kafkalite.cluster.controller.leader_balance import ElectionDecision
from kafkalite.cluster.controller.reassignment import ReplicaAssignment
from kafkalite.cluster.controller.states import (
    NO_LEADER,
    LeaderIsr,
    PartitionState,
    ReplicaState,
    TopicPartition,
)
from kafkalite.protocol.errors import ErrorCode

LEADER_DURING_DELETE = -2


@dataclass
class PendingWrite:
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


class ControllerContext:
    """The controller's state and its queries; ControllerMachine reacts to events over it."""

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
        self.pending_writes: dict[str, PendingWrite] = {}
        self.writing: set[TopicPartition] = set()  # partitions with a ZooKeeper write in flight
        # reassignment steps held back by a write in flight: partition -> replicas to drop
        self.reassign_later: dict[TopicPartition, set[int]] = {}
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

    def next_tag(self) -> str:
        self._next_tag += 1
        return f"w{self._next_tag}"

    # -- partition-state writes in flight and what announces them ------------------------------------------
    def write_states(
        self,
        kind: str,
        proposals: dict[TopicPartition, LeaderIsr],
        new: frozenset[TopicPartition] = frozenset(),
    ) -> list[Effect]:
        # one write per partition at a time: a partition whose write is in flight is decided again
        # when that write has come back (see ControllerMachine._written)
        proposals = {tp: s for tp, s in proposals.items() if tp not in self.writing}
        if not proposals:
            return []
        tag = self.next_tag()
        self.pending_writes[tag] = PendingWrite(kind, proposals, new=new)
        self.writing.update(proposals)
        return [WritePartitionStates(tag, proposals, self.epoch)]

    def forget_topic(self, name: str) -> None:
        info = self.topics.pop(name, None)
        self.deleting.discard(name)
        self.deletion_held.discard(name)
        self.deletion_waits.pop(name, None)
        if info is None:
            return
        for p in info.assignment:
            tp = (name, p)
            self.reassign_later.pop(tp, None)
            self.offline_replicas.pop(tp, None)
            self.leadership.pop(tp, None)
            self.partition_states.pop(tp, None)
            for r in info.assignment[p]:
                self.replica_states.pop((tp, r), None)

    def set_assignment(self, tp: TopicPartition, a: ReplicaAssignment) -> None:
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

    def partition_info(self, tp: TopicPartition, is_new: bool = False) -> PartitionInfo:
        replicas = self.replicas(tp)
        if tp[0] in self.deleting:
            st = LeaderIsr(LEADER_DURING_DELETE, -1, (), -1)  # brokers forget it (UpdateMetadata)
        else:
            st = self.leadership.get(tp) or LeaderIsr(NO_LEADER, -1, (), -1)
        gone = self.offline_replicas.get(tp, ())
        offline = tuple(r for r in replicas if r not in self.brokers or r in gone)
        return PartitionInfo(st, replicas, offline, is_new)

    def send_leader_and_isr(
        self,
        tps: Iterable[TopicPartition],
        *,
        new: frozenset[TopicPartition] = frozenset(),
        only: set[int] | None = None,
    ) -> list[Effect]:
        """One LeaderAndIsr per live replica broker, for the partitions it hosts."""
        by_broker: dict[int, dict[TopicPartition, PartitionInfo]] = {}
        for tp in tps:
            info = self.partition_info(tp, tp in new)
            for r in info.replicas:
                if r in self.brokers and (only is None or r in only):
                    by_broker.setdefault(r, {})[tp] = info
        return [
            SendLeaderAndIsr(b, self.epoch, parts, self.topic_ids(parts))
            for b, parts in sorted(by_broker.items())
        ]

    def update_metadata(
        self, broker_ids: tuple[int, ...], tps: Iterable[TopicPartition]
    ) -> SendUpdateMetadata:
        parts = {tp: self.partition_info(tp) for tp in tps}
        return SendUpdateMetadata(
            broker_ids,
            self.epoch,
            parts,
            tuple(sorted(self.brokers.values(), key=lambda b: b.broker_id)),
            self.topic_ids(parts),
        )

    def topic_ids(self, parts: Iterable[TopicPartition]) -> dict[str, uuid.UUID]:
        return {t: self.topics[t].topic_id for t, _ in parts if t in self.topics}
