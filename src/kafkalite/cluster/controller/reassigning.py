"""Partition reassignment in the controller (KIP-455 and /admin/reassign_partitions): a request starts a move,
each step is written as partition state, the switch to the target and the stop of dropped replicas finish it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from kafkalite.cluster.controller.context import ControllerContext, PendingWrite
from kafkalite.cluster.controller.events import (
    Effect,
    LegacyReassignmentRequested,
    ReassignmentRequested,
    ReplyReassignment,
    SendStopReplica,
    WriteLegacyReassignments,
    WritePartitionStates,
    WriteTopicAssignment,
)
from kafkalite.cluster.controller.reassignment import (
    ReplicaAssignment,
    check_reassignments,
    is_complete,
    reassignment_step,
)
from kafkalite.cluster.controller.states import (
    LeaderIsr,
    ReplicaState,
    TopicPartition,
    replica_transition,
)
from kafkalite.protocol.errors import ErrorCode

log = logging.getLogger("kafkalite.cluster.controller")

R = ReplicaState


def reassign(ctx: ControllerContext, ev: ReassignmentRequested) -> list[Effect]:
    """AlterPartitionReassignments: the latest request wins over /admin/reassign_partitions."""
    results, accepted = check_reassignments(
        ev.targets, ctx.assignment, ctx.live, ctx.deleting | ctx.deletion_held
    )
    effects: list[Effect] = []
    if any(tp in ctx.legacy for tp in accepted):
        for tp in accepted:
            ctx.legacy.pop(tp, None)
        effects.append(WriteLegacyReassignments(dict(ctx.legacy)))
    effects += start_reassignments(ctx, accepted)
    effects.append(ReplyReassignment(ev.request_id, results))
    return effects


def legacy_reassign(ctx: ControllerContext, ev: LegacyReassignmentRequested) -> list[Effect]:
    """/admin/reassign_partitions: partitions not seen yet start (or replace) their move; those
    refused leave the znode, as Kafka's controller removes them."""
    fresh = {tp: t for tp, t in ev.targets.items() if ctx.legacy.get(tp) != t}
    if not fresh:
        return []
    results, accepted = check_reassignments(
        fresh, ctx.assignment, ctx.live, ctx.deleting | ctx.deletion_held
    )
    for tp, (code, why) in results.items():
        if code != ErrorCode.NO_ERROR:
            log.warning(
                "/admin/reassign_partitions: %s-%d refused (%s): %s",
                tp[0], tp[1], ErrorCode.name_of(code), why,
            )  # fmt: skip
    # a target that is already the assignment (nothing to move) is done at once
    ctx.legacy = {
        tp: t
        for tp, t in ev.targets.items()
        if (tp in accepted and accepted[tp].is_being_reassigned)
        or (tp in ctx.legacy and tp not in fresh)
    }
    return [WriteLegacyReassignments(dict(ctx.legacy)), *start_reassignments(ctx, accepted)]


def start_reassignments(
    ctx: ControllerContext, accepted: dict[TopicPartition, ReplicaAssignment]
) -> list[Effect]:
    """Per partition: record the new assignment (union of original and target) in the topic
    znode, stop the replicas an earlier target added that this one drops, take the next step."""
    effects: list[Effect] = []
    topics: set[str] = set()
    for tp, new in accepted.items():
        current = ctx.assignment(tp)
        unneeded = [r for r in current.replicas if r not in new.replicas]
        if new != current:
            log.info(
                "reassigning %s-%d: %s -> %s (adding %s, removing %s)", tp[0], tp[1],
                list(current.replicas), list(new.replicas), list(new.adding), list(new.removing),
            )  # fmt: skip
            ctx.set_assignment(tp, new)
            topics.add(tp[0])
            for r in new.adding:
                if (tp, r) not in ctx.replica_states:
                    replica_transition(ctx.replica_states, tp, r, R.NEW)
                    replica_transition(ctx.replica_states, tp, r, R.ONLINE)
        ctx.reassign_later.setdefault(tp, set()).update(unneeded)
    effects += [WriteTopicAssignment(ctx.topics[t]) for t in sorted(topics)]
    effects += progress(ctx, list(accepted), start=True)
    return effects


def progress(
    ctx: ControllerContext, tps: Iterable[TopicPartition], start: bool = False
) -> list[Effect]:
    """Take the next step of each partition's move where one is due: the switch to the target
    once it is in sync, the stop of replicas a new target dropped, or (on a request: `start`)
    a leader-epoch bump that tells the union of replicas the new replica set."""
    live = ctx.live - ctx.shutting_down
    proposals: dict[TopicPartition, LeaderIsr] = {}
    pending = PendingWrite("reassign", proposals)
    for tp in dict.fromkeys(tps):
        assignment = ctx.assignment(tp)
        st = ctx.leadership.get(tp)
        if tp[0] not in ctx.topics or tp[0] in ctx.deleting:
            ctx.reassign_later.pop(tp, None)
            continue
        unneeded = ctx.reassign_later.get(tp, set())
        due = start or unneeded or is_complete(assignment, st.isr if st else ())
        if not due:
            ctx.reassign_later.pop(tp, None)
            continue
        if st is None or tp in ctx.writing:
            ctx.reassign_later.setdefault(tp, set())  # decided again after that write
            continue
        step = reassignment_step(st, assignment, unneeded, live)
        ctx.reassign_later.pop(tp, None)
        proposals[tp] = step.state
        pending.base[tp] = assignment
        if step.final is not None:
            pending.final[tp] = step.final
        if step.stop:
            pending.stop[tp] = step.stop
    if not proposals:
        return []
    tag = ctx.next_tag()
    ctx.pending_writes[tag] = pending
    ctx.writing.update(proposals)
    return [WritePartitionStates(tag, proposals, ctx.epoch)]


def switch_assignment(
    ctx: ControllerContext, tp: TopicPartition, final: ReplicaAssignment, stop: tuple[int, ...]
) -> list[Effect]:
    """The move is done (its leadership written): the replicas become the target."""
    log.info("reassignment of %s-%d complete: replicas %s", tp[0], tp[1], list(final.replicas))
    ctx.set_assignment(tp, final)
    effects: list[Effect] = [WriteTopicAssignment(ctx.topics[tp[0]])]
    effects += stop_replicas(ctx, tp, stop)
    if ctx.legacy.pop(tp, None) is not None:
        effects.append(WriteLegacyReassignments(dict(ctx.legacy)))
    return effects


def stop_replicas(
    ctx: ControllerContext, tp: TopicPartition, replicas: tuple[int, ...]
) -> list[Effect]:
    """Replicas that left the assignment: offline, then deleted (StopReplica with delete)."""
    effects: list[Effect] = []
    for r in replicas:
        if (tp, r) in ctx.replica_states:
            for target in (R.OFFLINE, R.DELETION_STARTED, R.DELETION_SUCCESSFUL):
                replica_transition(ctx.replica_states, tp, r, target)
            replica_transition(ctx.replica_states, tp, r, R.NON_EXISTENT)
        if r in ctx.brokers:
            effects.append(SendStopReplica(r, ctx.epoch, (tp,), True))
        else:
            log.warning(
                "replica of %s-%d on broker %d (down) left the assignment; its log stays there",
                tp[0], tp[1], r,
            )  # fmt: skip
    return effects
