"""The requests the controller sends, built from its effects and its context: LeaderAndIsr,
UpdateMetadata and StopReplica at the versions it speaks; the storage errors a LeaderAndIsr answer reports.
"""

from __future__ import annotations

import uuid
from typing import Any

from kafkalite.cluster.controller.context import ControllerContext
from kafkalite.cluster.controller.events import (
    PartitionInfo,
    SendLeaderAndIsr,
    SendStopReplica,
    SendUpdateMetadata,
)
from kafkalite.cluster.metadata_cache import SECURITY_PROTOCOL_IDS as _PROTOCOL_IDS
from kafkalite.cluster.metadata_cache import ListenerEndpoint
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.cluster import (
    LeaderAndIsrRequest,
    StopReplicaRequest,
    UpdateMetadataRequest,
)

TopicPartition = tuple[str, int]
LEADER_AND_ISR_VERSION = 6
UPDATE_METADATA_VERSION = 7
STOP_REPLICA_VERSION = 3


def broker_epoch(ctx: ControllerContext, broker_id: int) -> int:
    """The epoch of the broker's registration the controller knows (-1: not registered)."""
    b = ctx.brokers.get(broker_id)
    return b.epoch if b is not None else -1


def leader_and_isr_request(
    ctx: ControllerContext, controller_id: int, eff: SendLeaderAndIsr
) -> Any:
    """LeaderAndIsr for one broker: the partitions it hosts, with the moves under way and their leaders."""
    R = LeaderAndIsrRequest
    P = R.LeaderAndIsrPartitionState
    by_topic: dict[str, list[Any]] = {}
    leaders: set[int] = set()
    for (topic, part), info in sorted(eff.partitions.items()):
        moving = ctx.assignment((topic, part))
        by_topic.setdefault(topic, []).append(
            P(
                partition_index=part,
                controller_epoch=eff.controller_epoch,
                leader=info.state.leader,
                leader_epoch=info.state.leader_epoch,
                isr=list(info.state.isr),
                partition_epoch=info.state.partition_epoch,
                replicas=list(info.replicas),
                adding_replicas=list(moving.adding),
                removing_replicas=list(moving.removing),
                is_new=info.is_new,
                leader_recovery_state=0,
            )
        )
        if info.state.leader >= 0:
            leaders.add(info.state.leader)
    return R(
        controller_id=controller_id,
        controller_epoch=eff.controller_epoch,
        broker_epoch=broker_epoch(ctx, eff.broker_id),
        type=0,
        topic_states=[
            R.LeaderAndIsrTopicState(
                topic_name=t,
                topic_id=eff.topic_ids.get(t, uuid.UUID(int=0)),
                partition_states=ps,
            )
            for t, ps in by_topic.items()
        ],
        live_leaders=[
            R.LeaderAndIsrLiveLeader(broker_id=b.broker_id, host_name=b.host, port=b.port)
            for b in ctx.brokers.values()
            if b.broker_id in leaders
        ],
    )


def update_metadata_request(
    ctx: ControllerContext, controller_id: int, eff: SendUpdateMetadata, to: int
) -> Any:
    """UpdateMetadata for broker `to`: partition states and every live broker's endpoints."""
    R = UpdateMetadataRequest
    P = R.UpdateMetadataPartitionState
    B = R.UpdateMetadataBroker
    by_topic: dict[str, list[Any]] = {}
    for (topic, part), info in sorted(eff.partitions.items()):
        by_topic.setdefault(topic, []).append(_um_partition(P, part, eff.controller_epoch, info))
    return R(
        controller_id=controller_id,
        controller_epoch=eff.controller_epoch,
        broker_epoch=broker_epoch(ctx, to),
        topic_states=[
            R.UpdateMetadataTopicState(
                topic_name=t,
                topic_id=eff.topic_ids.get(t, uuid.UUID(int=0)),
                partition_states=ps,
            )
            for t, ps in by_topic.items()
        ],
        live_brokers=[
            B(
                id=b.broker_id,
                endpoints=[
                    B.UpdateMetadataEndpoint(
                        port=ep.port,
                        host=ep.host,
                        listener=ep.listener,
                        security_protocol=_PROTOCOL_IDS.get(ep.security_protocol, 0),
                    )
                    for ep in (
                        b.listeners or (ListenerEndpoint("PLAINTEXT", b.host, b.port, "PLAINTEXT"),)
                    )
                ],
                rack=b.rack,
            )
            for b in eff.brokers
        ],
    )


def stop_replica_request(ctx: ControllerContext, controller_id: int, eff: SendStopReplica) -> Any:
    """StopReplica for one broker, each partition at its current leader epoch."""
    R = StopReplicaRequest
    by_topic: dict[str, list[Any]] = {}
    for topic, part in eff.partitions:
        st = ctx.leadership.get((topic, part))
        by_topic.setdefault(topic, []).append(
            R.StopReplicaTopicState.StopReplicaPartitionState(
                partition_index=part,
                leader_epoch=st.leader_epoch if st is not None else -1,
                delete_partition=eff.delete,
            )
        )
    return R(
        controller_id=controller_id,
        controller_epoch=eff.controller_epoch,
        broker_epoch=broker_epoch(ctx, eff.broker_id),
        topic_states=[
            R.StopReplicaTopicState(topic_name=t, partition_states=ps) for t, ps in by_topic.items()
        ],
    )


def _um_partition(cls: Any, part: int, controller_epoch: int, info: PartitionInfo) -> Any:
    return cls(
        partition_index=part,
        controller_epoch=controller_epoch,
        leader=info.state.leader,
        leader_epoch=info.state.leader_epoch,
        isr=list(info.state.isr),
        zk_version=info.state.partition_epoch,
        replicas=list(info.replicas),
        offline_replicas=list(info.offline),
    )


def storage_errors(request: Any, response: Any) -> frozenset[TopicPartition]:
    """The partitions a LeaderAndIsr (v5+: topics by id) response answers KAFKA_STORAGE_ERROR."""
    names = {t.topic_id: t.topic_name for t in request.topic_states}
    out: set[TopicPartition] = set()
    for t in response.topics or ():
        name = names.get(t.topic_id)
        for pe in t.partition_errors:
            if name is not None and pe.error_code == ErrorCode.KAFKA_STORAGE_ERROR:
                out.add((name, pe.partition_index))
    return frozenset(out)
