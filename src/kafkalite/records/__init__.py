"""Record formats: RecordBatch v2 and the legacy v0/v1 message sets, their compression codecs.

`header` is the hot-path view (no record decoding); `batch` builds and reads whole batches.
"""

from __future__ import annotations

from kafkalite.records.batch import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    NO_TIMESTAMP_TYPE,
    Record,
    RecordBatch,
    RecordBatchBuilder,
    build_batch,
    decode_all,
    decode_batch,
    iter_batches,
)
from kafkalite.records.compression import (
    Compression,
    CompressionError,
    DecompressionLimitExceeded,
    UnsupportedCompressionError,
    compress,
    decompress,
)
from kafkalite.records.control import (
    ControlRecordType,
    EndTxnMarker,
    build_end_txn_marker_batch,
    parse_control_key,
    parse_end_txn_marker,
)
from kafkalite.records.header import (
    BatchHeader,
    crc_valid,
    iter_batch_headers,
    parse_batch_header,
)
from kafkalite.records.legacy import downconvert, upconvert_to_v2

__all__ = [
    "CREATE_TIME",
    "LOG_APPEND_TIME",
    "NO_TIMESTAMP_TYPE",
    "BatchHeader",
    "Compression",
    "CompressionError",
    "ControlRecordType",
    "DecompressionLimitExceeded",
    "EndTxnMarker",
    "Record",
    "RecordBatch",
    "RecordBatchBuilder",
    "UnsupportedCompressionError",
    "build_batch",
    "build_end_txn_marker_batch",
    "compress",
    "crc_valid",
    "decode_all",
    "decode_batch",
    "decompress",
    "downconvert",
    "iter_batch_headers",
    "iter_batches",
    "parse_batch_header",
    "parse_control_key",
    "parse_end_txn_marker",
    "upconvert_to_v2",
]
