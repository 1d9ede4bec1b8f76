"""The leader's check of a client's records before they are appended (Kafka's LogValidator): framing,
CRC-32C, size, timestamps, keys on compacted topics; legacy message sets up-converted, recompression.

Run by ReplicaManager.append_records for client appends; a refusal is a RecordValidationError.
"""

from __future__ import annotations

from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.exceptions import DecodeError
from kafkalite.records.header import (
    crc_valid,
    iter_batch_headers,
    parse_batch_header,
    read_magic,
)
from kafkalite.storage.config import LogConfig


class RecordValidationError(Exception):
    """A client's records refused: the error code, the message and (KIP-467) the records at fault."""

    def __init__(
        self,
        code: ErrorCode,
        message: str,
        record_errors: list[tuple[int, str | None]] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.record_errors = record_errors or []


def _check_records(
    buf: bytearray, pos: int, where: str, compacted: bool, limits: tuple[int, int, int] | None
) -> None:
    """KIP-467: decode the batch at `pos` and name every record Kafka's validator would refuse —
    a keyless record on a compacted topic, else one outside `limits` (now, before, after). Any such
    record drops the whole batch; the answer lists them by their index in the batch."""
    from kafkalite.records.batch import decode_batch

    try:
        batch = decode_batch(buf, pos)
    except DecodeError as exc:
        raise RecordValidationError(
            ErrorCode.CORRUPT_MESSAGE, f"record batch at byte {pos}: {exc}"
        ) from None
    keyless = f"Compacted topic cannot accept message without key in topic partition {where}"
    errors: list[tuple[int, str | None]] = []
    untimely = False
    for i, rec in enumerate(batch.records):
        if compacted and rec.key is None:
            errors.append((i, keyless))
        elif limits is not None and rec.timestamp >= 0:
            now_ms, before, after = limits
            if now_ms - rec.timestamp > before or rec.timestamp - now_ms > after:
                untimely = True
                errors.append(
                    (
                        i,
                        f"Timestamp {rec.timestamp} of message with offset {rec.offset} is out of "
                        f"range. The timestamp should be within [{now_ms - before}, {now_ms + after}]",
                    )
                )
    if not errors:
        return
    if untimely:
        raise RecordValidationError(
            ErrorCode.INVALID_TIMESTAMP,
            "One or more records have been rejected due to invalid timestamp",
            errors,
        )
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in errors[:3])
    raise RecordValidationError(
        ErrorCode.INVALID_RECORD,
        f"One or more records have been rejected due to {len(errors)} record errors in total, "
        f"and only showing the first three errors at most: [{shown}]",
        errors,
    )


def _upconvert(blob: bytes) -> bytes:
    from kafkalite.records.legacy import upconvert_to_v2

    return upconvert_to_v2(blob)


# topic compression.type -> codec id of RecordBatch attributes ("producer" keeps the producer's)
_TOPIC_CODECS = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def _recompress(buf: bytearray, pos: int, codec: int) -> bytes:
    """The batch at `pos` rebuilt with the topic's codec, as Kafka's broker does when a topic's
    compression.type names a codec: same records, offset deltas, timestamps and producer fields."""
    from kafkalite.records.batch import decode_batch
    from kafkalite.records.builder import RecordBatchBuilder

    try:
        batch = decode_batch(buf, pos)
    except DecodeError as exc:
        raise RecordValidationError(
            ErrorCode.CORRUPT_MESSAGE, f"record batch at byte {pos}: {exc}"
        ) from None
    builder = RecordBatchBuilder.like(parse_batch_header(buf, pos), compression=codec)
    for rec in batch.records:
        builder.append_with_offset(rec.offset, rec.key, rec.value, rec.headers, rec.timestamp)
    return builder.build(last_offset_delta=batch.last_offset_delta)


