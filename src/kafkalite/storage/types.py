"""Value types the storage layer hands out: FileSlice (for sendfile), FetchDataInfo, AppendInfo (and
its plain-tuple AppendResult), LogOffsetMetadata, plus helpers (clock, `<topic>-<partition>` names).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

# descriptors of deleted segments stay open at least this long, even with file.delete.delay.ms=0,
# so a FileSlice handed to the network layer does not outlive its file descriptor
MIN_FD_GRACE_MS = 1000


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True, slots=True)
class FileSlice:
    """A byte range of an open segment file, ready for `os.sendfile(sock, fileno, position, length)`."""

    fileno: int
    position: int
    length: int
    # the FileCache handle `fileno` belongs to: holding the slice holds the descriptor open (an
    # eviction of its segment closes it only once every slice is gone)
    lease: object = None

    def read_bytes(self) -> bytes:
        out = bytearray()
        while len(out) < self.length:
            chunk = os.pread(self.fileno, self.length - len(out), self.position + len(out))
            if not chunk:
                break
            out += chunk
        return bytes(out)

    def __len__(self) -> int:
        return self.length


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
