"""Storage-layer exceptions, each carrying the Kafka ErrorCode the broker puts on the wire.

Raised by Log / LogManager; the broker maps `exc.error_code` straight into its response.
"""

from __future__ import annotations

from kafkalite.protocol.errors import ErrorCode


class StorageError(Exception):
    """Base class; `error_code` is what a handler answers with."""

    error_code: ErrorCode = ErrorCode.KAFKA_STORAGE_ERROR

    def __init__(self, message: str = "") -> None:
        super().__init__(message or self.__class__.__name__)


class OffsetOutOfRange(StorageError):
    error_code = ErrorCode.OFFSET_OUT_OF_RANGE


class RecordBatchTooLarge(StorageError):
    error_code = ErrorCode.MESSAGE_TOO_LARGE


class RecordListTooLarge(StorageError):
    error_code = ErrorCode.RECORD_LIST_TOO_LARGE


class CorruptRecord(StorageError):
    error_code = ErrorCode.CORRUPT_MESSAGE


class InvalidConfig(StorageError):
    error_code = ErrorCode.INVALID_CONFIG


class LogClosed(StorageError):
    """The log was closed or deleted (e.g. topic deletion racing an append)."""

    error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER


class KafkaStorageError(StorageError):
    error_code = ErrorCode.KAFKA_STORAGE_ERROR


class LogDirOffline(LogClosed):
    """The log's directory failed (a full disk, an I/O error): its logs serve nothing until restart."""

    error_code = ErrorCode.KAFKA_STORAGE_ERROR


class LogDirNotFound(StorageError):
    """AlterReplicaLogDirs named a directory that is not one of this broker's log dirs."""

    error_code = ErrorCode.LOG_DIR_NOT_FOUND


class OutOfOrderSequence(StorageError):
    """An idempotent producer's batch skips sequence numbers."""

    error_code = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


class InvalidProducerEpoch(StorageError):
    """An idempotent producer's batch carries an epoch older than the partition has seen."""

    error_code = ErrorCode.INVALID_PRODUCER_EPOCH


class InvalidProducerBatch(StorageError):
    """An idempotent producer's batch arrived with other batches in one append."""

    error_code = ErrorCode.INVALID_RECORD


class UnexpectedAppendOffset(StorageError):
    """A replica append whose first batch starts below the log end (the follower and its leader
    disagree about where the log ends: it must truncate first)."""

    error_code = ErrorCode.UNKNOWN_SERVER_ERROR


class InvalidTxnState(StorageError):
    """A producer with an open transaction sent a non-transactional batch."""

    error_code = ErrorCode.INVALID_TXN_STATE


class TxnCoordinatorFenced(StorageError):
    """A commit/abort marker from a transaction coordinator older than one already seen."""

    error_code = ErrorCode.TRANSACTION_COORDINATOR_FENCED
