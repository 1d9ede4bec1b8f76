"""The controller's reactions to failed log dirs (JBOD): a broker's notification is answered with
LeaderAndIsr for its replicas, and replicas it reports in an offline dir go offline, their partitions led
elsewhere or their ISR smaller (the decisions are offline_dirs').
"""

from __future__ import annotations

import logging

from kafkalite.cluster.controller.context import ControllerContext
from kafkalite.cluster.controller.events import Effect, LeaderAndIsrResponseReceived
from kafkalite.cluster.controller.offline_dirs import newly_offline, offline_replica_proposals
from kafkalite.cluster.controller.states import (
    NO_LEADER,
    PartitionState,
    ReplicaState,
    partition_transition,
    replica_transition,
)

log = logging.getLogger("kafkalite.cluster.controller")

P, R = PartitionState, ReplicaState


def log_dir_event(ctx: ControllerContext, broker_ids: frozenset[int]) -> list[Effect]:
    """A broker's log dir failed: send it LeaderAndIsr for every replica it hosts; it answers
    KAFKA_STORAGE_ERROR for those in an offline dir (LeaderAndIsrResponseReceived)."""
    effects: list[Effect] = []
    for b in sorted(broker_ids & ctx.live):
        hosted = [
            tp
            for tp in ctx.all_partitions()
            if b in ctx.replicas(tp) and tp in ctx.leadership and tp[0] not in ctx.deleting
        ]
        effects += ctx.send_leader_and_isr(hosted, only={b})
    return effects


def replicas_offline(ctx: ControllerContext, ev: LeaderAndIsrResponseReceived) -> list[Effect]:
    """Replicas of a live broker in an offline log dir: OfflineReplica; their partitions get a
    new leader or lose the replica from their ISR."""
    b = ctx.brokers.get(ev.broker_id)
    if b is None or b.epoch != ev.broker_epoch:
        return []  # an answer of an earlier incarnation
    tps = [tp for tp in ev.storage_errors if tp[0] in ctx.topics and tp[0] not in ctx.deleting]
    assignments = {tp: ctx.replicas(tp) for tp in tps}
    # a partition with a write in flight is left for the broker's answer to the LeaderAndIsr
    # that follows that write (it reports the same storage error again)
    fresh = [
        tp
        for tp in newly_offline(ev.broker_id, tps, assignments, ctx.offline_replicas)
        if tp not in ctx.writing
    ]
    if not fresh:
        return []
    log.warning(
        "replicas on broker %d are in an offline log dir: %s",
        ev.broker_id, ", ".join(f"{t}-{p}" for t, p in fresh),
    )  # fmt: skip
    for tp in fresh:
        ctx.offline_replicas.setdefault(tp, set()).add(ev.broker_id)
        replica_transition(ctx.replica_states, tp, ev.broker_id, R.OFFLINE)
    proposals = offline_replica_proposals(
        ev.broker_id,
        fresh,
        ctx.leadership,
        assignments,
        ctx.live - ctx.shutting_down,
        ctx.offline_replicas,
        ctx.unclean,
    )
    for tp, st in proposals.items():
        if st.leader == NO_LEADER:
            partition_transition(ctx.partition_states, tp, P.OFFLINE)
    effects = ctx.write_states("elect", proposals)
    unwritten = [tp for tp in fresh if tp not in proposals]
    if unwritten:  # no leadership change, but every broker lists the replica as offline
        effects.append(ctx.update_metadata(tuple(sorted(ctx.live)), unwritten))
    return effects
