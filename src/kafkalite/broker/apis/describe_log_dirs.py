"""DescribeLogDirs (key 35): per log directory, the partitions it holds with their sizes on disk.

v4 adds total and usable bytes of the file system.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from kafkalite.broker.context import RequestContext
from kafkalite.protocol.messages.admin import DESCRIBE_LOG_DIRS, DescribeLogDirsResponse

API = DESCRIBE_LOG_DIRS
_Result = DescribeLogDirsResponse.DescribeLogDirsResult
_Topic = _Result.DescribeLogDirsTopic
_Part = _Topic.DescribeLogDirsPartition


def _log_dir_of(lg: Any) -> Path | None:
    d = getattr(lg, "dir", None) or getattr(lg, "directory", None)
    return Path(d).parent if d is not None else None


async def handle(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    wanted: dict[str, set[int]] | None = None
    if request.topics is not None:
        wanted = {t.topic: set(t.partitions) for t in request.topics}
    results = []
    for d in broker.log_dirs:
        by_topic: dict[str, list[Any]] = {}
        for info in broker.metadata.topics():
            if wanted is not None and info.name not in wanted:
                continue
            for part in range(info.partitions):
                if wanted is not None and part not in wanted[info.name]:
                    continue
                lg = broker.get_log(info.name, part)
                if lg is None:
                    continue
                ld = _log_dir_of(lg)
                if ld is not None and ld.resolve() != Path(d).resolve():
                    continue
                by_topic.setdefault(info.name, []).append(
                    _Part(
                        partition_index=part,
                        partition_size=int(lg.size_in_bytes),
                        offset_lag=0,
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
                log_dir=str(Path(d).resolve()),
                topics=[_Topic(name=n, partitions=ps) for n, ps in sorted(by_topic.items())],
                total_bytes=total,
                usable_bytes=free,
            )
        )
    return DescribeLogDirsResponse(throttle_time_ms=0, error_code=0, results=results)
