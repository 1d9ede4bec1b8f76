"""Legacy message sets (magic 0 and 1): reader, builder, and conversion to and from RecordBatch v2.

Old producers' message sets are up-converted on produce; Fetch v0-3 answers are down-converted.
"""

from __future__ import annotations

import itertools
import struct
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

from kafkalite.protocol.exceptions import DecodeError, EncodeError
from kafkalite.records.batch import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    NO_TIMESTAMP_TYPE,
    Record,
    RecordBatch,
    RecordBatchBuilder,
    iter_batches,
)
from kafkalite.records.builder import Buffer
from kafkalite.records.compression import (
    DEFAULT_MAX_DECOMPRESSED_SIZE,
    Compression,
    UnsupportedCompressionError,
    compress,
    decompress,
)
from kafkalite.records.header import LOG_OVERHEAD, NO_TIMESTAMP

CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
# crc, magic, attributes, key length, value length (+ timestamp for magic 1)
MESSAGE_OVERHEAD_V0 = 4 + 1 + 1 + 4 + 4
MESSAGE_OVERHEAD_V1 = MESSAGE_OVERHEAD_V0 + 8

_PREFIX = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_OFFSET_SIZE_CRC = struct.Struct(">qiI")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


@dataclass(slots=True)
class LegacyMessage:
    """One message of a magic 0/1 message set; `size` includes the 12-byte log overhead."""

    offset: int
    magic: int
    attributes: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    crc: int
    size: int

    @property
    def compression(self) -> int:
        return self.attributes & CODEC_MASK

    @property
    def timestamp_type(self) -> int:
        if self.magic == 0:
            return NO_TIMESTAMP_TYPE
        return LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME


def read_message(buf: Buffer, pos: int = 0, *, verify_crc: bool = True) -> LegacyMessage:
    """The message at `pos` (not looking inside compressed wrappers)."""
    left = len(buf) - pos
    if left < LOG_OVERHEAD + MESSAGE_OVERHEAD_V0:
        raise DecodeError(f"{left} bytes are too few for a legacy message")
    offset, size, crc, magic, attributes = _PREFIX.unpack_from(buf, pos)
    if magic not in (0, 1):
        raise DecodeError(f"legacy message with magic {magic}")
    overhead = MESSAGE_OVERHEAD_V1 if magic else MESSAGE_OVERHEAD_V0
    if size < overhead:
        raise DecodeError(f"legacy message size {size} is below the {overhead}-byte minimum")
    end = pos + LOG_OVERHEAD + size
    if end > len(buf):
        raise DecodeError(f"legacy message of {size} bytes exceeds the {left - LOG_OVERHEAD} left")
    if verify_crc:
        actual = zlib.crc32(memoryview(buf)[pos + 16 : end])
        if actual != crc:
            raise DecodeError(f"CRC32 mismatch in legacy message at offset {offset}")
    p = pos + 18
    if magic:
        timestamp = _I64.unpack_from(buf, p)[0]
        p += 8
    else:
        timestamp = NO_TIMESTAMP
    key, p = _read_bytes(buf, p, end)
    value, p = _read_bytes(buf, p, end)
    if p != end:
        raise DecodeError(f"legacy message has {end - p} bytes after its value")
    return LegacyMessage(offset, magic, attributes & 0xFF, timestamp, key, value, crc, size + 12)


def _read_bytes(buf: Buffer, pos: int, end: int) -> tuple[bytes | None, int]:
    if end - pos < 4:
        raise DecodeError("truncated legacy key/value length")
    n = _I32.unpack_from(buf, pos)[0]
    pos += 4
    if n < 0:
        if n != -1:
            raise DecodeError(f"invalid legacy key/value length {n}")
        return None, pos
    if n > end - pos:
        raise DecodeError(f"legacy key/value length {n} exceeds the message")
    return bytes(buf[pos : pos + n]), pos + n


def iter_messages(blob: Buffer, *, verify_crc: bool = True) -> Iterator[LegacyMessage]:
    """The outer (shallow) messages of a message set."""
    pos = 0
    end = len(blob)
    while pos < end:
        msg = read_message(blob, pos, verify_crc=verify_crc)
        yield msg
        pos += msg.size


