"""Offset checkpoint files (recovery-point, replication-offset, log-start-offset, cleaner-offset): `0`, a count, then
`topic partition offset` lines, replaced atomically (write temp, fsync, rename, fsync dir).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

log = logging.getLogger(__name__)

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"  # high watermarks
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
_VERSION = 0


class OffsetCheckpointFile:
    """A per-log-dir map (topic, partition) -> offset persisted crash-safely."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def write(self, offsets: Mapping[tuple[str, int], int]) -> None:
        lines = [str(_VERSION), str(len(offsets))]
        lines += [f"{t} {p} {o}" for (t, p), o in sorted(offsets.items())]
        data = ("\n".join(lines) + "\n").encode()
        tmp = self.path.with_name(self.path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        dfd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)

    def read(self) -> dict[tuple[str, int], int]:
        """The stored offsets; an empty map (and a warning) if the file is missing or malformed."""
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return {}
        lines = text.splitlines()
        try:
            if int(lines[0]) != _VERSION:
                raise ValueError(f"unknown version {lines[0]}")
            count = int(lines[1])
            out: dict[tuple[str, int], int] = {}
            for line in lines[2 : 2 + count]:
                topic, part, off = line.rsplit(" ", 2)
                out[(topic, int(part))] = int(off)
            if len(out) != count:
                raise ValueError(f"expected {count} entries, found {len(out)}")
            return out
        except (ValueError, IndexError) as e:
            log.warning("ignoring malformed checkpoint %s: %s", self.path, e)
            return {}


class LogOffsets(NamedTuple):
    """What the offset checkpoint files hold for one log (`first_dirty` only when compacted)."""

    recovery_point: int
    high_watermark: int
    log_start: int
    first_dirty: int | None


def read_dir_checkpoints(
    d: Path,
) -> tuple[dict[tuple[str, int], int], ...]:
    """A log dir's recovery points, high watermarks, log start offsets and cleaner offsets."""
    return tuple(
        OffsetCheckpointFile(d / name).read()
        for name in (
            RECOVERY_POINT_CHECKPOINT,
            REPLICATION_OFFSET_CHECKPOINT,
            LOG_START_OFFSET_CHECKPOINT,
            CLEANER_OFFSET_CHECKPOINT,
        )
    )


def write_dir_checkpoints(d: Path, mine: list[tuple[tuple[str, int], LogOffsets]]) -> None:
    """Write a log dir's four offset checkpoint files for its logs."""
    OffsetCheckpointFile(d / RECOVERY_POINT_CHECKPOINT).write(
        {tp: o.recovery_point for tp, o in mine}
    )
    OffsetCheckpointFile(d / REPLICATION_OFFSET_CHECKPOINT).write(
        {tp: o.high_watermark for tp, o in mine}
    )
    OffsetCheckpointFile(d / LOG_START_OFFSET_CHECKPOINT).write({tp: o.log_start for tp, o in mine})
    OffsetCheckpointFile(d / CLEANER_OFFSET_CHECKPOINT).write(
        {tp: o.first_dirty for tp, o in mine if o.first_dirty is not None}
    )