def validate_records(
    blob: bytes | bytearray | memoryview, cfg: LogConfig, now_ms: int, where: str = ""
) -> bytearray | memoryview:
    """Check a partition's records blob and return the bytes to append: a bytearray, or the blob
    itself when it is a writable view (of a request received in place), which the log stamps in
    place; `where` names the partition ("topic-0") in record errors."""
    if not blob:
        raise RecordValidationError(ErrorCode.INVALID_RECORD, "produce request carries no records")
    try:
        magic = read_magic(blob, 0)
    except DecodeError as exc:
        raise RecordValidationError(ErrorCode.CORRUPT_MESSAGE, str(exc)) from None
    if magic in (0, 1):
        try:
            blob = _upconvert(bytes(blob))
        except DecodeError as exc:
            raise RecordValidationError(
                ErrorCode.CORRUPT_MESSAGE, f"legacy message set: {exc}"
            ) from None
        except Exception as exc:  # a converter error must not escape as a broker failure
            raise RecordValidationError(
                ErrorCode.CORRUPT_MESSAGE, f"legacy message set: {exc}"
            ) from None
    elif magic != 2:
        raise RecordValidationError(
            ErrorCode.CORRUPT_MESSAGE, f"unknown record batch magic {magic}"
        )
    # a request received in place (a bytearray frame) is checked and stamped where it lies; anything
    # else is copied once into a bytearray of its own
    buf: bytearray | memoryview = (
        blob if type(blob) is memoryview and not blob.readonly else bytearray(blob)
    )
    pos = 0
    end = len(buf)
    max_bytes = cfg.max_message_bytes
    log_append = cfg.message_timestamp_type == "LogAppendTime"
    diff = cfg.message_timestamp_difference_max_ms
    before = min(diff, cfg.message_timestamp_before_max_ms)
    after = min(diff, cfg.message_timestamp_after_max_ms)
    target_codec = _TOPIC_CODECS.get(cfg.compression_type, -1)
    compacted = cfg.compact
    converted: list[tuple[int, int, bytes]] = []  # (position, size, recompressed batch)
    while pos < end:
        try:
            h = parse_batch_header(buf, pos)
        except DecodeError as exc:
            raise RecordValidationError(
                ErrorCode.CORRUPT_MESSAGE, f"record batch at byte {pos}: {exc}"
            ) from None
        if h.size > max_bytes:
            raise RecordValidationError(
                ErrorCode.MESSAGE_TOO_LARGE,
                f"record batch of {h.size} bytes exceeds max.message.bytes={max_bytes}; raise the "
                "topic's max.message.bytes (broker default: message.max.bytes)",
            )
        if not crc_valid(buf, pos, h):
            raise RecordValidationError(
                ErrorCode.CORRUPT_MESSAGE, f"CRC-32C mismatch in record batch at byte {pos}"
            )
        if h.is_control:
            raise RecordValidationError(
                ErrorCode.INVALID_RECORD, "clients may not produce control batches"
            )
        if h.base_offset != 0:
            raise RecordValidationError(
                ErrorCode.INVALID_RECORD, f"batch base offset {h.base_offset} is not 0"
            )
        if h.records_count == 0 or h.last_offset_delta != h.records_count - 1:
            raise RecordValidationError(
                ErrorCode.INVALID_RECORD,
                f"batch holds {h.records_count} records but last offset delta {h.last_offset_delta}",
            )
        bad: list[int] = []
        limits = None
        if not log_append and (before < 2**63 - 1 or after < 2**63 - 1):
            # (with LogAppendTime the log stamps the time, and the CRC, as it assigns offsets)
            bad = [
                ts
                for ts in (h.base_timestamp, h.max_timestamp)
                if ts >= 0 and (now_ms - ts > before or ts - now_ms > after)
            ]
            # the header bounds no record from below (base is the first record's, not the least):
            # with a "before" limit every record is checked, as Kafka's validator does
            if bad or before < 2**63 - 1:
                limits = (now_ms, before, after)
        if compacted or limits is not None:
            if type(buf) is memoryview:
                buf = bytearray(buf)
            _check_records(buf, pos, where, compacted, limits)
        if bad:  # the header says so though no record does: refused all the same
            raise RecordValidationError(
                ErrorCode.INVALID_TIMESTAMP,
                f"timestamp {bad[0]} is outside the allowed skew from broker time {now_ms}",
            )
        if target_codec >= 0 and h.compression != target_codec:
            if type(buf) is memoryview:
                buf = bytearray(buf)
            converted.append((pos, h.size, _recompress(buf, pos, target_codec)))
        pos += h.size
    if converted:
        out = bytearray()
        at = 0
        for start, size, new in converted:
            out += buf[at:start]
            out += new
            at = start + size
        out += buf[at:]
        for _pos, h in iter_batch_headers(out):
            if (
                h.size > max_bytes
            ):  # a codec can grow a batch (uncompressed, or incompressible data)
                raise RecordValidationError(
                    ErrorCode.MESSAGE_TOO_LARGE,
                    f"record batch of {h.size} bytes after recompression to the topic's "
                    f"compression.type={cfg.compression_type} exceeds max.message.bytes={max_bytes}; "
                    "raise the topic's max.message.bytes (broker default: message.max.bytes)",
                )
        return out
    return buf
