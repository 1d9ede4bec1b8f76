"""LocalTieredStorage: a RemoteStorageManager on a directory (a shared mount or any path), as Kafka's own
tests use one. Each segment is a directory of its files and a manifest, written under a temporary name and
renamed into place (atomic), and renamed away before it is removed.

Layout: <root>/<topic>-<partition>-<topic id>/<start offset>-<segment id>/{segment.log, .index, ...,
manifest.json}.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import uuid
from pathlib import Path

from kafkalite.storage.remote.metadata import RemoteLogSegmentMetadata
from kafkalite.storage.remote.storage_manager import (
    IndexType,
    LogSegmentData,
    RemoteResourceNotFound,
    RemoteStorageError,
)

log = logging.getLogger("kafkalite.storage.remote")

_TMP = ".tmp-"
_DELETING = ".deleting-"
_LOG_FILE = "segment.log"
_MANIFEST = "manifest.json"
_COPY_CHUNK = 1 << 20


def _fsync_dir(d: Path) -> None:
    fd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class LocalTieredStorage:
    """The directory remote store. Thread-safe for distinct segments (the caller copies one segment
    once); leftovers of a crash (temporary or half-deleted directories) are removed when it opens."""

    def __init__(self, root: Path | str, *, fsync: bool = True) -> None:
        self.root = Path(root)
        self.fsync = fsync
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RemoteStorageError(f"remote storage directory {self.root}: {exc}") from exc
        if not os.access(self.root, os.W_OK):
            raise RemoteStorageError(f"remote storage directory {self.root} is not writable")
        self.cleaned = self._remove_leftovers()

    def _remove_leftovers(self) -> int:
        n = 0
        for part in self.root.iterdir():
            if not part.is_dir():
                continue
            for d in part.iterdir():
                if d.name.startswith((_TMP, _DELETING)):
                    shutil.rmtree(d, ignore_errors=True)
                    n += 1
        return n

    # -- names ----------------------------------------------------------------------------------------
    def partition_dir(self, m: RemoteLogSegmentMetadata) -> Path:
        return self.root / f"{m.topic}-{m.partition}-{m.topic_id}"

    def segment_dir(self, m: RemoteLogSegmentMetadata) -> Path:
        return self.partition_dir(m) / m.object_name

    # -- RemoteStorageManager -------------------------------------------------------------------------
    def copy_log_segment_data(
        self, metadata: RemoteLogSegmentMetadata, data: LogSegmentData
    ) -> None:
        final = self.segment_dir(metadata)
        if final.exists():  # a retried copy of the same segment id: it is there already
            return
        parent = final.parent
        try:
            parent.mkdir(parents=True, exist_ok=True)
            tmp = parent / f"{_TMP}{final.name}-{uuid.uuid4().hex[:8]}"
            tmp.mkdir()
            self._write_log(data, tmp / _LOG_FILE)
            files = {
                IndexType.OFFSET: data.offset_index,
                IndexType.TIMESTAMP: data.time_index,
                IndexType.TRANSACTION: data.transaction_index,
                IndexType.PRODUCER_SNAPSHOT: data.producer_snapshot,
                IndexType.LEADER_EPOCH: data.leader_epoch_index,
            }
            for kind, blob in files.items():
                if blob is not None:
                    self._write(tmp / f"segment{kind.value}", blob)
            manifest = {
                "segment_id": str(metadata.segment_id),
                "start_offset": metadata.start_offset,
                "end_offset": metadata.end_offset,
                "size": data.log_size,
                "files": [_LOG_FILE] + [f"segment{k.value}" for k, b in files.items() if b],
            }
            self._write(tmp / _MANIFEST, json.dumps(manifest).encode())
            if self.fsync:
                _fsync_dir(tmp)
            os.rename(tmp, final)
            if self.fsync:
                _fsync_dir(parent)
        except OSError as exc:
            raise RemoteStorageError(f"copy of {final.name} to {parent}: {exc}") from exc

    def _write_log(self, data: LogSegmentData, dest: Path) -> None:
        left = data.log_size
        with open(data.log_segment, "rb") as src, open(dest, "wb") as out:
            while left > 0:
                chunk = src.read(min(left, _COPY_CHUNK))
                if not chunk:
                    raise RemoteStorageError(f"{data.log_segment} is shorter than {data.log_size}")
                out.write(chunk)
                left -= len(chunk)
            out.flush()
            if self.fsync:
                os.fsync(out.fileno())

    def _write(self, dest: Path, blob: bytes) -> None:
        with open(dest, "wb") as out:
            out.write(blob)
            out.flush()
            if self.fsync:
                os.fsync(out.fileno())

    def fetch_log_segment(
        self, metadata: RemoteLogSegmentMetadata, start_position: int, end_position: int | None
    ) -> bytes:
        path = self.segment_dir(metadata) / _LOG_FILE
        try:
            with open(path, "rb") as f:
                f.seek(start_position)
                if end_position is None:
                    return f.read()
                return f.read(max(0, end_position - start_position + 1))
        except FileNotFoundError:
            raise RemoteResourceNotFound(
                f"remote segment {metadata.object_name} not found"
            ) from None
        except OSError as exc:
            raise RemoteStorageError(f"read of {path}: {exc}") from exc

    def fetch_index(self, metadata: RemoteLogSegmentMetadata, index_type: IndexType) -> bytes:
        path = self.segment_dir(metadata) / f"segment{index_type.value}"
        try:
            return path.read_bytes()
        except FileNotFoundError:
            raise RemoteResourceNotFound(
                f"{index_type.name} of remote segment {metadata.object_name} not found"
            ) from None
        except OSError as exc:
            raise RemoteStorageError(f"read of {path}: {exc}") from exc

    def delete_log_segment_data(self, metadata: RemoteLogSegmentMetadata) -> None:
        final = self.segment_dir(metadata)
        doomed = final.parent / f"{_DELETING}{final.name}"
        try:
            os.rename(final, doomed)
        except FileNotFoundError:
            if not doomed.exists():
                return
        except OSError as exc:
            raise RemoteStorageError(f"delete of {final}: {exc}") from exc
        shutil.rmtree(doomed, ignore_errors=True)

    def close(self) -> None:
        pass

    # -- for checks (orphans) -------------------------------------------------------------------------
    def list_segments(self) -> list[str]:
        """Every segment directory present, as "<partition dir>/<object name>"."""
        return sorted(
            f"{p.name}/{d.name}"
            for p in self.root.iterdir()
            if p.is_dir()
            for d in p.iterdir()
            if d.is_dir() and not d.name.startswith((_TMP, _DELETING))
        )
