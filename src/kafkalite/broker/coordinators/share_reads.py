"""What a share-partition's log read holds: the batches a share consumer may see (control batches and
aborted transactions left out) and where they lie, found from the batch headers alone for big batches,
whose bytes then go out by sendfile without passing through the broker process.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence
from dataclasses import dataclass

from kafkalite.records import iter_batches
from kafkalite.records.header import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    parse_batch_header,
    read_magic,
)
from kafkalite.storage.segment_scan import read_header
from kafkalite.storage.types import FileSlice

_HEADER_WALK_MAX = 16  # batch headers read one by one before the region is read whole instead
_LENGTH = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class RecordsRegion:
    """The acquired batches' part of a read log region, sent as it is (sendfile on plain TCP); it
    holds the read's FileSlice, whose descriptor lease thus lasts until it is sent."""

    parent: FileSlice
    position: int
    length: int

    @property
    def fileno(self) -> int:
        return self.parent.fileno

    def read_bytes(self) -> bytes:
        out = bytearray()
        while len(out) < self.length:
            chunk = os.pread(self.fileno, self.length - len(out), self.position + len(out))
            if not chunk:
                break
            out += chunk
        return bytes(out)


def batch_spans(
    blob: bytes, aborted: Sequence[tuple[int, int]] = ()
) -> tuple[list[tuple[int, int, int, int]], int]:
    """(base offset, last offset, start, end) of each whole batch of records a consumer may see in
    a read, and the offset after the last whole batch. Control batches are skipped, and with
    `aborted` ((producer id, first offset) of aborted transactions, read_committed) so are the
    batches of those transactions, up to their abort marker."""
    out: list[tuple[int, int, int, int]] = []
    visible = _Visibility(aborted)
    pos = 0
    n = len(blob)
    end_offset = -1
    while pos + 61 <= n:
        if read_magic(blob, pos) < 2:  # a legacy-format topic: no transactions there
            for b in iter_batches(blob[pos:], allow_truncated_tail=True):
                out.append((b.base_offset, b.last_offset, pos, n))
                end_offset = b.last_offset + 1
            break
        h = parse_batch_header(blob, pos)
        end = pos + h.size
        if end > n:
            break
        end_offset = h.last_offset + 1
        if visible(h):
            out.append((h.base_offset, h.last_offset, pos, end))
        pos = end
    return out, end_offset


class _Visibility:
    """Which v2 batches a share consumer may see, in log order: not control batches, and (with
    the aborted transactions of a read_committed read) not those of an aborted transaction."""

    def __init__(self, aborted: Sequence[tuple[int, int]]) -> None:
        self.open_aborts = sorted(aborted, key=lambda a: a[1])
        self.active: set[int] = set()

    def __call__(self, h: BatchHeader) -> bool:
        open_aborts = self.open_aborts
        while open_aborts and open_aborts[0][1] <= h.base_offset:
            self.active.add(open_aborts.pop(0)[0])
        if h.is_control:
            self.active.discard(h.producer_id)  # its marker ends that transaction
            return False
        return not (h.is_transactional and h.producer_id in self.active)


def header_spans(
    fd: int, position: int, length: int, aborted: Sequence[tuple[int, int]] = ()
) -> tuple[list[tuple[int, int, int, int]], int] | None:
    """What `batch_spans` finds in the file region, read batch header by batch header instead of
    whole (a big batch is sent by sendfile, so its records need not pass through this process);
    None when the region is not a few big v2 batches, and must be read whole."""
    out: list[tuple[int, int, int, int]] = []
    visible = _Visibility(aborted)
    pos = 0
    end_offset = -1
    for _ in range(_HEADER_WALK_MAX):
        h = read_header(fd, position + pos, position + length)
        if h is None:
            return (out, end_offset) if _cut_by_end(fd, position + pos, length - pos) else None
        end = pos + h.size
        end_offset = h.last_offset + 1
        if visible(h):
            out.append((h.base_offset, h.last_offset, pos, end))
        pos = end
        if pos + 61 > length:
            return out, end_offset
    return None


def _cut_by_end(fd: int, position: int, left: int) -> bool:
    """Whether the v2 batch at `position` is whole but for running past the `left` bytes read
    (anything else there, a legacy batch or a bad header, is for the whole read to judge)."""
    if left < HEADER_SIZE:
        return True
    raw = os.pread(fd, HEADER_SIZE, position)
    if len(raw) < HEADER_SIZE or read_magic(raw) != 2:
        return False
    batch_length = int(_LENGTH.unpack_from(raw, 8)[0])
    return batch_length >= HEADER_SIZE - LOG_OVERHEAD and batch_length + LOG_OVERHEAD > left


__all__ = ["RecordsRegion", "batch_spans", "header_spans"]
