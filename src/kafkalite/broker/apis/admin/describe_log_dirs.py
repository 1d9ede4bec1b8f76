"""DescribeLogDirs (key 35): per log directory, the partitions it holds with their sizes on disk, the
copies being moved into it (is_future_key) and, for a failed dir, KAFKA_STORAGE_ERROR.

v4 adds total and usable bytes of the file system. With tiered storage (KIP-405) the local sizes stay local, as
Kafka's, and the remote store is one more directory, "remote://<bucket or path>", holding the remote size of each
partition this broker leads (Redpanda's convention; Kafka's response has no remote size field).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from kafkalite.broker.context import RequestContext
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.admin import (
    DESCRIBE_LOG_DIRS,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
)
from kafkalite.security.acl import AclOperation

API = DESCRIBE_LOG_DIRS
_Result = DescribeLogDirsResponse.DescribeLogDirsResult
_Topic = _Result.DescribeLogDirsTopic
_Part = _Topic.DescribeLogDirsPartition


async def handle(ctx: RequestContext, request: DescribeLogDirsRequest) -> DescribeLogDirsResponse:
    broker = ctx.broker
    if not ctx.authorize_cluster(AclOperation.DESCRIBE):
        return DescribeLogDirsResponse(
            throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, results=[]
        )
    wanted: dict[str, set[int]] | None = None
    if request.topics is not None:
        wanted = {t.topic: set(t.partitions) for t in request.topics}
    results = []
    rm = broker.replica_manager
    hosted = sorted(rm.partitions(), key=lambda p: p.key)
    moves = sorted(rm.log_dir_moves().items())
    offline = {Path(d).resolve() for d in rm.offline_log_dirs()}
    for d in broker.log_dirs:
        by_topic: dict[str, list[_Part]] = {}
        root = Path(d).resolve()
        if root in offline:  # as Kafka: the dir is listed, with its error and nothing in it
            results.append(
                _Result(
                    error_code=ErrorCode.KAFKA_STORAGE_ERROR,
                    log_dir=str(root),
                    topics=[],
                    total_bytes=-1,
                    usable_bytes=-1,
                )
            )
            continue
        for part in hosted:
            if wanted is not None and part.partition not in wanted.get(part.topic, ()):
                continue
            if part.log_dir.parent.resolve() != root:
                continue
            by_topic.setdefault(part.topic, []).append(
                _Part(
                    partition_index=part.partition,
                    partition_size=int(part.size_in_bytes),
                    offset_lag=max(0, part.high_watermark - part.log_end_offset),
                    is_future_key=False,
                )
            )
        for (topic, p), mv in moves:  # a copy in progress into this dir (the "future" replica)
            if Path(mv.dest).resolve() != root:
                continue
            if wanted is not None and p not in wanted.get(topic, ()):
                continue
            by_topic.setdefault(topic, []).append(
                _Part(
                    partition_index=p,
                    partition_size=int(mv.future.size_in_bytes),
                    offset_lag=mv.lag,
                    is_future_key=True,
                )
            )
        try:
            usage = shutil.disk_usage(d)
            total, free = usage.total, usage.free
        except OSError:
            total = free = -1
        results.append(
            _Result(
                error_code=0,
                log_dir=str(root),
                topics=[_Topic(name=n, partitions=ps) for n, ps in sorted(by_topic.items())],
                total_bytes=total,
                usable_bytes=free,
            )
        )
    rlm = rm.remote_log_manager
    if rlm is not None:
        remote: dict[str, list[_Part]] = {}
        for topic, p, size in rlm.led_remote_sizes():
            if wanted is None or p in wanted.get(topic, ()):
                remote.setdefault(topic, []).append(
                    _Part(partition_index=p, partition_size=size, offset_lag=0, is_future_key=False)
                )
        results.append(
            _Result(
                error_code=0,
                log_dir=rlm.remote_log_dir,
                topics=[_Topic(name=n, partitions=ps) for n, ps in sorted(remote.items())],
                total_bytes=-1,
                usable_bytes=-1,
            )
        )
    return DescribeLogDirsResponse(throttle_time_ms=0, error_code=0, results=results)
