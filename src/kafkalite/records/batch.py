"""RecordBatch v2 (magic 2): the reader that decodes whole batches into records (the builder is re-exported).

The reader is the consumer's hot path: records are parsed by one loop with inlined varint decoding.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

import crc32c as _crc32c

from kafkalite.protocol.exceptions import DecodeError
from kafkalite.records.builder import (  # the builder is re-exported: one import for both sides
    CREATE_TIME,
    LOG_APPEND_TIME,
    Buffer,
    Header,
    RecordBatchBuilder,
    build_batch,
    encode_record_body,
    zigzag_bytes,
)
from kafkalite.records.compression import DEFAULT_MAX_DECOMPRESSED_SIZE, decompress
from kafkalite.records.header import (
    COMPRESSION_MASK,
    CONTROL_MASK,
    DELETE_HORIZON_MASK,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
)

NO_TIMESTAMP_TYPE = -1  # legacy magic 0 messages carry no timestamp
NO_SEQUENCE = -1
MIN_RECORD_SIZE = 7  # length, attributes, timestamp delta, offset delta, key, value, header count

_HEADER = struct.Struct(">qiibIhiqqqhii")
_INT32_MAX = 0x7FFFFFFF


@dataclass(slots=True)
class Record:
    """One record of a batch with its absolute offset and timestamp (the batch carries its attributes)."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[Header]


