"""The clean-shutdown manifest of a log dir: each partition's segments, offsets and leader epochs as
the LogManager closed them, so the next start takes every log up without opening a file.

Written last by a clean shutdown (before the clean-shutdown marker), read and removed by the next
start; a start after a crash finds none and recovers the logs from their files.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from kafkalite.storage.segment import SegmentState

log = logging.getLogger(__name__)

MANIFEST_FILE = "kafkalite-log-manifest"
_VERSION = 1


@dataclass(frozen=True, slots=True)
class LogState:
    """One partition's log as closed: enough for `Log.restore` to take it up without I/O."""

    dir_name: str
    topic_id: str | None
    log_start: int
    log_end: int
    high_watermark: int
    epochs: list[tuple[int, int]]
    # no open transaction at the close: the producer state may load on first need (else at start)
    stable: bool
    segments: list[SegmentState]

    def to_json(self) -> str:
        fields = [self.dir_name, self.topic_id, self.log_start, self.log_end, self.high_watermark]
        return json.dumps([*fields, self.epochs, self.stable, self.segments], separators=(",", ":"))

    @staticmethod
    def from_json(text: str) -> LogState:
        d, tid, start, end, hw, epochs, stable, segs = json.loads(text)
        if not isinstance(d, str) or not segs:
            raise ValueError("a log with no name or no segment")
        return LogState(
            d, tid, int(start), int(end), int(hw),
            [(int(e), int(s)) for e, s in epochs], bool(stable),
            [tuple(int(x) for x in seg) for seg in segs],  # type: ignore[misc]
        )  # fmt: skip


def write_manifest(log_dir: Path, states: list[LogState]) -> None:
    """Write the dir's manifest crash-safely (temporary file, fsync, rename)."""
    path = log_dir / MANIFEST_FILE
    tmp = path.with_name(MANIFEST_FILE + ".tmp")
    lines = [json.dumps({"version": _VERSION, "logs": len(states)})]
    lines += [s.to_json() for s in states]
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        data = ("\n".join(lines) + "\n").encode()
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def take_manifest(log_dir: Path) -> dict[str, LogState] | None:
    """The dir's manifest by partition dir name, removed from the disk (it describes only the
    moment of the clean shutdown that wrote it); None when there is none or it cannot be used."""
    path = log_dir / MANIFEST_FILE
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.warning("cannot read %s (%s): loading the logs from their files", path, exc)
        return None
    finally:
        path.unlink(missing_ok=True)
        path.with_name(MANIFEST_FILE + ".tmp").unlink(missing_ok=True)
    try:
        lines = text.splitlines()
        head = json.loads(lines[0])
        if head.get("version") != _VERSION:
            raise ValueError(f"unknown version {head.get('version')!r}")
        states = [LogState.from_json(line) for line in lines[1:]]
        if len(states) != head.get("logs"):
            raise ValueError(f"{head.get('logs')} logs announced, {len(states)} found")
    except (ValueError, TypeError, IndexError, AttributeError) as exc:
        log.warning("ignoring malformed %s (%s): loading the logs from their files", path, exc)
        return None
    return {s.dir_name: s for s in states}
