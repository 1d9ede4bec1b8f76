"""What a copy of a rolled local segment takes to the remote tier (Kafka's LogSegmentData): the `.log` file's
path and size, its offset / time / transaction indexes in Kafka's file layouts, the producer snapshot taken at
its end (when kept) and the leader-epoch checkpoint up to its end.

Reads a Log's segment lock-free, as a reader does; the caller copies only segments no longer appended to.
"""

from __future__ import annotations

import struct

from kafkalite.storage.log import Log
from kafkalite.storage.producer_snapshot import snapshot_path
from kafkalite.storage.remote.storage_manager import LogSegmentData
from kafkalite.storage.segment import LogSegment

_OFFSET_ENTRY = struct.Struct(">ii")  # relative offset, position
_TIME_ENTRY = struct.Struct(">qi")  # timestamp, relative offset
_TXN_ENTRY = struct.Struct(">hqqqq")  # version, producer id, first, last, last stable offset


def leader_epoch_checkpoint(entries: list[tuple[int, int]], end_offset: int) -> bytes:
    """Kafka's leader-epoch-checkpoint text of the (epoch, start offset) entries that begin at or
    below `end_offset`."""
    kept = [(e, o) for e, o in entries if o <= end_offset]
    lines = ["0", str(len(kept)), *(f"{e} {o}" for e, o in kept)]
    return ("\n".join(lines) + "\n").encode()


def parse_leader_epoch_checkpoint(data: bytes) -> list[tuple[int, int]]:
    lines = data.decode().split("\n")
    n = int(lines[1])
    return [(int(a), int(b)) for a, b in (line.split() for line in lines[2 : 2 + n])]


def segment_leader_epochs(
    entries: list[tuple[int, int]], start: int, end: int
) -> tuple[tuple[int, int], ...]:
    """The (epoch, first offset) pairs of the epochs a segment [start, end] holds."""
    out: list[tuple[int, int]] = []
    for i, (epoch, offset) in enumerate(entries):
        nxt = entries[i + 1][1] if i + 1 < len(entries) else None
        if offset > end or (nxt is not None and nxt <= start):
            continue
        out.append((epoch, max(offset, start)))
    return tuple(out)


def export_segment(log: Log, seg: LogSegment) -> LogSegmentData:
    """The LogSegmentData of a rolled segment of `log`."""
    base = seg.base_offset
    end = seg.next_offset - 1
    offset_index = b"".join(_OFFSET_ENTRY.pack(o - base, p) for o, p in seg.offset_index.entries())
    time_index = b"".join(_TIME_ENTRY.pack(t, o - base) for t, o in seg.time_index.entries())
    aborted = seg.txn_index.entries()
    txn_index = (
        b"".join(
            _TXN_ENTRY.pack(0, a.producer_id, a.first_offset, a.last_offset, a.last_stable_offset)
            for a in aborted
        )
        if aborted
        else None
    )
    snap = snapshot_path(log.dir, seg.next_offset)
    try:
        producer_snapshot: bytes | None = snap.read_bytes()
    except OSError:
        producer_snapshot = None  # (only the latest snapshots are kept locally)
    epochs = leader_epoch_checkpoint(log.leader_epoch_cache.entries(), end)
    return LogSegmentData(
        seg.log_path, seg.size, offset_index, time_index, txn_index, producer_snapshot, epochs
    )


def parse_offset_index(data: bytes, base_offset: int) -> list[tuple[int, int]]:
    """(absolute offset, position) pairs of an offset index's bytes."""
    return [
        (base_offset + rel, pos)
        for rel, pos in _OFFSET_ENTRY.iter_unpack(data[: len(data) - len(data) % 8])
    ]


def parse_time_index(data: bytes, base_offset: int) -> list[tuple[int, int]]:
    """(timestamp, absolute offset) pairs of a time index's bytes."""
    return [
        (ts, base_offset + rel)
        for ts, rel in _TIME_ENTRY.iter_unpack(data[: len(data) - len(data) % 12])
    ]


def parse_txn_index(data: bytes) -> list[tuple[int, int, int, int]]:
    """(producer id, first offset, last offset, last stable offset) of a transaction index."""
    return [
        (pid, first, last, lso)
        for _v, pid, first, last, lso in _TXN_ENTRY.iter_unpack(data[: len(data) - len(data) % 34])
    ]