class RecordBatch:
    """A decoded batch: the v2 header fields plus its records (legacy messages arrive up-converted)."""

    __slots__ = (
        "base_offset",
        "batch_length",
        "partition_leader_epoch",
        "magic",
        "crc",
        "attributes",
        "last_offset_delta",
        "base_timestamp",
        "max_timestamp",
        "producer_id",
        "producer_epoch",
        "base_sequence",
        "records_count",
        "timestamp_type",
        "records",
    )

    def __init__(
        self,
        base_offset: int,
        batch_length: int,
        partition_leader_epoch: int,
        magic: int,
        crc: int,
        attributes: int,
        last_offset_delta: int,
        base_timestamp: int,
        max_timestamp: int,
        producer_id: int,
        producer_epoch: int,
        base_sequence: int,
        records_count: int,
        records: list[Record],
        timestamp_type: int | None = None,
    ) -> None:
        self.base_offset = base_offset
        self.batch_length = batch_length
        self.partition_leader_epoch = partition_leader_epoch
        self.magic = magic
        self.crc = crc
        self.attributes = attributes
        self.last_offset_delta = last_offset_delta
        self.base_timestamp = base_timestamp
        self.max_timestamp = max_timestamp
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.records_count = records_count
        self.records = records
        if timestamp_type is None:
            timestamp_type = LOG_APPEND_TIME if attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME
        self.timestamp_type = timestamp_type

    @property
    def size(self) -> int:
        """Bytes on the wire including the 12-byte log overhead (for legacy input: the source message)."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_MASK)

    @property
    def delete_horizon_ms(self) -> int | None:
        """When the delete-horizon flag is set the base timestamp holds the horizon (KIP-534)."""
        return self.base_timestamp if self.attributes & DELETE_HORIZON_MASK else None

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def last_sequence(self) -> int:
        if self.base_sequence < 0:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & _INT32_MAX

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self) -> Iterator[Record]:
        return iter(self.records)

    def __repr__(self) -> str:
        return (
            f"RecordBatch(base_offset={self.base_offset}, magic={self.magic}, "
            f"records={len(self.records)}, last_offset_delta={self.last_offset_delta}, "
            f"compression={self.compression}, timestamp_type={self.timestamp_type}, "
            f"producer_id={self.producer_id}, control={self.is_control}, "
            f"transactional={self.is_transactional})"
        )


# -- reading --------------------------------------------------------------------------------------


def _uvarint_slow(buf: bytes, pos: int) -> tuple[int, int]:
    """Unsigned varint of up to 10 bytes (the inline fast paths handle 1 and 2 bytes)."""
    result = 0
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise DecodeError("varint longer than 10 bytes")


def _read_zz(buf: bytes, pos: int) -> tuple[int, int]:
    v, pos = _uvarint_slow(buf, pos)
    return (v >> 1) ^ -(v & 1), pos


def _decode_headers(buf: bytes, pos: int, end: int) -> tuple[list[Header], int]:
    n, pos = _read_zz(buf, pos)
    if n < 0 or n * 2 > end - pos:
        raise DecodeError(f"invalid header count {n}")
    headers: list[Header] = []
    for _ in range(n):
        kl, pos = _read_zz(buf, pos)
        if kl < 0 or pos + kl > end:
            raise DecodeError(f"invalid header key length {kl}")
        try:
            hk = buf[pos : pos + kl].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DecodeError(f"header key is not valid UTF-8: {exc}") from exc
        pos += kl
        vl, pos = _read_zz(buf, pos)
        if vl < 0:
            if vl != -1:
                raise DecodeError(f"invalid header value length {vl}")
            headers.append((hk, None))
        else:
            if pos + vl > end:
                raise DecodeError(f"header value length {vl} exceeds the record")
            headers.append((hk, buf[pos : pos + vl]))
            pos += vl
    return headers, pos


def decode_records(
    buf: bytes,
    pos: int,
    end: int,
    count: int,
    base_offset: int,
    base_timestamp: int,
    fixed_timestamp: int | None = None,
) -> list[Record]:
    """Decode `count` v2 records from buf[pos:end]; the whole range must be consumed exactly.

    `fixed_timestamp` (LogAppendTime batches) replaces every record's own timestamp.
    """
    if count < 0 or count > (end - pos) // MIN_RECORD_SIZE:
        raise DecodeError(f"record count {count} does not fit the {end - pos} bytes of records")
    records: list[Record] = []
    append = records.append
    new_record = Record
    slow = _uvarint_slow
    try:
        for _ in range(count):
            # record length (zig-zag varint; 1 and 2 bytes inline, longer ones out of line)
            b = buf[pos]
            if b < 0x80:
                v = b
                pos += 1
            else:
                v = buf[pos + 1]
                if v < 0x80:
                    v = (b & 0x7F) | (v << 7)
                    pos += 2
                else:
                    v, pos = slow(buf, pos)
            if v & 1:
                raise DecodeError("negative record length")
            rec_end = pos + (v >> 1)
            if rec_end > end:
                raise DecodeError("record length exceeds the batch")
            # attributes (unused), then the timestamp delta (zig-zag varlong)
            b = buf[pos + 1]
            if b < 0x80:
                timestamp = base_timestamp + ((b >> 1) ^ -(b & 1))
                pos += 2
            else:
                v = buf[pos + 2]
                if v < 0x80:
                    v = (b & 0x7F) | (v << 7)
                    pos += 3
                else:
                    v, pos = slow(buf, pos + 1)
                timestamp = base_timestamp + ((v >> 1) ^ -(v & 1))
            # offset delta
            b = buf[pos]
            if b < 0x80:
                offset = base_offset + ((b >> 1) ^ -(b & 1))
                pos += 1
            else:
                v = buf[pos + 1]
                if v < 0x80:
                    v = (b & 0x7F) | (v << 7)
                    pos += 2
                else:
                    v, pos = slow(buf, pos)
                offset = base_offset + ((v >> 1) ^ -(v & 1))
            # key
            b = buf[pos]
            if b < 0x80:
                pos += 1
                if b & 1:
                    if b != 1:
                        raise DecodeError("negative key length")
                    key = None
                else:
                    b >>= 1
                    key = buf[pos : pos + b]
                    pos += b
            else:
                v = buf[pos + 1]
                if v < 0x80:
                    v = (b & 0x7F) | (v << 7)
                    pos += 2
                else:
                    v, pos = slow(buf, pos)
                if v & 1:
                    raise DecodeError("negative key length")
                v >>= 1
                key = buf[pos : pos + v]
                pos += v
            # value
            b = buf[pos]
            if b < 0x80:
                pos += 1
                if b & 1:
                    if b != 1:
                        raise DecodeError("negative value length")
                    value = None
                else:
                    b >>= 1
                    value = buf[pos : pos + b]
                    pos += b
            else:
                v = buf[pos + 1]
                if v < 0x80:
                    v = (b & 0x7F) | (v << 7)
                    pos += 2
                else:
                    v, pos = slow(buf, pos)
                if v & 1:
                    raise DecodeError("negative value length")
                v >>= 1
                value = buf[pos : pos + v]
                pos += v
            # headers: almost always none
            if buf[pos] == 0:
                pos += 1
                headers: list[Header] = []
            else:
                headers, pos = _decode_headers(buf, pos, rec_end)
            if pos != rec_end:
                raise DecodeError(f"record fields end at {pos}, its length says {rec_end}")
            append(new_record(offset, timestamp, key, value, headers))
    except IndexError:
        raise DecodeError("truncated record") from None
    if pos != end:
        raise DecodeError(f"{end - pos} bytes left after the {count} declared records")
    if fixed_timestamp is not None:  # LogAppendTime: off the per-record path
        for r in records:
            r.timestamp = fixed_timestamp
    return records


def decode_batch(
    buf: Buffer,
    pos: int = 0,
    verify_crc: bool = False,
    *,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> RecordBatch:
    """Decode the v2 batch at `pos` (decompressing it); DecodeError on anything malformed."""
    if pos < 0 or len(buf) - pos < HEADER_SIZE:
        raise DecodeError(f"record batch header needs {HEADER_SIZE} bytes, {len(buf) - pos} left")
    (
        base_offset,
        batch_length,
        leader_epoch,
        magic,
        crc,
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    ) = _HEADER.unpack_from(buf, pos)
    if magic != 2:
        raise DecodeError(f"expected a magic 2 record batch, got magic {magic}")
    if batch_length < HEADER_SIZE - LOG_OVERHEAD:
        raise DecodeError(f"batch length {batch_length} is shorter than a v2 header")
    end = pos + batch_length + LOG_OVERHEAD
    if end > len(buf):
        raise DecodeError(f"batch of {batch_length + LOG_OVERHEAD} bytes exceeds the buffer")
    if last_offset_delta < 0 or count < 0:
        raise DecodeError("negative record count or offset delta")
    if verify_crc:
        actual = _crc32c.crc32c(memoryview(buf)[pos + 21 : end])
        if actual != crc:
            raise DecodeError(
                f"CRC-32C mismatch in batch at offset {base_offset}: stored {crc:#010x}, "
                f"computed {actual:#010x}"
            )
    codec = attributes & COMPRESSION_MASK
    start = pos + HEADER_SIZE
    data: bytes
    if codec and start < end:
        data = decompress(codec, memoryview(buf)[start:end], max_size=max_decompressed_size)
        start = 0
        end = len(data)
    elif type(buf) is bytes:
        data = buf
    else:
        data = bytes(memoryview(buf)[start:end])
        end -= start
        start = 0
    fixed = max_timestamp if attributes & TIMESTAMP_TYPE_MASK else None
    records = decode_records(data, start, end, count, base_offset, base_timestamp, fixed)
    return RecordBatch(
        base_offset,
        batch_length,
        leader_epoch,
        magic,
        crc,
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
        records,
    )


def iter_batches(
    blob: Buffer,
    *,
    verify_crc: bool = False,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    allow_truncated_tail: bool = False,
) -> Iterator[RecordBatch]:
    """Yield every batch of a records blob; legacy v0/v1 messages are up-converted on the fly.

    `allow_truncated_tail` skips an incomplete last batch silently (fetch responses may end in one).
    """
    if type(blob) is not bytes:
        blob = bytes(blob)
    pos = 0
    end = len(blob)
    while pos < end:
        left = end - pos
        if left < LOG_OVERHEAD + 5:
            if allow_truncated_tail:
                return
            raise DecodeError(f"{left} trailing bytes are too short for a batch")
        size = int.from_bytes(blob[pos + 8 : pos + 12], "big", signed=True) + LOG_OVERHEAD
        if size < LOG_OVERHEAD:
            raise DecodeError(f"negative batch length at byte {pos}")
        if size > left:
            if allow_truncated_tail:
                return
            raise DecodeError(f"batch of {size} bytes exceeds the {left} bytes left")
        magic = blob[pos + MAGIC_OFFSET]
        if magic == 2:
            yield decode_batch(blob, pos, verify_crc, max_decompressed_size=max_decompressed_size)
        elif magic in (0, 1):
            from kafkalite.records.legacy import legacy_entry_to_batches

            yield from legacy_entry_to_batches(
                blob, pos, verify_crc=verify_crc, max_decompressed_size=max_decompressed_size
            )
        else:
            raise DecodeError(f"unknown record magic {magic} at byte {pos}")
        pos += size


def decode_all(blob: Buffer, **kwargs: bool | int) -> list[Record]:
    """All records of all batches of a blob, flattened (control batches included)."""
    out: list[Record] = []
    for batch in iter_batches(blob, **kwargs):  # type: ignore[arg-type]
        out.extend(batch.records)
    return out


__all__ = [
    "CREATE_TIME",
    "LOG_APPEND_TIME",
    "NO_SEQUENCE",
    "NO_TIMESTAMP_TYPE",
    "Record",
    "RecordBatch",
    "RecordBatchBuilder",
    "build_batch",
    "decode_all",
    "decode_batch",
    "decode_records",
    "encode_record_body",
    "iter_batches",
    "zigzag_bytes",
]
