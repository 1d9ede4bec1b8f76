"""AlterPartition (key 56, KIP-497), cluster mode only, answered by the controller: a leader proposes
a new ISR for its partitions; the controller checks broker epoch, leader epoch and partition epoch,
writes the ISR to ZooKeeper and answers each partition with its new state or Kafka's error.
"""

from __future__ import annotations

import uuid

from kafkalite.broker.context import RequestContext
from kafkalite.cluster.controller.machine import AlterPartitionItem
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.cluster import (
    ALTER_PARTITION,
    AlterPartitionRequest,
    AlterPartitionResponse,
)
from kafkalite.security.acl import AclOperation

API = ALTER_PARTITION
CLUSTER_ONLY = True


async def handle(ctx: RequestContext, request: AlterPartitionRequest) -> AlterPartitionResponse:
    if not ctx.authorize_cluster(AclOperation.CLUSTER_ACTION):
        return AlterPartitionResponse(
            throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, topics=[]
        )
    v = ctx.api_version
    zk = ctx.broker.zk_broker
    controller = zk.controller if zk is not None else None
    if controller is None or not controller.active:
        return AlterPartitionResponse(
            throttle_time_ms=0, error_code=ErrorCode.NOT_CONTROLLER, topics=[]
        )
    cache = ctx.broker.metadata_cache
    items: list[AlterPartitionItem] = []
    names: dict[str, uuid.UUID | None] = {}
    unknown: list[tuple[uuid.UUID, int]] = []
    for t in request.topics:
        if v >= 2:
            info = cache.topic_by_id(t.topic_id)
            name = info.name if info is not None else None
        else:
            name = t.topic_name
        for p in t.partitions:
            if name is None:
                unknown.append((t.topic_id, p.partition_index))
                continue
            names[name] = t.topic_id if v >= 2 else None
            isr = tuple(b.broker_id for b in p.new_isr_with_epochs) if v >= 3 else tuple(p.new_isr)
            items.append(
                AlterPartitionItem(
                    (name, p.partition_index), p.leader_epoch, isr, p.partition_epoch
                )
            )
    reply = await controller.alter_partition(request.broker_id, request.broker_epoch, tuple(items))
    T = AlterPartitionResponse.TopicData
    by_topic: dict[str, list[AlterPartitionResponse.TopicData.PartitionData]] = {}
    for (topic, part), (code, state) in reply.results.items():
        by_topic.setdefault(topic, []).append(
            T.PartitionData(
                partition_index=part,
                error_code=code,
                leader_id=state.leader if state is not None else -1,
                leader_epoch=state.leader_epoch if state is not None else -1,
                isr=list(state.isr) if state is not None else [],
                leader_recovery_state=0,
                partition_epoch=state.partition_epoch if state is not None else -1,
            )
        )
    topics = [
        T(topic_name=name if v < 2 else "", topic_id=names.get(name), partitions=ps)
        for name, ps in by_topic.items()
    ]
    for tid, part in unknown:
        topics.append(
            T(
                topic_id=tid,
                partitions=[
                    T.PartitionData(
                        partition_index=part,
                        error_code=ErrorCode.UNKNOWN_TOPIC_ID,
                        leader_id=-1,
                        leader_epoch=-1,
                        isr=[],
                        partition_epoch=-1,
                    )
                ],
            )
        )
    return AlterPartitionResponse(throttle_time_ms=0, error_code=reply.error, topics=topics)
