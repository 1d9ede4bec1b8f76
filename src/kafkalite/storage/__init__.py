"""The durable partition log: segments, offset/time indexes, Log, LogManager, retention and the cleaner.

Speaks in offsets, batches and file slices (for sendfile), never in wire messages.
"""

from __future__ import annotations

from kafkalite.storage.cleaner import CleanerStats, LogCleaner
from kafkalite.storage.config import TOPIC_CONFIG_DEFAULTS, TOPIC_CONFIG_DOCS, LogConfig
from kafkalite.storage.epoch_cache import EpochEntry, LeaderEpochFileCache
from kafkalite.storage.errors import (
    CorruptRecord,
    KafkaStorageError,
    LogClosed,
    OffsetOutOfRange,
    RecordBatchTooLarge,
    StorageError,
    UnexpectedAppendOffset,
)
from kafkalite.storage.log import Log
from kafkalite.storage.manager import LogManager
from kafkalite.storage.segment import LogSegment
from kafkalite.storage.types import (
    AppendInfo,
    AppendResult,
    FetchDataInfo,
    FileSlice,
    LogOffsetMetadata,
)

__all__ = [
    "TOPIC_CONFIG_DEFAULTS",
    "TOPIC_CONFIG_DOCS",
    "AppendInfo",
    "AppendResult",
    "CleanerStats",
    "CorruptRecord",
    "EpochEntry",
    "FetchDataInfo",
    "FileSlice",
    "KafkaStorageError",
    "LeaderEpochFileCache",
    "Log",
    "LogCleaner",
    "LogClosed",
    "LogConfig",
    "LogManager",
    "LogOffsetMetadata",
    "LogSegment",
    "OffsetOutOfRange",
    "RecordBatchTooLarge",
    "StorageError",
    "UnexpectedAppendOffset",
]
