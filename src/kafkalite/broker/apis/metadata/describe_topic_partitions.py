"""DescribeTopicPartitions (key 75, KIP-966): topics' partitions in pages of response_partition_limit,
resumed from a cursor; topics one may not describe are hidden or refused as Metadata does.
"""

from __future__ import annotations

import logging
import uuid

from kafkalite.broker.context import RequestContext
from kafkalite.cluster.metadata import INTERNAL_TOPICS, topic_name_error
from kafkalite.cluster.metadata_cache import NO_LEADER, PartitionMetadata, TopicMetadata
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.metadata import (
    DESCRIBE_TOPIC_PARTITIONS,
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
)
from kafkalite.security.acl import AclOperation, ResourceType

API = DESCRIBE_TOPIC_PARTITIONS
log = logging.getLogger("kafkalite.broker.describe_topic_partitions")

_Topic = DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponseTopic
_Partition = _Topic.DescribeTopicPartitionsResponsePartition
_Cursor = DescribeTopicPartitionsResponse.Cursor
ZERO_UUID = uuid.UUID(int=0)

# Kafka's max.request.partition.size.limit (default): no answer holds more partitions than this
MAX_PARTITIONS = 2000


def _refused(
    request: DescribeTopicPartitionsRequest, message: str
) -> DescribeTopicPartitionsResponse:
    """Kafka's answer to a request it throws out: every named topic with INVALID_REQUEST."""
    log.info("DescribeTopicPartitions refused: %s", message)
    return DescribeTopicPartitionsResponse(
        throttle_time_ms=0,
        topics=[
            _Topic(error_code=ErrorCode.INVALID_REQUEST, name=t.name, is_internal=False)
            for t in request.topics
        ],
    )


def _partition_entry(ctx: RequestContext, pm: PartitionMetadata) -> _Partition:
    alive = ctx.broker.metadata_cache.is_alive
    led = pm.leader != NO_LEADER and alive(pm.leader)
    return _Partition(
        error_code=0 if led else ErrorCode.LEADER_NOT_AVAILABLE,
        partition_index=pm.partition,
        leader_id=pm.leader if led else NO_LEADER,
        leader_epoch=pm.leader_epoch,
        replica_nodes=list(pm.replicas),
        isr_nodes=list(pm.isr),
        eligible_leader_replicas=[],  # no KIP-966 ELR here: empty, as Kafka without ELR
        last_known_elr=[],
        offline_replicas=[r for r in pm.replicas if not alive(r) or r in pm.offline_replicas],
    )


def _page(
    ctx: RequestContext, info: TopicMetadata, start: int, remaining: int
) -> tuple[list[_Partition], int]:
    """Partitions `start`.. of the topic, at most `remaining`; and the next index (-1: none)."""
    count = info.partition_count
    upper = min(count, start + remaining)
    parts = [
        _partition_entry(ctx, pm)
        for i in range(start, upper)
        if (pm := info.partition(i)) is not None
    ]
    return parts, upper if upper < count else -1


async def handle(
    ctx: RequestContext, request: DescribeTopicPartitionsRequest
) -> DescribeTopicPartitionsResponse:
    cache = ctx.broker.metadata_cache
    cursor = request.cursor
    after = cursor.topic_name if cursor is not None else ""
    fetch_all = not request.topics
    if fetch_all:
        wanted = {t.name for t in cache.topics() if t.name >= after}
    else:
        wanted = {t.name for t in request.topics if t.name >= after}
        if cursor is not None and cursor.topic_name not in wanted:
            return _refused(request, f"the topic list lacks the cursor topic {cursor.topic_name!r}")
    if cursor is not None and cursor.partition_index < 0:
        return _refused(request, f"cursor partition {cursor.partition_index} is negative")

    # as Metadata: a listing hides topics one may not describe; a named one is refused, without
    # saying whether it exists
    authorized: list[str] = []
    denied: list[_Topic] = []
    for name in sorted(wanted):
        if ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name):
            authorized.append(name)
        elif not fetch_all:
            denied.append(
                _Topic(
                    error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                    name=name,
                    topic_id=ZERO_UUID,
                    is_internal=False,
                )
            )

    remaining = max(min(MAX_PARTITIONS, request.response_partition_limit), 1)
    topics_out: list[_Topic] = []
    next_cursor = None
    for name in authorized:
        if remaining <= 0:  # the previous topic filled the page: resume at this one
            next_cursor = _Cursor(topic_name=name, partition_index=0)
            break
        info = cache.topic(name)
        if info is None:
            if not fetch_all:
                code = (
                    ErrorCode.INVALID_TOPIC_EXCEPTION
                    if topic_name_error(name)
                    else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                )
                topics_out.append(
                    _Topic(
                        error_code=code,
                        name=name,
                        topic_id=ZERO_UUID,
                        is_internal=name in INTERNAL_TOPICS,
                        topic_authorized_operations=ctx.authorized_operations(
                            ResourceType.TOPIC, name
                        ),
                    )
                )
            continue
        start = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        parts, following = _page(ctx, info, start, remaining)
        topics_out.append(
            _Topic(
                error_code=0,
                name=name,
                topic_id=info.topic_id,
                is_internal=info.internal,
                partitions=parts,
                topic_authorized_operations=ctx.authorized_operations(ResourceType.TOPIC, name),
            )
        )
        if following != -1:
            next_cursor = _Cursor(topic_name=name, partition_index=following)
            break
        remaining -= len(parts)
    return DescribeTopicPartitionsResponse(
        throttle_time_ms=0, topics=topics_out + denied, next_cursor=next_cursor
    )
