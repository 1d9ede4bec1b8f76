"""Header-only view of RecordBatch v2 (and legacy message) framing for the broker's hot path.

Reads the 61-byte batch header, checks CRC-32C, and patches base offset / leader epoch in place, never
decoding records. Layout offsets are the v2 format's (magic sits at byte 16 in every format).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

import crc32c as _crc32c

from kafkalite.protocol.exceptions import DecodeError

Buffer = bytes | bytearray | memoryview

LOG_OVERHEAD = 12  # base offset (8) + batch length (4): bytes not counted in batch_length
HEADER_SIZE = 61  # v2 header through the records count
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21  # the CRC-32C covers attributes .. end of batch
PARTITION_LEADER_EPOCH_OFFSET = 12
LAST_OFFSET_DELTA_OFFSET = 23
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
RECORDS_COUNT_OFFSET = 57
# the smallest legacy message: offset, size, crc, magic, attributes, key len, value len
LEGACY_MIN_SIZE = 8 + 4 + 4 + 1 + 1 + 4 + 4

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

NO_PRODUCER_ID = -1
NO_TIMESTAMP = -1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_PREFIX = struct.Struct(">qib")  # base offset, length, (skip epoch) -- used via offsets below
_Q = struct.Struct(">q")
_I = struct.Struct(">i")
_L = struct.Struct(">I")


class BatchHeader:
    """The fixed fields of one RecordBatch v2 as read from bytes; `size` includes the log overhead."""

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
    )

    def __init__(self, fields: tuple[int, ...]) -> None:
        (
            self.base_offset,
            self.batch_length,
            self.partition_leader_epoch,
            self.magic,
            self.crc,
            self.attributes,
            self.last_offset_delta,
            self.base_timestamp,
            self.max_timestamp,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            self.records_count,
        ) = fields

    @property
    def size(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        return 1 if self.attributes & TIMESTAMP_TYPE_MASK else 0

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    def __repr__(self) -> str:
        return (
            f"BatchHeader(base_offset={self.base_offset}, size={self.size}, magic={self.magic}, "
            f"count={self.records_count}, last_offset_delta={self.last_offset_delta}, "
            f"max_timestamp={self.max_timestamp}, attributes={self.attributes:#x})"
        )


def read_magic(buf: Buffer, pos: int = 0) -> int:
    if pos + MAGIC_OFFSET >= len(buf):
        raise DecodeError("batch too short to hold a magic byte")
    m = buf[pos + MAGIC_OFFSET]
    return m - 256 if m > 127 else m


def parse_batch_header(buf: Buffer, pos: int = 0) -> BatchHeader:
    """Parse a v2 batch header at `pos`; checks that the whole batch lies inside `buf`."""
    if len(buf) - pos < HEADER_SIZE:
        raise DecodeError(f"record batch header needs {HEADER_SIZE} bytes, {len(buf) - pos} left")
    h = BatchHeader(_HEADER.unpack_from(buf, pos))
    if h.magic != 2:
        raise DecodeError(f"expected magic 2, got {h.magic}")
    if h.batch_length < HEADER_SIZE - LOG_OVERHEAD:
        raise DecodeError(f"batch length {h.batch_length} is shorter than a v2 header")
    if h.size > len(buf) - pos:
        raise DecodeError(f"batch of {h.size} bytes exceeds the {len(buf) - pos} bytes left")
    if h.last_offset_delta < 0 or h.records_count < 0:
        raise DecodeError("negative record count or offset delta")
    return h


def compute_crc(buf: Buffer, pos: int, size: int) -> int:
    mv = memoryview(buf)[pos + ATTRIBUTES_OFFSET : pos + size]
    return int(_crc32c.crc32c(mv))


def crc_valid(buf: Buffer, pos: int, header: BatchHeader) -> bool:
    return compute_crc(buf, pos, header.size) == header.crc


def batch_size_at(buf: Buffer, pos: int) -> int:
    """Total size (with log overhead) of the batch or legacy message at `pos`, from its length field."""
    if len(buf) - pos < LOG_OVERHEAD:
        raise DecodeError("truncated batch length")
    n = int(_I.unpack_from(buf, pos + 8)[0])
    if n < 0:
        raise DecodeError(f"negative batch length {n}")
    return n + LOG_OVERHEAD


def iter_batch_headers(
    buf: Buffer, *, verify_crc: bool = False
) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) for each v2 batch in a records blob; DecodeError on bad framing or CRC."""
    pos = 0
    end = len(buf)
    while pos < end:
        h = parse_batch_header(buf, pos)
        if verify_crc and compute_crc(buf, pos, h.size) != h.crc:
            raise DecodeError(f"CRC mismatch in batch at byte {pos} (base offset {h.base_offset})")
        yield pos, h
        pos += h.size


def set_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    _Q.pack_into(buf, pos, base_offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    """The leader epoch is outside the CRC-covered range, so patching it keeps the CRC valid."""
    _I.pack_into(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, epoch)


def set_max_timestamp_and_type(
    buf: bytearray | memoryview, pos: int, size: int, ts: int, log_append: bool
) -> None:
    """Rewrite max timestamp and the timestamp-type bit (LogAppendTime); recomputes the CRC."""
    attrs = struct.unpack_from(">h", buf, pos + ATTRIBUTES_OFFSET)[0]
    attrs = (attrs | TIMESTAMP_TYPE_MASK) if log_append else (attrs & ~TIMESTAMP_TYPE_MASK)
    struct.pack_into(">h", buf, pos + ATTRIBUTES_OFFSET, attrs)
    _Q.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, ts)
    if log_append:
        _Q.pack_into(buf, pos + BASE_TIMESTAMP_OFFSET, ts)
    _L.pack_into(buf, pos + CRC_OFFSET, compute_crc(buf, pos, size))


def read_header_fields(buf: Buffer, pos: int = 0) -> BatchHeader:
    """The header fields at `pos` without any check (for scans of already validated logs that read
    only the 61 header bytes of each batch); callers check magic and size themselves."""
    return BatchHeader(_HEADER.unpack_from(buf, pos))
