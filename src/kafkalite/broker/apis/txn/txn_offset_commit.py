"""TxnOffsetCommit (key 28) v0-3: a transactional producer commits a group's offsets inside its
transaction; they become the group's offsets only when the transaction commits.
"""

from __future__ import annotations

from kafkalite.broker.apis.txn._txn_common import old_fenced_code
from kafkalite.broker.context import RequestContext
from kafkalite.broker.coordinators import groups as _groups
from kafkalite.coordinator.types import OffsetCommitPartition, TopicPartition
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.txn import (
    TXN_OFFSET_COMMIT,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)
from kafkalite.security.acl import AclOperation, ResourceType

API = TXN_OFFSET_COMMIT
_Topic = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
_Part = _Topic.TxnOffsetCommitResponsePartition


async def handle(ctx: RequestContext, request: TxnOffsetCommitRequest) -> TxnOffsetCommitResponse:
    version = ctx.api_version
    errors: dict[TopicPartition, ErrorCode] = {}
    to_commit: list[OffsetCommitPartition] = []
    cache = ctx.broker.metadata_cache
    request_denied = ErrorCode.NO_ERROR
    if not ctx.authorize(
        AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id
    ):
        request_denied = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        request_denied = ErrorCode.GROUP_AUTHORIZATION_FAILED
    for t in request.topics:
        topic_ok = ctx.authorize(AclOperation.READ, ResourceType.TOPIC, t.name)
        for p in t.partitions:
            tp = TopicPartition(t.name, p.partition_index)
            if request_denied or not topic_ok:
                errors[tp] = request_denied or ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            if cache.partition(t.name, p.partition_index) is None:
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            to_commit.append(
                OffsetCommitPartition(
                    topic=t.name,
                    partition=p.partition_index,
                    offset=p.committed_offset,
                    leader_epoch=p.committed_leader_epoch if version >= 2 else -1,
                    metadata=p.committed_metadata,
                    commit_timestamp=-1,
                    retention_ms=-1,
                )
            )
    if to_commit:
        coord = _groups.coordinator_of(ctx)
        if coord is None:
            for c in to_commit:
                errors[TopicPartition(c.topic, c.partition)] = ErrorCode.COORDINATOR_NOT_AVAILABLE
        else:
            committed = await coord.txn_commit_offsets(
                request.group_id,
                request.producer_id,
                request.producer_epoch,
                to_commit,
                member_id=request.member_id if version >= 3 else "",
                generation_id=request.generation_id if version >= 3 else -1,
                group_instance_id=request.group_instance_id if version >= 3 else None,
            )
            errors.update(committed)
    return TxnOffsetCommitResponse(
        throttle_time_ms=0,
        topics=[
            _Topic(
                name=t.name,
                partitions=[
                    _Part(
                        partition_index=p.partition_index,
                        error_code=old_fenced_code(
                            errors.get(
                                TopicPartition(t.name, p.partition_index),
                                ErrorCode.UNKNOWN_SERVER_ERROR,
                            ),
                            version,
                            3,
                        ),
                    )
                    for p in t.partitions
                ],
            )
            for t in request.topics
        ],
    )
