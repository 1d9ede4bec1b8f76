"""AlterReplicaLogDirs (key 34): move replicas on this broker to another of its log dirs, online (a
future log copies each, then takes its place); per partition LOG_DIR_NOT_FOUND, KAFKA_STORAGE_ERROR…
"""

from __future__ import annotations

from kafkalite.broker.context import RequestContext
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.admin import (
    ALTER_REPLICA_LOG_DIRS,
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirsResponse,
)
from kafkalite.security.acl import AclOperation

API = ALTER_REPLICA_LOG_DIRS
_Topic = AlterReplicaLogDirsResponse.AlterReplicaLogDirTopicResult
_Part = _Topic.AlterReplicaLogDirPartitionResult


async def handle(
    ctx: RequestContext, request: AlterReplicaLogDirsRequest
) -> AlterReplicaLogDirsResponse:
    rm = ctx.broker.replica_manager
    cache = ctx.broker.metadata_cache
    allowed = ctx.authorize_cluster(AclOperation.ALTER)
    results: dict[str, dict[int, int]] = {}
    for d in request.dirs:
        for t in d.topics:
            out = results.setdefault(t.name, {})
            for p in t.partitions:
                if not allowed:
                    out[p] = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
                else:
                    code = rm.alter_replica_log_dir(t.name, p, d.path)
                    if code == ErrorCode.NOT_LEADER_OR_FOLLOWER and cache.topic(t.name) is None:
                        code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    out[p] = code
    return AlterReplicaLogDirsResponse(
        throttle_time_ms=0,
        results=[
            _Topic(
                topic_name=name,
                partitions=[_Part(partition_index=p, error_code=c) for p, c in sorted(ps.items())],
            )
            for name, ps in results.items()
        ],
    )
