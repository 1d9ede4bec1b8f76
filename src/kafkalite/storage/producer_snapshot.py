"""Producer state snapshot files (`<offset>.snapshot` in a partition directory): the idempotent
producers' state as of an offset, so a restart reads the log's batch headers only past that offset.

Written at segment roll and on clean close; checked by CRC-32C on load (a bad one is ignored).
"""

from __future__ import annotations

import logging
import os
import re
import struct
from collections import deque
from pathlib import Path

from crc32c import crc32c

from kafkalite.storage.file_cache import read_file
from kafkalite.storage.producer_state import (
    MAX_CACHED_BATCHES,
    BatchMetadata,
    ProducerEntry,
    ProducerStateManager,
)

log = logging.getLogger("kafkalite.storage.log")

SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_FILE_RE = re.compile(r"^(\d{20})\.snapshot$")
_MAGIC = b"KLPS"
_VERSION = 2
_HEAD = struct.Struct(">4shi")  # magic, version, producer count
_PRODUCER_V1 = struct.Struct(">qhi")  # producer id, epoch, batch count
# v2 adds: first offset of the open transaction, coordinator epoch, last timestamp
_PRODUCER = struct.Struct(">qhiqiq")
_BATCH = struct.Struct(">iiqqq")  # first seq, last seq, first offset, last offset, timestamp
_CRC = struct.Struct(">I")
KEEP_SNAPSHOTS = 2


def snapshot_path(directory: Path, offset: int) -> Path:
    return directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"


def snapshot_offsets(directory: Path, names: set[str] | None = None) -> list[int]:
    """Offsets of the snapshot files in `directory` (or among `names`, its listing), ascending."""
    out = []
    for entry in os.listdir(directory) if names is None else names:
        m = SNAPSHOT_FILE_RE.match(entry)
        if m is not None:
            out.append(int(m.group(1)))
    return sorted(out)


def encode_snapshot(state: ProducerStateManager) -> bytes:
    entries = list(state.entries())
    out = bytearray(_HEAD.pack(_MAGIC, _VERSION, len(entries)))
    for pid, entry in entries:
        out += _PRODUCER.pack(
            pid,
            entry.epoch,
            len(entry.batches),
            entry.current_txn_first_offset,
            entry.coordinator_epoch,
            entry.last_timestamp,
        )
        for b in entry.batches:
            out += _BATCH.pack(b.first_seq, b.last_seq, b.first_offset, b.last_offset, b.timestamp)
    out += _CRC.pack(crc32c(out))
    return bytes(out)


def decode_snapshot(data: bytes) -> ProducerStateManager:
    """The state in a snapshot file; ValueError when it is torn, corrupt or of another version."""
    if len(data) < _HEAD.size + _CRC.size:
        raise ValueError("snapshot too short")
    (crc,) = _CRC.unpack_from(data, len(data) - _CRC.size)
    body = data[: -_CRC.size]
    if crc32c(body) != crc:
        raise ValueError("snapshot CRC mismatch")
    magic, version, count = _HEAD.unpack_from(body, 0)
    if magic != _MAGIC or version not in (1, _VERSION):
        raise ValueError(f"not a version 1 or {_VERSION} producer snapshot")
    state = ProducerStateManager()
    pos = _HEAD.size
    head = _PRODUCER if version == _VERSION else _PRODUCER_V1
    try:
        for _ in range(count):
            txn_first, coord_epoch, last_ts = -1, -1, -1
            if version == _VERSION:
                pid, epoch, n, txn_first, coord_epoch, last_ts = head.unpack_from(body, pos)
            else:
                pid, epoch, n = head.unpack_from(body, pos)
            pos += head.size
            batches: deque[BatchMetadata] = deque(maxlen=MAX_CACHED_BATCHES)
            for _ in range(n):
                batches.append(BatchMetadata(*_BATCH.unpack_from(body, pos)))
                pos += _BATCH.size
            if last_ts < 0 and batches:
                last_ts = batches[-1].timestamp
            state.restore(pid, ProducerEntry(epoch, batches, txn_first, coord_epoch, last_ts))
    except struct.error as exc:
        raise ValueError(f"snapshot truncated: {exc}") from None
    if pos != len(body):
        raise ValueError("trailing bytes in snapshot")
    return state


def write_snapshot(
    directory: Path, offset: int, state: ProducerStateManager, *, fsync: bool = False
) -> None:
    """Write `<offset>.snapshot` (tmp file then rename) and keep only the newest few."""
    path = snapshot_path(directory, offset)
    tmp = path.with_name(path.name + ".tmp")
    data = encode_snapshot(state)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    for old in snapshot_offsets(directory)[:-KEEP_SNAPSHOTS]:
        snapshot_path(directory, old).unlink(missing_ok=True)


def delete_snapshots_above(directory: Path, offset: int, names: set[str] | None = None) -> None:
    """Drop snapshots past `offset` (the log was truncated there: they describe batches now gone);
    `names`, the directory's listing when the caller has one, is kept up to date."""
    for off in snapshot_offsets(directory, names):
        if off > offset:
            path = snapshot_path(directory, off)
            path.unlink(missing_ok=True)
            if names is not None:
                names.discard(path.name)


def latest_snapshot(
    directory: Path, max_offset: int, names: set[str] | None = None
) -> tuple[int, ProducerStateManager] | None:
    """The newest readable snapshot at or below `max_offset` (the log end offset), if any."""
    for off in reversed(snapshot_offsets(directory, names)):
        if off > max_offset:
            continue
        try:
            return off, decode_snapshot(read_file(snapshot_path(directory, off)))
        except (OSError, ValueError) as exc:
            log.warning("ignoring producer snapshot %s: %s", snapshot_path(directory, off), exc)
    return None
