"""The remote log manager's pure decisions (KIP-405): which rolled segments a leader copies now, which
copied ones retention lets go, and where a partition's metadata events go in `__remote_log_metadata`.
"""

from __future__ import annotations

import uuid
import zlib

from kafkalite.cluster.partition import Partition
from kafkalite.storage.remote.metadata import RemoteLogSegmentMetadata, record_key


def metadata_partition(topic_id: uuid.UUID, partition: int, partitions: int) -> int:
    """The `__remote_log_metadata` partition of a topic-partition's events (kafkalite's own
    placement: crc32 of the record key; Kafka hashes with murmur2)."""
    return zlib.crc32(record_key(topic_id, partition)) % partitions


def topic_id_of(part: Partition) -> uuid.UUID:
    tid = part._log.topic_id
    return tid if tid is not None else uuid.uuid5(uuid.NAMESPACE_URL, f"kafkalite:{part.topic}")


def copy_candidates(part: Partition, highest_copied: int) -> list[tuple[int, int]]:
    """(base offset, last offset) of the rolled segments to copy now: after `highest_copied`, wholly
    below the last stable offset and the high watermark (never the active segment)."""
    lg = part._log
    bound = min(lg.last_stable_offset, lg.high_watermark)
    out = []
    segs = lg.segments
    for seg in segs[:-1]:
        last = seg.next_offset - 1
        if last <= highest_copied or seg.size == 0:
            continue
        if seg.next_offset > bound:
            break
        out.append((seg.base_offset, last))
    return out


def remote_retention_victims(
    segments: list[RemoteLogSegmentMetadata],
    retention_ms: int,
    retention_bytes: int,
    local_size: int,
    now_ms: int,
) -> list[RemoteLogSegmentMetadata]:
    """The oldest copied segments retention.ms / retention.bytes let go, as Kafka's RLM task: the
    size is the remote segments' plus the local ones not copied yet (`local_size`); oldest first,
    the first segment kept ends the run."""
    out: list[RemoteLogSegmentMetadata] = []
    remote_size = sum(m.segment_size_in_bytes for m in segments)
    excess = remote_size + local_size - retention_bytes if retention_bytes >= 0 else -1
    for m in segments:
        by_time = retention_ms >= 0 and now_ms - m.max_timestamp_ms > retention_ms
        by_size = retention_bytes >= 0 and excess - m.segment_size_in_bytes >= 0
        if not (by_time or by_size):
            break
        excess -= m.segment_size_in_bytes
        out.append(m)
    return out
