"""RemoteStorageManager: Kafka's KIP-405 plugin interface (copy a segment with its indexes, fetch a byte range
or an index, delete), the segment's data as a copy takes it, and the errors a manager raises.

Implementations: local_tiered_storage (a directory). Blocking calls: the caller runs them on a worker thread.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from kafkalite.storage.remote.metadata import RemoteLogSegmentMetadata


class RemoteStorageError(Exception):
    """The remote store failed (Kafka's RemoteStorageException): the caller retries later."""


class RemoteResourceNotFound(RemoteStorageError):
    """The segment or index asked for is not in the remote store."""


class IndexType(enum.Enum):
    """The files that go with a segment (Kafka's RemoteStorageManager.IndexType), by file suffix."""

    OFFSET = ".index"
    TIMESTAMP = ".timeindex"
    TRANSACTION = ".txnindex"
    PRODUCER_SNAPSHOT = ".snapshot"
    LEADER_EPOCH = ".leader-epoch-checkpoint"


@dataclass(frozen=True, slots=True)
class LogSegmentData:
    """A rolled segment as it is copied (Kafka's LogSegmentData): the first `log_size` bytes of the
    `.log` file at `log_segment`, and its indexes' bytes (the transaction index None when it has no
    aborted transaction, the producer snapshot None when none was taken at its end)."""

    log_segment: Path
    log_size: int
    offset_index: bytes
    time_index: bytes
    transaction_index: bytes | None
    producer_snapshot: bytes | None
    leader_epoch_index: bytes


class RemoteStorageManager(Protocol):
    """Kafka's RemoteStorageManager. Each call is atomic for its segment: after a crash a segment is
    either wholly there or not at all (a half-written copy is never visible)."""

    def copy_log_segment_data(
        self, metadata: RemoteLogSegmentMetadata, data: LogSegmentData
    ) -> None: ...

    def fetch_log_segment(
        self, metadata: RemoteLogSegmentMetadata, start_position: int, end_position: int | None
    ) -> bytes:
        """Bytes [start_position, end_position] of the segment (inclusive, as Kafka's; None: to
        its end)."""
        ...

    def fetch_index(self, metadata: RemoteLogSegmentMetadata, index_type: IndexType) -> bytes:
        """An index's bytes; RemoteResourceNotFound when the segment has none of this type."""
        ...

    def delete_log_segment_data(self, metadata: RemoteLogSegmentMetadata) -> None:
        """Remove the segment and its indexes; no error when they are gone already."""
        ...

    def close(self) -> None: ...
