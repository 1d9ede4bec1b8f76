"""Value types the storage layer hands out: FileSlice (for sendfile), FetchDataInfo, AppendInfo (and
its plain-tuple AppendResult), LogOffsetMetadata, plus helpers (clock, `<topic>-<partition>` names).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Protocol

from kafkalite.storage.file_cache import OpenFile

# deleted segments stay open (renamed .deleted) at least this long, even with
# file.delete.delay.ms=0, so a FileSlice handed to the network layer can still get its descriptor
MIN_FD_GRACE_MS = 1000


def now_ms() -> int:
    return int(time.time() * 1000)


class SliceSource(Protocol):
    """Where a FileSlice's descriptor comes from: a LogSegment (its FileCache handle)."""

    def handle(self) -> OpenFile: ...


class FileSlice:
    """A byte range of a segment file, ready for `os.sendfile(sock, fileno, position, length)`.

    The descriptor is taken from the FileCache when first asked for (`fileno`) and held by the
    slice from then on: a lease, so an eviction cannot close it (and the number cannot be reused)
    while the slice lives. `read_bytes` holds it only for its reads. A Fetch answer of thousands of
    partitions thus holds descriptors for the regions sent whole (sendfile), not for every one."""

    __slots__ = ("_fh", "_source", "length", "position")

    def __init__(self, source: SliceSource, position: int, length: int) -> None:
        self._source = source
        self._fh: OpenFile | None = None
        self.position = position
        self.length = length

    @property
    def fileno(self) -> int:
        fh = self._fh
        if fh is None:
            fh = self._fh = self._source.handle()
        return fh.fd

    def read_bytes(self) -> bytes:
        fh = self._fh if self._fh is not None else self._source.handle()
        out = bytearray()
        while len(out) < self.length:
            chunk = os.pread(fh.fd, self.length - len(out), self.position + len(out))
            if not chunk:
                break
            out += chunk
        return bytes(out)

    def __len__(self) -> int:
        return self.length

    def __repr__(self) -> str:
        return f"FileSlice({self._source!r}, position={self.position}, length={self.length})"


@dataclass(frozen=True, slots=True)
class LogOffsetMetadata:
    message_offset: int
    segment_base_offset: int = -1
    relative_position_in_segment: int = -1


@dataclass(frozen=True, slots=True)
class FetchDataInfo:
    """What a read found: where it starts, and the slice to send (None when there is no data)."""

    offset_metadata: LogOffsetMetadata
    slice: FileSlice | None

    @property
    def records_size(self) -> int:
        return self.slice.length if self.slice is not None else 0


# AppendInfo's fields as a plain tuple, in its field order (Log.append_as_leader: no object to build)
AppendResult = tuple[int, int, int, int, int, int, int]


@dataclass(slots=True)
class AppendInfo:
    first_offset: int
    last_offset: int
    log_append_time: int
    max_timestamp: int
    log_start_offset: int
    num_batches: int = 1
    size: int = 0


def parse_topic_partition(name: str) -> tuple[str, int] | None:
    """`<topic>-<partition>` directory name -> (topic, partition), or None."""
    topic, sep, part = name.rpartition("-")
    if not sep or not topic or not part.isdigit():
        return None
    return topic, int(part)
