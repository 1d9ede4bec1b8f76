"""DescribeLogDirs (key 35): per log directory, the partitions it holds with their sizes on disk.

v4 adds total and usable bytes of the file system.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from kafkalite.broker.context import RequestContext
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.admin import DESCRIBE_LOG_DIRS, DescribeLogDirsResponse
from kafkalite.security.acl import AclOperation

API = DESCRIBE_LOG_DIRS
_Result = DescribeLogDirsResponse.DescribeLogDirsResult
_Topic = _Result.DescribeLogDirsTopic
_Part = _Topic.DescribeLogDirsPartition


async def handle(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    if not ctx.authorize_cluster(AclOperation.DESCRIBE):
        return DescribeLogDirsResponse(
            throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, results=[]
        )
    wanted: dict[str, set[int]] | None = None
    if request.topics is not None:
        wanted = {t.topic: set(t.partitions) for t in request.topics}
    results = []
    hosted = sorted(broker.replica_manager.partitions(), key=lambda p: p.key)
    for d in broker.log_dirs:
        by_topic: dict[str, list[Any]] = {}
        root = Path(d).resolve()
        for part in hosted:
            if wanted is not None and part.partition not in wanted.get(part.topic, ()):
                continue
            lg = part.log
            if lg.dir.parent.resolve() != root:
                continue
            by_topic.setdefault(part.topic, []).append(
                _Part(
                    partition_index=part.partition,
                    partition_size=int(lg.size_in_bytes),
                    offset_lag=max(0, lg.high_watermark - lg.log_end_offset),
                    is_future_key=False,
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
    return DescribeLogDirsResponse(throttle_time_ms=0, error_code=0, results=results)
