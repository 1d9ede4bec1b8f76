"""DescribeProducers (key 61, KIP-664): the active producers of partitions this broker leads — epoch, last
sequence and timestamp, coordinator epoch and where their open transaction starts (to find hanging ones).
"""

from __future__ import annotations

from kafkalite.broker.context import RequestContext
from kafkalite.cluster.errors import ReplicaError, UnknownTopicOrPartition
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.txn import (
    DESCRIBE_PRODUCERS,
    DescribeProducersRequest,
    DescribeProducersResponse,
)
from kafkalite.security.acl import AclOperation, ResourceType

API = DESCRIBE_PRODUCERS
_Topic = DescribeProducersResponse.TopicResponse
_Part = _Topic.PartitionResponse
_Producer = _Part.ProducerState


async def handle(
    ctx: RequestContext, request: DescribeProducersRequest
) -> DescribeProducersResponse:
    broker = ctx.broker
    topics = []
    for t in request.topics:
        parts = []
        topic_ok = ctx.authorize(AclOperation.READ, ResourceType.TOPIC, t.name)
        for index in t.partition_indexes:
            pr = _Part(partition_index=index, error_code=0, error_message=None, active_producers=[])
            parts.append(pr)
            if not topic_ok:
                pr.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            try:
                part = broker.replica_manager.leader_partition(t.name, index)
            except ReplicaError as exc:
                known = broker.metadata_cache.partition(t.name, index) is not None
                pr.error_code = (
                    ErrorCode.NOT_LEADER_OR_FOLLOWER
                    if isinstance(exc, UnknownTopicOrPartition) and known
                    else exc.error_code
                )
                pr.error_message = str(exc)
                continue
            for pid, entry in part.producer_entries():
                pr.active_producers.append(
                    _Producer(
                        producer_id=pid,
                        producer_epoch=entry.epoch,
                        last_sequence=entry.last_seq,
                        last_timestamp=entry.last_timestamp,
                        coordinator_epoch=entry.coordinator_epoch,
                        current_txn_start_offset=entry.current_txn_first_offset,
                    )
                )
        topics.append(_Topic(name=t.name, partitions=parts))
    return DescribeProducersResponse(throttle_time_ms=0, topics=topics)
