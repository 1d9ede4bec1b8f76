"""KIP-405's remote tier, knowing nothing of brokers: remote storage managers (a directory) that copy a
rolled segment with its indexes and read it back, and the remote log metadata (segment states, replay).
"""

from kafkalite.storage.remote.local_tiered_storage import LocalTieredStorage
from kafkalite.storage.remote.metadata import (
    RemoteLogMetadataCache,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
)
from kafkalite.storage.remote.storage_manager import (
    IndexType,
    LogSegmentData,
    RemoteResourceNotFound,
    RemoteStorageError,
    RemoteStorageManager,
)

__all__ = [
    "IndexType",
    "LocalTieredStorage",
    "LogSegmentData",
    "RemoteLogMetadataCache",
    "RemoteLogSegmentMetadata",
    "RemoteLogSegmentState",
    "RemoteResourceNotFound",
    "RemoteStorageError",
    "RemoteStorageManager",
]
