"""OffsetCommit (key 8) v0-9: member commits with generation checks, standalone commits with generation -1.

Answered after the offset-commit records are appended to `__consumer_offsets`; unknown partitions are refused.
"""

from __future__ import annotations

from kafkalite.broker.context import RequestContext
from kafkalite.broker.coordinators import groups as _groups
from kafkalite.coordinator.types import OffsetCommitPartition, TopicPartition
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.offsets import (
    OFFSET_COMMIT,
    OffsetCommitRequest,
    OffsetCommitResponse,
)
from kafkalite.security.acl import AclOperation, ResourceType

API = OFFSET_COMMIT
_Topic = OffsetCommitResponse.OffsetCommitResponseTopic
_Part = _Topic.OffsetCommitResponsePartition


def _partition_exists(ctx: RequestContext, topic: str, partition: int) -> bool:
    return ctx.broker.metadata_cache.partition(topic, partition) is not None


async def handle(ctx: RequestContext, request: OffsetCommitRequest) -> OffsetCommitResponse:
    version = ctx.api_version
    errors: dict[TopicPartition, ErrorCode] = {}
    to_commit: list[OffsetCommitPartition] = []
    group_ok = ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id)
    for t in request.topics:
        topic_ok = ctx.authorize(AclOperation.READ, ResourceType.TOPIC, t.name)
        for p in t.partitions:
            tp = TopicPartition(t.name, p.partition_index)
            if not group_ok:
                errors[tp] = ErrorCode.GROUP_AUTHORIZATION_FAILED
                continue
            if not topic_ok:
                errors[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            if not _partition_exists(ctx, t.name, p.partition_index):
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            to_commit.append(
                OffsetCommitPartition(
                    topic=t.name,
                    partition=p.partition_index,
                    offset=p.committed_offset,
                    leader_epoch=p.committed_leader_epoch if version >= 6 else -1,
                    metadata=p.committed_metadata,
                    commit_timestamp=p.commit_timestamp if version == 1 else -1,
                    retention_ms=request.retention_time_ms if 2 <= version <= 4 else -1,
                )
            )
    if to_commit:
        coord = _groups.coordinator_of(ctx)
        if coord is None:
            errors.update(
                dict.fromkeys(
                    (TopicPartition(p.topic, p.partition) for p in to_commit),
                    ErrorCode.COORDINATOR_NOT_AVAILABLE,
                )
            )
        else:
            committed = await coord.commit_offsets(
                request.group_id,
                to_commit,
                member_id=request.member_id if version >= 1 else "",
                generation_id=request.generation_id_or_member_epoch if version >= 1 else -1,
                group_instance_id=request.group_instance_id if version >= 7 else None,
            )
            errors.update(committed)
    return OffsetCommitResponse(
        throttle_time_ms=0,
        topics=[
            _Topic(
                name=t.name,
                partitions=[
                    _Part(
                        partition_index=p.partition_index,
                        error_code=errors.get(
                            TopicPartition(t.name, p.partition_index),
                            ErrorCode.UNKNOWN_SERVER_ERROR,
                        ),
                    )
                    for p in t.partitions
                ],
            )
            for t in request.topics
        ],
    )
