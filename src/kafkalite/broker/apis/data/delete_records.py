"""DeleteRecords (key 21): advance a partition's log start offset (offset -1 means the high watermark),
across both tiers when the topic has remote storage (KIP-405). Answers the new low watermark; an offset past the
high watermark is OFFSET_OUT_OF_RANGE.
"""

from __future__ import annotations

import logging

from kafkalite.broker.context import RequestContext
from kafkalite.cluster.errors import ReplicaError, UnknownTopicOrPartition
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.admin import (
    DELETE_RECORDS,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
)
from kafkalite.security.acl import AclOperation, ResourceType

API = DELETE_RECORDS
log = logging.getLogger("kafkalite.broker.delete_records")
_Topic = DeleteRecordsResponse.DeleteRecordsTopicResult
_Part = _Topic.DeleteRecordsPartitionResult


async def handle(ctx: RequestContext, request: DeleteRecordsRequest) -> DeleteRecordsResponse:
    broker = ctx.broker
    topics = []
    for t in request.topics:
        parts: list[_Part] = []
        topics.append(_Topic(name=t.name, partitions=parts))
        topic_ok = ctx.authorize(AclOperation.DELETE, ResourceType.TOPIC, t.name)
        for p in t.partitions:
            r = _Part(partition_index=p.partition_index, low_watermark=-1, error_code=0)
            parts.append(r)
            if not topic_ok:
                r.error_code = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                continue
            try:
                part = broker.replica_manager.leader_partition(t.name, p.partition_index)
            except ReplicaError as exc:
                known = broker.metadata_cache.partition(t.name, p.partition_index) is not None
                r.error_code = int(exc.error_code)
                if isinstance(exc, UnknownTopicOrPartition) and known:
                    r.error_code = int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
                continue
            offset = part.high_watermark if p.offset == -1 else p.offset
            if offset < 0 or offset > part.high_watermark:
                r.error_code = int(ErrorCode.OFFSET_OUT_OF_RANGE)
                continue
            rlm = broker.replica_manager.remote_log_manager
            try:
                if rlm is not None and part.config.remote_storage_enable:
                    r.low_watermark = await rlm.delete_records(part, offset)
                else:
                    r.low_watermark = part.delete_records(offset)
            except Exception as exc:
                code = getattr(exc, "error_code", None)
                if code is None:
                    log.exception("delete records of %s-%d failed", t.name, p.partition_index)
                r.error_code = int(code if code is not None else ErrorCode.KAFKA_STORAGE_ERROR)
    return DeleteRecordsResponse(throttle_time_ms=0, topics=topics)
