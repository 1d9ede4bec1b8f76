"""Partition reassignment (KIP-455) as pure decisions: the replica assignment with its adding and removing
replicas, validation of requests, each step of a move, and which topic deletions a move holds back.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from kafkalite.cluster.controller.events import TopicInfo
from kafkalite.cluster.controller.states import NO_LEADER, LeaderIsr, TopicPartition
from kafkalite.protocol.errors import ErrorCode


@dataclass(frozen=True, slots=True)
class ReplicaAssignment:
    """A partition's replicas as the topic znode holds them (Kafka's ReplicaAssignment): during a move
    `replicas` is the target followed by the original replicas not in it."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @property
    def is_being_reassigned(self) -> bool:
        return bool(self.adding or self.removing)

    @property
    def origin(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.adding)

    @property
    def target(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.removing)

    def reassign_to(self, target: Sequence[int]) -> ReplicaAssignment:
        """Move from the original replicas (not the in-flight union) to `target`."""
        origin = self.origin
        full = tuple(dict.fromkeys((*target, *origin)))
        return ReplicaAssignment(
            full,
            tuple(r for r in full if r not in origin),
            tuple(r for r in full if r not in target),
        )


def validate_target(
    current: ReplicaAssignment, target: Sequence[int], live: Collection[int]
) -> tuple[ErrorCode, str] | None:
    """Why `target` cannot be a partition's new replica set (Kafka's checks, in its order), or None."""
    if not target:
        return (
            ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
            "Empty replica list specified in partition reassignment.",
        )
    if len(set(target)) != len(target):
        return (
            ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
            f"Duplicate replica ids in partition reassignment replica list: {list(target)}",
        )
    if any(r < 0 for r in target):
        return (
            ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
            f"Invalid broker id in replica list: {list(target)}",
        )
    adding = current.reassign_to(target).adding
    if not set(adding) <= set(live):
        return (
            ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
            f"Replica assignment has brokers that are not alive. Replica list: {list(adding)}, "
            f"live broker list: {sorted(live)}",
        )
    return None


def build_reassignment(
    current: ReplicaAssignment, target: Sequence[int] | None
) -> ReplicaAssignment | None:
    """The assignment a request asks for; a null target cancels the move in flight (back to the
    original replicas). None: a cancel with nothing to cancel (NO_REASSIGNMENT_IN_PROGRESS)."""
    if target is None:
        return current.reassign_to(current.origin) if current.is_being_reassigned else None
    return current.reassign_to(target)


Results = dict[TopicPartition, tuple[ErrorCode, str | None]]


def check_reassignments(
    targets: Mapping[TopicPartition, Sequence[int] | None],
    assignment_of: Callable[[TopicPartition], ReplicaAssignment],
    live: Collection[int],
    deleting: Collection[str],
) -> tuple[Results, dict[TopicPartition, ReplicaAssignment]]:
    """Validate every partition of a request, in Kafka's order and with its codes: (results, the
    assignments accepted). A topic queued for deletion answers UNKNOWN_TOPIC_OR_PARTITION, a cancel
    too, as Kafka's controller skips reassignments of topics being deleted."""
    results: Results = {}
    accepted: dict[TopicPartition, ReplicaAssignment] = {}
    for tp, target in targets.items():
        current = assignment_of(tp)
        why = validate_target(current, target, live) if target is not None else None
        if why is not None:
            results[tp] = why
            continue
        new = build_reassignment(current, target)
        if new is None:
            results[tp] = (
                ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                f"No reassignment in progress for {tp[0]}-{tp[1]}",
            )
        elif tp[0] in deleting or not current.replicas:
            results[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
        else:
            accepted[tp] = new
            results[tp] = (ErrorCode.NO_ERROR, None)
    return results, accepted


def topics_being_reassigned(topics: Iterable[TopicInfo]) -> set[str]:
    """Topics with a partition move in flight: Kafka's controller marks them ineligible for
    deletion ("topic reassignment in progress"); their deletion waits until the moves are done."""
    return {t.name for t in topics if any(t.adding.values()) or any(t.removing.values())}


@dataclass(frozen=True, slots=True)
class ReassignmentStep:
    """One change of a partition under reassignment: its new leadership (leader epoch bumped), the
    assignment to record once that is written (None: unchanged), and the replicas to stop and delete."""

    state: LeaderIsr
    final: ReplicaAssignment | None
    stop: tuple[int, ...]


def is_complete(assignment: ReplicaAssignment, isr: Collection[int]) -> bool:
    """Every target replica is in sync: the move can switch to the target set."""
    return assignment.is_being_reassigned and set(assignment.target) <= set(isr)


def reassignment_step(
    st: LeaderIsr,
    assignment: ReplicaAssignment,
    unneeded: Collection[int],
    live: Collection[int],
) -> ReassignmentStep:
    """The next step of a move, given the partition's leadership and assignment (already updated to
    the request) and the replicas an earlier target added that the new one no longer has.

    Complete (every target replica in the ISR): the replicas become the target, the removed ones
    leave the ISR and are stopped; otherwise the leader epoch is bumped so every replica of the
    union learns the replica set (new replicas start following). A leader that is being removed
    (or is not live) hands over to the first live in-sync replica of the remaining set."""
    drop = set(unneeded)
    final: ReplicaAssignment | None = None
    replicas_after = assignment.replicas
    if is_complete(assignment, set(st.isr) - drop):
        final = ReplicaAssignment(assignment.target)
        replicas_after = final.replicas
        drop |= set(assignment.removing)
    drop -= set(replicas_after)
    isr = tuple(r for r in st.isr if r not in drop and r in replicas_after)
    if st.leader in replicas_after and st.leader in live and st.leader in isr:
        leader = st.leader
    else:
        leader = next((r for r in replicas_after if r in live and r in isr), NO_LEADER)
    stop = tuple(r for r in dict.fromkeys((*unneeded, *assignment.removing)) if r in drop)
    return ReassignmentStep(
        LeaderIsr(leader, st.leader_epoch + 1, isr, st.partition_epoch), final, stop
    )
