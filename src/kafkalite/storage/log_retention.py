"""Retention of a partition log: which of its oldest segments retention.ms and retention.bytes (and
a log start moved by DeleteRecords) let go, deleted through LocalLog's prefix deletion.

Functions over a LocalLog (storage/local_log.py), called by Log under its lock.
"""

from __future__ import annotations

from kafkalite.storage.config import LogConfig
from kafkalite.storage.errors import OffsetOutOfRange
from kafkalite.storage.local_log import LocalLog


def delete_retained_segments(
    local: LocalLog, config: LogConfig, hw: int, now: int, remote_copied: int = -1
) -> int:
    """Under the lock: delete segments below the log start, then by retention.ms and
    retention.bytes (cleanup.policy containing delete). Returns how many were deleted.

    A tiered topic (remote.storage.enable) keeps its local part by local.retention.ms / .bytes, and
    lets a segment go only once the remote tier holds it: its last offset <= `remote_copied`."""
    deleted = local.delete_prefix(local.segments_below(local.log_start_offset), "log start offset")
    if not config.delete:
        return deleted
    # (KIP-950: with remote.log.copy.disable the local log keeps to retention.* alone)
    tiered = config.remote_storage_enable and not config.remote_log_copy_disable
    retention_ms = config.local_retention_ms_effective if tiered else config.retention_ms
    retention_bytes = config.local_retention_bytes_effective if tiered else config.retention_bytes
    # retention deletes only segments wholly below the high watermark: never a record a
    # follower may still need or a consumer has not been allowed to see
    bound = min(hw, remote_copied + 1) if tiered else hw
    kind = "local." if tiered else ""
    if retention_ms >= 0:
        segs = local.segments
        n = 0
        while (
            n < len(segs) - 1
            and segs[n + 1].base_offset <= bound
            and now - segs[n].largest_timestamp() > retention_ms
        ):
            n += 1
        deleted += local.delete_prefix(n, f"{kind}retention.ms")
    if retention_bytes >= 0:
        segs = local.segments
        excess = sum(s.size for s in segs) - retention_bytes
        n = 0
        while n < len(segs) - 1 and segs[n + 1].base_offset <= bound and excess - segs[n].size >= 0:
            excess -= segs[n].size
            n += 1
        deleted += local.delete_prefix(n, f"{kind}retention.bytes")
    return deleted


def delete_records_before(local: LocalLog, offset: int, hw: int) -> bool:
    """Under the lock, DeleteRecords: the log starts at `offset` (-1: the high watermark), whole
    segments below it are deleted; OffsetOutOfRange past the high watermark. True when the log
    start moved."""
    if offset == -1:
        offset = hw
    if offset < 0 or offset > hw:
        raise OffsetOutOfRange(f"cannot delete records before {offset}: outside [0, {hw}]")
    if offset <= local.log_start_offset:
        return False
    local.advance_log_start(offset)
    local.delete_prefix(local.segments_below(offset), "DeleteRecords")
    return True