def inner_messages(
    wrapper: LegacyMessage,
    *,
    verify_crc: bool = True,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> list[LegacyMessage]:
    """The messages a message stands for: itself, or a compressed wrapper's inner messages with
    absolute offsets and (magic 1, LogAppendTime) the wrapper's timestamp."""
    codec = wrapper.compression
    if not codec:
        return [wrapper]
    if codec not in (Compression.GZIP, Compression.SNAPPY, Compression.LZ4):
        raise UnsupportedCompressionError(
            f"codec {codec} cannot appear in a magic {wrapper.magic} message"
        )
    if wrapper.value is None:
        raise DecodeError("compressed legacy message without a value")
    data = decompress(
        codec, wrapper.value, max_size=max_decompressed_size, legacy_lz4=wrapper.magic == 0
    )
    inner = list(iter_messages(data, verify_crc=verify_crc))
    if not inner:
        raise DecodeError("compressed legacy message with no inner messages")
    for m in inner:
        if m.magic != wrapper.magic:
            raise DecodeError(f"inner magic {m.magic} differs from the wrapper's {wrapper.magic}")
        if m.compression:
            raise DecodeError("nested compression in a legacy message set")
    if wrapper.magic == 1:
        # inner offsets are relative; the wrapper holds the absolute offset of the last one. A
        # producer's wrapper offset (often 0) gives a negative base: then the offsets stay relative.
        shift = wrapper.offset - inner[-1].offset
        log_append = bool(wrapper.attributes & TIMESTAMP_TYPE_MASK)
        for m in inner:
            if shift >= 0:
                m.offset += shift
            if log_append:
                m.timestamp = wrapper.timestamp
                m.attributes |= TIMESTAMP_TYPE_MASK
    return inner


def legacy_entry_to_batches(
    blob: Buffer,
    pos: int,
    *,
    verify_crc: bool = False,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> list[RecordBatch]:
    """The legacy message at `pos` as one RecordBatch object (magic and crc stay the source's)."""
    msg = read_message(blob, pos, verify_crc=verify_crc)
    inner = inner_messages(msg, verify_crc=verify_crc, max_decompressed_size=max_decompressed_size)
    records = [Record(m.offset, m.timestamp, m.key, m.value, []) for m in inner]
    first = records[0].offset
    max_ts = max(r.timestamp for r in records)
    attributes = msg.compression
    ts_type = msg.timestamp_type
    if ts_type == LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    batch = RecordBatch(
        first,
        msg.size - LOG_OVERHEAD,
        -1,
        msg.magic,
        msg.crc,
        attributes,
        records[-1].offset - first,
        records[0].timestamp,
        max_ts,
        -1,
        -1,
        -1,
        len(records),
        records,
        ts_type,
    )
    return [batch]


# -- building -----------------------------------------------------------------------------------------


def encode_message(
    offset: int,
    magic: int,
    attributes: int,
    timestamp: int,
    key: Buffer | None,
    value: Buffer | None,
) -> bytes:
    """One legacy message with its log overhead and CRC32."""
    if magic not in (0, 1):
        raise EncodeError(f"legacy magic is 0 or 1, not {magic}")
    body = bytearray((magic, attributes & 0xFF))
    try:
        if magic:
            body += _I64.pack(timestamp)
        for part in (key, value):
            if part is None:
                body += b"\xff\xff\xff\xff"
            else:
                body += _I32.pack(len(part))
                body += part
        return _OFFSET_SIZE_CRC.pack(offset, len(body) + 4, zlib.crc32(body)) + bytes(body)
    except struct.error as exc:
        raise EncodeError(f"legacy message field out of range: {exc}") from exc


class LegacyMessageSetBuilder:
    """Builds a magic 0/1 message set; with a codec, one wrapper message holding the inner set."""

    def __init__(
        self,
        magic: int,
        compression: int = 0,
        base_offset: int = 0,
        timestamp_type: int = CREATE_TIME,
    ) -> None:
        if magic not in (0, 1):
            raise EncodeError(f"legacy magic is 0 or 1, not {magic}")
        if compression not in (0, 1, 2, 3):
            raise UnsupportedCompressionError(f"codec {compression} cannot appear in magic {magic}")
        self.magic = magic
        self.compression = compression
        self.base_offset = base_offset
        self.timestamp_type = timestamp_type if magic else CREATE_TIME
        self._records: list[tuple[int, int, Buffer | None, Buffer | None]] = []

    def __len__(self) -> int:
        return len(self._records)

    def append(
        self,
        key: Buffer | None,
        value: Buffer | None,
        timestamp: int | None = None,
        offset: int | None = None,
    ) -> int:
        """Append a message; returns its offset (default: the next after the last)."""
        if offset is None:
            offset = self._records[-1][0] + 1 if self._records else self.base_offset
        elif self._records and offset <= self._records[-1][0]:
            raise EncodeError("legacy offsets must increase")
        if self.magic == 0:
            timestamp = NO_TIMESTAMP
        elif timestamp is None:
            timestamp = int(time.time() * 1000)
        self._records.append((offset, timestamp, key, value))
        return offset

    def build(self) -> bytes:
        magic = self.magic
        ts_bit = TIMESTAMP_TYPE_MASK if self.timestamp_type == LOG_APPEND_TIME else 0
        if not self.compression:
            return b"".join(
                encode_message(off, magic, ts_bit, ts, k, v) for off, ts, k, v in self._records
            )
        if not self._records:
            return b""
        first = self._records[0][0]
        last = self._records[-1][0]
        inner = b"".join(
            encode_message(off - first if magic else off, magic, 0, ts, k, v)
            for off, ts, k, v in self._records
        )
        payload = compress(self.compression, inner, legacy_lz4=magic == 0)
        max_ts = max(r[1] for r in self._records)
        return encode_message(last, magic, self.compression | ts_bit, max_ts, None, payload)


# -- conversion ----------------------------------------------------------------------------------


def upconvert_to_v2(
    blob: Buffer,
    *,
    compression: int | None = None,
    verify_crc: bool = True,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> bytes:
    """A legacy message set as v2 batches: one per compressed wrapper, one per run of uncompressed
    messages of the same magic and timestamp type. Keys, values and timestamps (-1 for magic 0) are
    kept; offsets are kept when they increase, else renumbered from the first (a producer's offsets
    mean nothing). `compression` None keeps each wrapper's codec."""
    try:
        return _upconvert(blob, compression, verify_crc, max_decompressed_size)
    except EncodeError as exc:  # values no v2 batch can hold
        raise DecodeError(f"cannot up-convert: {exc}") from exc


def _upconvert(
    blob: Buffer, compression: int | None, verify_crc: bool, max_decompressed_size: int
) -> bytes:
    out: list[bytes] = []
    run: list[LegacyMessage] = []
    run_kind: tuple[int, int] | None = None

    def flush_run() -> None:
        if run:
            out.append(_messages_to_v2(run, compression or 0, run[0].timestamp_type))
            run.clear()

    for msg in iter_messages(blob, verify_crc=verify_crc):
        if msg.compression:
            flush_run()
            inner = inner_messages(
                msg, verify_crc=verify_crc, max_decompressed_size=max_decompressed_size
            )
            codec = msg.compression if compression is None else compression
            out.append(_messages_to_v2(inner, codec, msg.timestamp_type))
            run_kind = None
        else:
            kind = (msg.magic, msg.timestamp_type)
            if kind != run_kind:
                flush_run()
                run_kind = kind
            run.append(msg)
    flush_run()
    return b"".join(out)


def _messages_to_v2(msgs: list[LegacyMessage], codec: int, ts_type: int) -> bytes:
    base = msgs[0].offset
    increasing = all(b.offset > a.offset for a, b in itertools.pairwise(msgs))
    if not increasing or msgs[-1].offset - base > 0x7FFFFFFF or base < 0:
        base = max(base, 0)
        offsets = list(range(base, base + len(msgs)))
    else:
        offsets = [m.offset for m in msgs]
    builder = RecordBatchBuilder(
        compression=codec,
        base_offset=base,
        timestamp_type=LOG_APPEND_TIME if ts_type == LOG_APPEND_TIME else CREATE_TIME,
    )
    for off, m in zip(offsets, msgs):
        builder.append_with_offset(off, m.key, m.value, (), m.timestamp)
    return builder.build()


def downconvert(
    blob_v2: Buffer,
    magic: int,
    *,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> bytes:
    """v2 batches as a magic 0/1 message set for Fetch v0-3: headers are dropped, control batches and
    empty batches skipped, compressed batches become one wrapper each (zstd cannot be expressed:
    UnsupportedCompressionError, which Kafka answers with UNSUPPORTED_COMPRESSION_TYPE)."""
    if magic not in (0, 1):
        raise EncodeError(f"down-conversion targets magic 0 or 1, not {magic}")
    try:
        return _downconvert(blob_v2, magic, max_decompressed_size)
    except EncodeError as exc:  # offsets or timestamps beyond what a legacy message holds
        raise DecodeError(f"cannot down-convert: {exc}") from exc


def _downconvert(blob_v2: Buffer, magic: int, max_decompressed_size: int) -> bytes:
    out: list[bytes] = []
    for batch in iter_batches(blob_v2, max_decompressed_size=max_decompressed_size):
        if batch.is_control or not batch.records:
            continue
        codec = batch.compression
        if codec == Compression.ZSTD:
            raise UnsupportedCompressionError("zstd batches cannot be down-converted to magic < 2")
        log_append = magic == 1 and batch.timestamp_type == LOG_APPEND_TIME
        ts_bit = TIMESTAMP_TYPE_MASK if log_append else 0
        records = batch.records
        if not codec:
            for r in records:
                ts = r.timestamp if magic else NO_TIMESTAMP
                out.append(encode_message(r.offset, magic, ts_bit, ts, r.key, r.value))
            continue
        first = records[0].offset
        inner = b"".join(
            encode_message(
                r.offset - first if magic else r.offset,
                magic,
                0,
                r.timestamp if magic else NO_TIMESTAMP,
                r.key,
                r.value,
            )
            for r in records
        )
        payload = compress(codec, inner, legacy_lz4=magic == 0)
        if magic:
            wrapper_ts = batch.max_timestamp if log_append else max(r.timestamp for r in records)
        else:
            wrapper_ts = NO_TIMESTAMP
        out.append(
            encode_message(records[-1].offset, magic, codec | ts_bit, wrapper_ts, None, payload)
        )
    return b"".join(out)
