"""OffsetForLeaderEpoch (key 23) v0-4: the end offset of a leader epoch on the partition's leader, for a
follower's truncation after a leader change (KIP-101/279) and a consumer's log-truncation check (KIP-320).

Answers from the leader's leader-epoch cache; a follower or a stale epoch gets Kafka's error code.
"""

from __future__ import annotations

from kafkalite.broker.context import RequestContext
from kafkalite.cluster.errors import ReplicaError, UnknownTopicOrPartition
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.offsets import (
    OFFSET_FOR_LEADER_EPOCH,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)
from kafkalite.security.acl import AclOperation, ResourceType

API = OFFSET_FOR_LEADER_EPOCH
_Topic = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
_Part = _Topic.EpochEndOffset


async def handle(
    ctx: RequestContext, request: OffsetForLeaderEpochRequest
) -> OffsetForLeaderEpochResponse:
    broker = ctx.broker
    rm = broker.replica_manager
    cache = broker.metadata_cache
    topics = []
    # a follower (replica id >= 0) needs CLUSTER_ACTION, a consumer DESCRIBE on the topic
    follower = ctx.api_version >= 3 and request.replica_id >= 0
    follower_ok = not follower or ctx.authorize_cluster(AclOperation.CLUSTER_ACTION)
    for t in request.topics:
        parts: list[_Part] = []
        topics.append(_Topic(topic=t.topic, partitions=parts))
        topic_ok = follower_ok and (
            follower or ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, t.topic)
        )
        for p in t.partitions:
            r = _Part(error_code=0, partition=p.partition, leader_epoch=-1, end_offset=-1)
            parts.append(r)
            if not topic_ok:
                r.error_code = int(
                    ErrorCode.TOPIC_AUTHORIZATION_FAILED
                    if follower_ok
                    else ErrorCode.CLUSTER_AUTHORIZATION_FAILED
                )
                continue
            current = p.current_leader_epoch if ctx.api_version >= 2 else -1
            try:
                part = rm.leader_partition(t.topic, p.partition, current)
            except ReplicaError as exc:
                r.error_code = int(exc.error_code)
                if isinstance(exc, UnknownTopicOrPartition) and cache.partition(
                    t.topic, p.partition
                ):
                    r.error_code = int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
                continue
            r.leader_epoch, r.end_offset = part.end_offset_for_epoch(p.leader_epoch)
    return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics)
