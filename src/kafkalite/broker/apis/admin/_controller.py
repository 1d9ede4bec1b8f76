"""Shared by the APIs the controller answers (AlterPartitionReassignments, ElectLeaders, ...): this
broker's controller when it is the active one, or a single node's own controller view (one broker).
"""

from __future__ import annotations

from dataclasses import dataclass

from kafkalite.broker.context import RequestContext
from kafkalite.cluster.controller.reassignment import ReplicaAssignment
from kafkalite.cluster.controller.states import LeaderIsr, TopicPartition
from kafkalite.cluster.kafka_controller import KafkaController


def active_controller(ctx: RequestContext) -> KafkaController | None:
    """The controller running in this broker, if it currently holds the office."""
    zk = ctx.broker.zk_broker
    controller = zk.controller if zk is not None else None
    return controller if controller is not None and controller.active else None


def is_single_node(ctx: RequestContext) -> bool:
    """A broker without ZooKeeper: a one-broker cluster that is its own controller."""
    return ctx.broker.zk_broker is None


@dataclass(frozen=True)
class OneBrokerView:
    """What a one-broker cluster's controller knows, from the metadata cache (every partition's
    replicas are this broker; nothing is ever being moved): the inputs of the controller's decisions."""

    live: frozenset[int]
    assignments: dict[TopicPartition, tuple[int, ...]]
    leadership: dict[TopicPartition, LeaderIsr]

    def assignment(self, tp: TopicPartition) -> ReplicaAssignment:
        """The partition's replica assignment (empty: the partition does not exist)."""
        return ReplicaAssignment(self.assignments.get(tp, ()))


def one_broker_view(ctx: RequestContext) -> OneBrokerView:
    cache = ctx.broker.metadata_cache
    assignments: dict[TopicPartition, tuple[int, ...]] = {}
    leadership: dict[TopicPartition, LeaderIsr] = {}
    for topic in cache.topics():
        for p in topic.partitions:
            tp = (topic.name, p.partition)
            assignments[tp] = p.replicas
            leadership[tp] = LeaderIsr(p.leader, p.leader_epoch, p.isr, p.partition_epoch)
    return OneBrokerView(frozenset({ctx.broker.broker_id}), assignments, leadership)
