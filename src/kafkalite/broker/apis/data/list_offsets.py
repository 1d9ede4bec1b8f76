"""ListOffsets (key 2): earliest (-2), latest (-1), max-timestamp (-3) and by-timestamp offsets of partitions.

By-timestamp lookups use the log's time index, and with tiered storage first the remote segments' below the local
log start; max-timestamp names the record (KAFKA-16310); v0 is a list.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kafkalite.broker.context import RequestContext
from kafkalite.cluster.errors import ReplicaError, UnknownTopicOrPartition
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.offsets import (
    LIST_OFFSETS,
    ListOffsetsRequest,
    ListOffsetsResponse,
)
from kafkalite.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from kafkalite.cluster.partition import Partition
    from kafkalite.cluster.remote_log_manager import RemoteLogManager

API = LIST_OFFSETS
log = logging.getLogger("kafkalite.broker.list_offsets")

_TopicResp = ListOffsetsResponse.ListOffsetsTopicResponse
_PartResp = _TopicResp.ListOffsetsPartitionResponse

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5


def lookup(
    part: Partition,
    ts: int,
    read_committed: bool = False,
    remote: RemoteLogManager | None = None,
    remote_found: tuple[int, int] | None = None,
) -> tuple[int, int]:
    """(timestamp, offset) for a ListOffsets timestamp query; offset -1 when nothing matches. The
    latest offset of a read_committed client is the last stable offset. With tiered storage
    (`remote`), EARLIEST is the remote log start, EARLIEST_LOCAL the local one, LATEST_TIERED the
    last offset the remote tier holds; `remote_found` is a by-timestamp answer the remote tier gave
    (RemoteLogManager.offset_for_timestamp), taken before the local log is searched."""
    if ts == LATEST:
        return -1, part.last_stable_offset if read_committed else part.high_watermark
    rlm = remote if remote is not None and part.config.remote_storage_enable else None
    if ts == EARLIEST:
        return -1, rlm.log_start_offset(part) if rlm is not None else part.log_start_offset
    if ts == EARLIEST_LOCAL:
        return -1, part.log_start_offset
    if ts == LATEST_TIERED:
        if rlm is not None:
            return -1, rlm.cache.highest_copied_offset(part.topic, part.partition)
        return -1, part.log_start_offset - 1
    if ts == MAX_TIMESTAMP:
        t, off = part.max_timestamp_and_offset()
    else:
        found = remote_found or part.offset_for_timestamp(ts)
        if found is None:
            return -1, -1
        off, t = found
    # as Kafka: a timestamp answer past what the client may fetch (HW, or LSO) is no answer
    if off < 0 or off >= (part.last_stable_offset if read_committed else part.high_watermark):
        return -1, -1
    return t, off


async def handle(ctx: RequestContext, request: ListOffsetsRequest) -> ListOffsetsResponse:
    broker = ctx.broker
    v = ctx.api_version
    topics_out = []
    for t in request.topics:
        parts: list[_PartResp] = []
        topics_out.append(_TopicResp(name=t.name, partitions=parts))
        topic_ok = ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, t.name)
        for p in t.partitions:
            pr = _PartResp(
                partition_index=p.partition_index,
                error_code=0,
                old_style_offsets=[],
                timestamp=-1,
                offset=-1,
                leader_epoch=-1,
            )
            parts.append(pr)
            if not topic_ok:
                pr.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            try:
                part = broker.replica_manager.leader_partition(
                    t.name, p.partition_index, p.current_leader_epoch if v >= 4 else -1
                )
            except ReplicaError as exc:
                known = broker.metadata_cache.partition(t.name, p.partition_index) is not None
                pr.error_code = exc.error_code
                if isinstance(exc, UnknownTopicOrPartition) and known:
                    pr.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
                continue
            if v == 0 and p.timestamp not in (LATEST, EARLIEST):
                # v0 by time is answered from segment boundaries in Kafka; the closest we give is the lookup
                pass
            rlm = broker.replica_manager.remote_log_manager
            try:
                remote_found = None
                if rlm is not None and p.timestamp >= 0 and part.config.remote_storage_enable:
                    remote_found = await rlm.offset_for_timestamp(part, p.timestamp)
                ts, off = lookup(
                    part, p.timestamp, v >= 2 and request.isolation_level == 1, rlm, remote_found
                )
            except Exception as exc:
                code = getattr(exc, "error_code", None)
                if code is None:
                    log.exception("offset lookup in %s-%d failed", t.name, p.partition_index)
                    code = ErrorCode.KAFKA_STORAGE_ERROR
                pr.error_code = code
                continue
            if v == 0:
                pr.old_style_offsets = [off] if off >= 0 else []
            else:
                pr.timestamp, pr.offset = ts, off
                if v >= 4 and off >= 0:
                    pr.leader_epoch = part.leader_epoch
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics_out)
