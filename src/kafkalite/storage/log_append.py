"""Checks and offset assignment for an append of record batches to a partition log: framing and size
limits, offsets and leader epochs stamped by the leader, offsets checked on a follower.

Pure functions over a buffer and its batch headers (as Kafka's LogValidator); Log calls them.
"""

from __future__ import annotations

from kafkalite.protocol.exceptions import DecodeError
from kafkalite.records.header import (
    BatchHeader,
    iter_batch_headers,
    set_base_offset,
    set_max_timestamp_and_type,
    set_partition_leader_epoch,
)
from kafkalite.storage.config import LogConfig
from kafkalite.storage.errors import (
    CorruptRecord,
    InvalidProducerBatch,
    RecordBatchTooLarge,
    UnexpectedAppendOffset,
)


def analyze_batches(
    buf: bytes | bytearray | memoryview, config: LogConfig, assign_offsets: bool
) -> tuple[list[tuple[int, BatchHeader]], list[BatchHeader]]:
    """The batches' (position, header) pairs and the idempotent producers' headers among them;
    raises when the bytes are not whole batches or break max.message.bytes / segment.bytes, or
    when a leader's append holds an idempotent batch beside others."""
    try:
        headers: list[tuple[int, BatchHeader]] = list(iter_batch_headers(buf))
    except DecodeError as e:
        raise CorruptRecord(f"malformed record batch: {e}") from e
    if not headers:
        raise CorruptRecord("no record batches to append")
    for _, h in headers:
        if h.size > config.max_message_bytes:
            raise RecordBatchTooLarge(
                f"batch of {h.size} bytes exceeds max.message.bytes {config.max_message_bytes}"
            )
    total = len(buf)
    if total > config.segment_bytes:
        raise RecordBatchTooLarge(
            f"{total} bytes of batches exceed segment.bytes {config.segment_bytes}"
        )
    producers = [h for _, h in headers if h.producer_id >= 0 and h.base_sequence >= 0]
    if producers and assign_offsets and len(headers) != 1:
        raise InvalidProducerBatch(
            "an idempotent producer's batch must be the only batch of its append"
        )
    return headers, producers


def assign_offsets(
    buf: bytearray | memoryview,
    headers: list[tuple[int, BatchHeader]],
    first: int,
    leader_epoch: int,
    log_append_time: int,
) -> tuple[int, int]:
    """The leader's stamping, in place: base offsets from `first`, the partition leader epoch,
    and LogAppendTime when `log_append_time` >= 0. Returns (next offset, max timestamp)."""
    nxt = first
    max_ts = -1
    for pos, h in headers:
        set_base_offset(buf, pos, nxt)
        set_partition_leader_epoch(buf, pos, leader_epoch)
        h.base_offset = nxt
        h.partition_leader_epoch = leader_epoch
        if log_append_time >= 0:
            set_max_timestamp_and_type(buf, pos, h.size, log_append_time, True)
            h.max_timestamp = log_append_time
            h.base_timestamp = log_append_time
        if h.max_timestamp > max_ts:
            max_ts = h.max_timestamp
        nxt = h.base_offset + h.last_offset_delta + 1
    return nxt, max_ts


def check_replica_offsets(
    headers: list[tuple[int, BatchHeader]], log_end: int, name: str
) -> tuple[int, int]:
    """A follower keeps the leader's offsets: each batch must start at or past the end of the
    one before (and the first at or past `log_end`); later offsets may be missing (the leader's
    log was compacted), never earlier. Returns (next offset, max timestamp)."""
    nxt = log_end
    max_ts = -1
    for _, h in headers:
        if h.base_offset < nxt:
            raise UnexpectedAppendOffset(
                f"{name}: replica batch starts at offset {h.base_offset}, below the log end {nxt}"
            )
        if h.max_timestamp > max_ts:
            max_ts = h.max_timestamp
        nxt = h.base_offset + h.last_offset_delta + 1
    return nxt, max_ts
