"""Topic deletion in the controller (Kafka's TopicDeletionManager): brokers forget the topic, replicas stop and
delete their logs, a deletion waits for brokers that are down and for moves under way.
"""

from __future__ import annotations

import logging

from kafkalite.cluster.controller.context import ControllerContext
from kafkalite.cluster.controller.events import (
    DeleteTopicZNodes,
    Effect,
    SendStopReplica,
)
from kafkalite.cluster.controller.reassignment import (
    topics_being_reassigned,
)
from kafkalite.cluster.controller.states import (
    TopicPartition,
)

log = logging.getLogger("kafkalite.cluster.controller")


def delete_topics(ctx: ControllerContext, names: frozenset[str]) -> list[Effect]:
    effects: list[Effect] = []
    live = ctx.live
    moving = topics_being_reassigned(ctx.topics.values())
    for name in sorted(names):
        if name in ctx.deletion_waits:
            continue  # already under way, waiting for brokers that are down
        if name in moving:
            log.info("deletion of topic %s waits for its partition reassignments", name)
            ctx.deletion_held.add(name)
            continue
        info = ctx.topics.get(name)
        ctx.deleting.add(name)
        if info is None:
            effects.append(DeleteTopicZNodes(name))
            ctx.deleting.discard(name)
            continue
        tps = [(name, p) for p in sorted(info.assignment)]
        # brokers first forget the topic (leader -2), then replicas stop and delete their logs
        effects.append(ctx.update_metadata(tuple(sorted(live)), tps))
        by_broker: dict[int, list[TopicPartition]] = {}
        down: set[int] = set()
        for tp in tps:
            for r in ctx.replicas(tp):
                if r in live:
                    by_broker.setdefault(r, []).append(tp)
                else:
                    down.add(r)
        for b, bt in sorted(by_broker.items()):
            effects.append(SendStopReplica(b, ctx.epoch, tuple(bt), True))
        if down:
            # as Kafka: the topic stays marked for deletion until every replica has been told
            # to delete its log, so a broker that was down does not keep a stray copy
            log.info("deletion of topic %s waits for brokers %s", name, sorted(down))
            ctx.deletion_waits[name] = down
            continue
        effects.append(DeleteTopicZNodes(name))
        ctx.forget_topic(name)
    return effects


def resume_deletions(ctx: ControllerContext, joined: set[int]) -> list[Effect]:
    """Brokers came back: their replicas of topics being deleted are deleted now."""
    effects: list[Effect] = []
    for name in sorted(ctx.deletion_waits):
        waiting = ctx.deletion_waits[name]
        back = waiting & joined
        if not back:
            continue
        info = ctx.topics.get(name)
        tps = [(name, p) for p in sorted(info.assignment)] if info is not None else []
        for b in sorted(back):
            mine = tuple(tp for tp in tps if b in ctx.replicas(tp))
            if mine:
                effects.append(SendStopReplica(b, ctx.epoch, mine, True))
        waiting -= back
        if not waiting:
            del ctx.deletion_waits[name]
            effects.append(DeleteTopicZNodes(name))
            ctx.forget_topic(name)
    return effects


def resume_held_deletions(ctx: ControllerContext) -> list[Effect]:
    """Moves finished: the topic deletions they held back go ahead."""
    moving = topics_being_reassigned(ctx.topics[n] for n in ctx.deletion_held if n in ctx.topics)
    ready = ctx.deletion_held - moving
    ctx.deletion_held -= ready
    return delete_topics(ctx, frozenset(ready)) if ready else []
