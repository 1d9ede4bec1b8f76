"""Reads from the remote tier: whole record batches of a remote segment from the one holding an offset, up
to a byte budget (at least one batch), through the segment's remote offset index, kept in a bounded cache; and
the first record at or after a timestamp (ListOffsets), through the remote time index.

Blocking (the remote store's calls): the caller runs it on a worker thread.
"""

from __future__ import annotations

import struct
import threading
import uuid
from bisect import bisect_right
from collections import OrderedDict

from kafkalite.records import iter_batches
from kafkalite.records.batch import LOG_APPEND_TIME
from kafkalite.storage.remote.metadata import RemoteLogSegmentMetadata
from kafkalite.storage.remote.segment_export import (
    parse_offset_index,
    parse_time_index,
    parse_txn_index,
)
from kafkalite.storage.remote.storage_manager import (
    IndexType,
    RemoteResourceNotFound,
    RemoteStorageManager,
)

_HEAD = struct.Struct(">qi")  # base offset, batch length
_LAST_DELTA = struct.Struct(">i")
_MIN_CHUNK = 64 * 1024
_LOG_OVERHEAD = 12


class RemoteIndexCache:
    """The offset and transaction indexes of the most recently read remote segments, in memory
    (Kafka's RemoteIndexCache keeps them on disk; bounded here by `max_entries`)."""

    def __init__(self, rsm: RemoteStorageManager, max_entries: int = 1024) -> None:
        self.rsm = rsm
        self.max_entries = max_entries
        self._lock = threading.Lock()
        self._entries: OrderedDict[tuple[uuid.UUID, IndexType], object] = OrderedDict()

    def _get(self, m: RemoteLogSegmentMetadata, kind: IndexType) -> object:
        key = (m.segment_id, kind)
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return self._entries[key]
        try:
            data = self.rsm.fetch_index(m, kind)
        except RemoteResourceNotFound:
            data = b""
        parsed: object = (
            parse_offset_index(data, m.start_offset)
            if kind is IndexType.OFFSET
            else parse_time_index(data, m.start_offset)
            if kind is IndexType.TIMESTAMP
            else parse_txn_index(data)
        )
        with self._lock:
            self._entries[key] = parsed
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
        return parsed

    def offset_index(self, m: RemoteLogSegmentMetadata) -> list[tuple[int, int]]:
        return self._get(m, IndexType.OFFSET)  # type: ignore[return-value]

    def time_index(self, m: RemoteLogSegmentMetadata) -> list[tuple[int, int]]:
        """(timestamp, absolute offset) entries, in offset order."""
        return self._get(m, IndexType.TIMESTAMP)  # type: ignore[return-value]

    def aborted(self, m: RemoteLogSegmentMetadata) -> list[tuple[int, int, int, int]]:
        return self._get(m, IndexType.TRANSACTION)  # type: ignore[return-value]

    def forget(self, segment_id: uuid.UUID) -> None:
        with self._lock:
            for kind in IndexType:
                self._entries.pop((segment_id, kind), None)

    def __len__(self) -> int:
        return len(self._entries)


def _batch_last_offset(buf: bytes | bytearray, pos: int, base: int) -> int:
    magic = buf[pos + 16]
    if magic < 2:  # a legacy message set's offset is its last one
        return base
    return int(base + _LAST_DELTA.unpack_from(buf, pos + 23)[0])


def read_remote_batches(
    rsm: RemoteStorageManager,
    cache: RemoteIndexCache,
    m: RemoteLogSegmentMetadata,
    offset: int,
    max_bytes: int,
    min_one_message: bool = True,
) -> tuple[bytes, int]:
    """(whole batches from the one holding `offset`, the offset after the last one returned) of
    remote segment `m`; (b"", offset) when nothing fits or nothing is at or after it."""
    index = cache.offset_index(m)
    i = bisect_right(index, (offset, 1 << 62)) - 1
    start = index[i][1] if i >= 0 else 0
    size = m.segment_size_in_bytes
    buf = bytearray()
    buf_at = start  # file position of buf[0]

    def have(n: int) -> bool:
        """buf holds n bytes from its start (fetching more as needed); False past the segment."""
        nonlocal buf
        while len(buf) < n:
            at = buf_at + len(buf)
            if at >= size:
                return False
            want = max(n - len(buf), _MIN_CHUNK, min(max_bytes, 8 << 20))
            chunk = rsm.fetch_log_segment(m, at, min(size, at + want) - 1)
            if not chunk:
                return False
            buf += chunk
        return True

    pos = 0
    first = -1
    while have(pos + 27):
        base, length = _HEAD.unpack_from(buf, pos)
        last = _batch_last_offset(buf, pos, base)
        if last >= offset:
            first = pos
            break
        pos += _LOG_OVERHEAD + length
    if first < 0:
        return b"", offset
    end = first
    next_offset = offset
    while have(end + 27):
        base, length = _HEAD.unpack_from(buf, end)
        total = _LOG_OVERHEAD + length
        if end + total - first > max_bytes and not (end == first and min_one_message):
            break
        if not have(end + total):
            break
        next_offset = _batch_last_offset(buf, end, base) + 1
        end += total
    return bytes(buf[first:end]), next_offset


def remote_offset_for_timestamp(
    rsm: RemoteStorageManager,
    cache: RemoteIndexCache,
    m: RemoteLogSegmentMetadata,
    timestamp: int,
    min_offset: int,
) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record at or after `min_offset` whose timestamp is >=
    `timestamp` in remote segment `m`, or None: from the last time index entry below `timestamp`
    (Kafka's lookup), the segment's batches are read and decoded until one reaches it."""
    start = max(min_offset, m.start_offset)
    for ts, off in cache.time_index(m):
        if ts >= timestamp:
            break
        start = max(start, off)
    offset = start
    while offset <= m.end_offset:
        data, nxt = read_remote_batches(rsm, cache, m, offset, 1 << 20, True)
        if not data:
            return None
        for batch in iter_batches(data):
            if batch.max_timestamp < timestamp or batch.next_offset <= min_offset:
                continue
            if batch.timestamp_type == LOG_APPEND_TIME:
                return max(batch.base_offset, min_offset), batch.max_timestamp
            for r in batch.records:
                if r.timestamp >= timestamp and r.offset >= min_offset:
                    return r.offset, r.timestamp
        offset = nxt
    return None
