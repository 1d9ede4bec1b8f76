"""Shared by the APIs the controller answers (AlterPartitionReassignments, ElectLeaders): this broker's
controller when it is the active one, else None (the request gets NOT_CONTROLLER).
"""

from __future__ import annotations

from kafkalite.broker.context import RequestContext
from kafkalite.cluster.kafka_controller import KafkaController


def active_controller(ctx: RequestContext) -> KafkaController | None:
    """The controller running in this broker, if it currently holds the office."""
    zk = ctx.broker.zk_broker
    controller = zk.controller if zk is not None else None
    return controller if controller is not None and controller.active else None
