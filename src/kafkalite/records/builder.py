"""RecordBatch v2 building: record encoding with cached zig-zag varints, and the batch builder.

Re-exported by `kafkalite.records.batch`; the producer's hot path (one bytearray per batch, one CRC at the end).
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterable, Sequence

import crc32c as _crc32c

from kafkalite.protocol.exceptions import EncodeError
from kafkalite.records.compression import compress
from kafkalite.records.header import (
    COMPRESSION_MASK,
    CONTROL_MASK,
    DELETE_HORIZON_MASK,
    HEADER_SIZE,
    LOG_OVERHEAD,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    BatchHeader,
)

Buffer = bytes | bytearray | memoryview
Header = tuple[str, bytes | None]
RecordTuple = (
    tuple[bytes | None, bytes | None]
    | tuple[bytes | None, bytes | None, Sequence[Header], int | None]
)

CREATE_TIME = 0
LOG_APPEND_TIME = 1

_PREFIX = struct.Struct(">qiibI")  # base offset, batch length, leader epoch, magic, crc
_BODY = struct.Struct(">hiqqqhii")  # attributes .. records count (the CRC-covered header part)
_INT32_MAX = 0x7FFFFFFF


def _zz_encode(v: int) -> bytes:
    u = ((v << 1) ^ (v >> 63)) & 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while u > 0x7F:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


_ZZ_SMALL = 1 << 13
_ZZ_TABLE = [_zz_encode(v) for v in range(-_ZZ_SMALL, _ZZ_SMALL)]  # 1- and 2-byte encodings


def zigzag_bytes(v: int) -> bytes:
    """The zig-zag varint encoding of v (cached for small values)."""
    if -_ZZ_SMALL <= v < _ZZ_SMALL:
        return _ZZ_TABLE[v + _ZZ_SMALL]
    return _zz_encode(v)


_NULL = _ZZ_TABLE[_ZZ_SMALL - 1]  # -1
_NO_HEADERS = _ZZ_TABLE[_ZZ_SMALL]  # 0


def encode_record_body(
    timestamp_delta: int,
    offset_delta: int,
    key: Buffer | None,
    value: Buffer | None,
    headers: Iterable[Header] = (),
) -> bytearray:
    """One record without its length prefix."""
    zz = zigzag_bytes
    rec = bytearray(b"\x00")
    rec += zz(timestamp_delta)
    rec += zz(offset_delta)
    if key is None:
        rec += _NULL
    else:
        rec += zz(len(key))
        rec += key
    if value is None:
        rec += _NULL
    else:
        rec += zz(len(value))
        rec += value
    if not headers:
        rec += _NO_HEADERS
    else:
        hs = list(headers)
        rec += zz(len(hs))
        for pair in hs:
            # the same errors as the C accelerator's for a malformed header
            if not isinstance(pair, tuple | list):
                raise TypeError("a header is a (str, bytes | None) pair")
            if len(pair) != 2:
                raise ValueError("a header is a (str, bytes | None) pair")
            hk, hv = pair
            if not isinstance(hk, str):
                raise TypeError("a header key is a str")
            kb = hk.encode("utf-8")
            rec += zz(len(kb))
            rec += kb
            if hv is None:
                rec += _NULL
            else:
                rec += zz(len(hv))
                rec += hv
    return rec


_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1


def py_now_ms() -> int:
    """Wall-clock time in milliseconds, as record CreateTime (the C accelerator's twin)."""
    return time.time_ns() // 1000000


class PyRecordBuffer:
    """The records of one v2 batch, encoded as they arrive, after HEADER_SIZE reserved bytes for the
    batch header (the batch builder fills it in through `view()`).

    The pure-Python twin of `kafkalite.records._speedups.RecordBuffer`: same API, byte-identical
    output. `capacity` is a size hint (the C version preallocates it).
    """

    __slots__ = ("_buf", "_count", "_base_ts", "_max_ts", "_sealed")

    def __init__(self, capacity: int = 0) -> None:
        self._buf = bytearray(HEADER_SIZE)
        self._count = 0
        self._base_ts = -1
        self._max_ts = -1
        self._sealed = False

    @property
    def count(self) -> int:
        return self._count

    @property
    def size(self) -> int:
        """Bytes in use, the reserved header included."""
        return len(self._buf)

    @property
    def base_timestamp(self) -> int:
        return self._base_ts

    @property
    def max_timestamp(self) -> int:
        return self._max_ts

    @property
    def sealed(self) -> bool:
        return self._sealed

    def seal(self) -> None:
        """Take no more records: try_append() returns -1 and append() raises BufferError after it.
        (Unlike the C twin's, this try_append is not atomic: the producer appends under a lock.)"""
        self._sealed = True

    def append(
        self,
        key: Buffer | None,
        value: Buffer | None,
        timestamp: int,
        headers: Iterable[Header] | None = None,
    ) -> int:
        """Append one record; returns its offset delta."""
        if self._sealed:
            raise BufferError("cannot append to a sealed buffer")
        delta = self._try(key, value, timestamp, headers, -1)
        assert delta >= 0
        return delta

    def try_append(
        self, key: Buffer | None, value: Buffer | None, timestamp: int, limit: int
    ) -> int:
        """Append one record without headers if the buffer (header included) stays within `limit`
        bytes; returns its offset delta, or -1 (nothing written) when it would not fit or the
        buffer is sealed."""
        if self._sealed:
            return -1
        delta = self._count
        # inline fast path (the producer's common case): a later record, small fields, bytes values
        if delta and type(value) is bytes and key is None:
            td = timestamp - self._base_ts
            small = _ZZ_SMALL
            vl = len(value)
            if 0 <= td < small and delta < small and vl < small - 16:  # so n < small too
                table = _ZZ_TABLE
                tdz = table[td + small]
                dz = table[delta + small]
                vz = table[vl + small]
                n = 3 + len(tdz) + len(dz) + len(vz) + vl  # attributes, null key, header count
                buf = self._buf
                if len(buf) + n + (1 if n < 64 else 2) > limit:
                    return -1
                buf += b"".join((table[n + small], b"\x00", tdz, dz, _NULL, vz, value, _NO_HEADERS))
                if timestamp > self._max_ts:
                    self._max_ts = timestamp
                self._count = delta + 1
                return delta
        return self._try(key, value, timestamp, None, max(limit, 0))

    def _try(
        self,
        key: Buffer | None,
        value: Buffer | None,
        ts: int,
        headers: Iterable[Header] | None,
        limit: int,
    ) -> int:
        if not _INT64_MIN <= ts <= _INT64_MAX:
            raise OverflowError("timestamp does not fit an int64")
        delta = self._count
        td = ts - self._base_ts if delta else 0
        buf = self._buf
        small = _ZZ_SMALL
        kl = -1 if key is None else len(key)
        vl = -1 if value is None else len(value)
        if headers is None and 0 <= td < small and delta < small and kl < small and vl < small:
            table = _ZZ_TABLE
            head = b"\x00" + table[td + small] + table[delta + small] + table[kl + small]
            vz = table[vl + small]
            n = len(head) + max(kl, 0) + len(vz) + max(vl, 0) + 1
            total = n + (1 if n < 64 else 2 if n < small else len(_zz_encode(n)))
            if 0 <= limit < len(buf) + total:
                return -1
            buf += zigzag_bytes(n)
            buf += head
            if key:
                buf += key
            buf += vz
            if value:
                buf += value
            buf += b"\x00"
        else:
            if not _INT64_MIN <= td <= _INT64_MAX:
                raise OverflowError("timestamp delta does not fit an int64")
            rec = encode_record_body(td, delta, key, value, headers or ())
            n_b = zigzag_bytes(len(rec))
            if 0 <= limit < len(buf) + len(n_b) + len(rec):
                return -1
            buf += n_b
            buf += rec
        if not delta:
            self._base_ts = ts
        if ts > self._max_ts:
            self._max_ts = ts
        self._count = delta + 1
        return delta

    def view(self) -> memoryview:
        """A writable view of the whole buffer, header included (appends fail while it lives)."""
        return memoryview(self._buf)

    def getvalue(self) -> bytes:
        """A copy of the whole buffer, header included."""
        return bytes(self._buf)


class RecordBatchBuilder:
    """Accumulates records and writes one v2 batch; offsets are deltas from `base_offset`."""

    __slots__ = (
        "compression",
        "compression_level",
        "base_offset",
        "timestamp_type",
        "producer_id",
        "producer_epoch",
        "base_sequence",
        "is_transactional",
        "is_control",
        "partition_leader_epoch",
        "delete_horizon_ms",
        "_buf",
        "_count",
        "_next_delta",
        "_last_delta",
        "_base_ts",
        "_max_ts",
    )

    def __init__(
        self,
        compression: int = 0,
        base_offset: int = 0,
        timestamp_type: int = CREATE_TIME,
        producer_id: int = -1,
        producer_epoch: int = -1,
        base_sequence: int = -1,
        is_transactional: bool = False,
        is_control: bool = False,
        partition_leader_epoch: int = -1,
        *,
        delete_horizon_ms: int | None = None,
        compression_level: int | None = None,
    ) -> None:
        if not 0 <= compression <= 4:
            raise EncodeError(f"unknown compression codec {compression}")
        if timestamp_type not in (CREATE_TIME, LOG_APPEND_TIME):
            raise EncodeError(f"a v2 batch's timestamp type is 0 or 1, not {timestamp_type}")
        self.compression = compression
        self.compression_level = compression_level
        self.base_offset = base_offset
        self.timestamp_type = timestamp_type
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.is_transactional = is_transactional
        self.is_control = is_control
        self.partition_leader_epoch = partition_leader_epoch
        self.delete_horizon_ms = delete_horizon_ms
        self._buf = bytearray()
        self._count = 0
        self._next_delta = 0
        self._last_delta = -1
        self._base_ts = delete_horizon_ms
        self._max_ts = NO_TIMESTAMP

    @classmethod
    def like(cls, h: BatchHeader, *, compression: int | None = None) -> RecordBatchBuilder:
        """A builder for a data batch with `h`'s base offset, timestamp type, producer fields and
        leader epoch (and its codec unless `compression` is given): for rewriting a stored batch."""
        return cls(
            compression=h.compression if compression is None else compression,
            base_offset=h.base_offset,
            timestamp_type=h.timestamp_type,
            producer_id=h.producer_id,
            producer_epoch=h.producer_epoch,
            base_sequence=h.base_sequence,
            is_transactional=h.is_transactional,
            partition_leader_epoch=h.partition_leader_epoch,
        )

    def __len__(self) -> int:
        return self._count

    @property
    def estimated_size(self) -> int:
        """Size of the batch if built now, uncompressed (an upper estimate for compressed batches)."""
        return HEADER_SIZE + len(self._buf)

    def append(
        self,
        key: Buffer | None,
        value: Buffer | None,
        headers: Iterable[Header] = (),
        timestamp: int | None = None,
    ) -> int:
        """Append a record at the next offset; returns its offset delta."""
        delta = self._next_delta
        if timestamp is None:
            timestamp = int(time.time() * 1000)
        base = self._base_ts
        if base is None:
            base = self._base_ts = timestamp
        if headers or key is None or value is None:
            return self._append(delta, key, value, headers, timestamp)
        # fast path: no headers, every varint from the table (1 or 2 bytes)
        small = _ZZ_SMALL
        td = timestamp - base + small
        kl = len(key)
        vl = len(value)
        if not (0 <= td < 2 * small and delta < small and kl < small and vl < small):
            return self._append(delta, key, value, headers, timestamp)
        table = _ZZ_TABLE
        head = b"\x00" + table[td] + table[delta + small] + table[kl + small]
        vle = table[vl + small]
        n = len(head) + kl + len(vle) + vl + 1
        buf = self._buf
        buf += zigzag_bytes(n) + head
        buf += key
        buf += vle
        buf += value
        buf += b"\x00"
        if timestamp > self._max_ts:
            self._max_ts = timestamp
        self._count += 1
        self._last_delta = delta
        self._next_delta = delta + 1
        return delta

    def append_with_offset(
        self,
        offset: int,
        key: Buffer | None,
        value: Buffer | None,
        headers: Iterable[Header] = (),
        timestamp: int | None = None,
    ) -> int:
        """Append a record at an absolute offset (increasing; gaps allowed, as after compaction)."""
        delta = offset - self.base_offset
        if delta < self._next_delta:
            raise EncodeError(f"offset {offset} is not after the last appended offset")
        return self._append(delta, key, value, headers, timestamp)

    def _append(
        self,
        delta: int,
        key: Buffer | None,
        value: Buffer | None,
        headers: Iterable[Header],
        timestamp: int | None,
    ) -> int:
        if delta > _INT32_MAX:
            raise EncodeError("offset delta does not fit an int32")
        if timestamp is None:
            timestamp = int(time.time() * 1000)
        base = self._base_ts
        if base is None:
            base = self._base_ts = timestamp
        rec = encode_record_body(timestamp - base, delta, key, value, headers)
        buf = self._buf
        buf += zigzag_bytes(len(rec))
        buf += rec
        if timestamp > self._max_ts:
            self._max_ts = timestamp
        self._count += 1
        self._last_delta = delta
        self._next_delta = delta + 1
        return delta

    @property
    def attributes(self) -> int:
        attrs = self.compression
        if self.timestamp_type == LOG_APPEND_TIME:
            attrs |= TIMESTAMP_TYPE_MASK
        if self.is_transactional:
            attrs |= TRANSACTIONAL_MASK
        if self.is_control:
            attrs |= CONTROL_MASK
        if self.delete_horizon_ms is not None:
            attrs |= DELETE_HORIZON_MASK
        return attrs

    def build(self, *, last_offset_delta: int | None = None) -> bytes:
        """The finished batch. `last_offset_delta` overrides the last appended delta (for a batch
        whose tail records were removed by compaction, Kafka keeps the original last offset)."""
        if last_offset_delta is None:
            last_offset_delta = max(self._last_delta, 0)
        elif last_offset_delta < self._last_delta:
            raise EncodeError("last_offset_delta is before the last appended record")
        records: Buffer = self._buf
        if self.compression and self._count:
            records = compress(self.compression, records, level=self.compression_level)
        base_ts = NO_TIMESTAMP if self._base_ts is None else self._base_ts
        out = bytearray(HEADER_SIZE)
        out += records
        attributes = self.attributes
        if not self._count:
            attributes &= ~COMPRESSION_MASK  # an empty batch has nothing to compress
        try:
            _BODY.pack_into(
                out,
                21,
                attributes,
                last_offset_delta,
                base_ts,
                self._max_ts,
                self.producer_id,
                self.producer_epoch,
                self.base_sequence,
                self._count,
            )
            crc = _crc32c.crc32c(memoryview(out)[21:])
            _PREFIX.pack_into(
                out,
                0,
                self.base_offset,
                len(out) - LOG_OVERHEAD,
                self.partition_leader_epoch,
                2,
                crc,
            )
        except struct.error as exc:
            raise EncodeError(f"a batch header field is out of range: {exc}") from exc
        return bytes(out)


def build_empty_batch(like: BatchHeader) -> bytes:
    """A v2 batch with no records that keeps `like`'s offset range, timestamp and producer fields:
    what compaction leaves of an idempotent producer's last batch once every record is gone."""
    builder = RecordBatchBuilder.like(like, compression=0)
    builder._base_ts = builder._max_ts = like.max_timestamp
    return builder.build(last_offset_delta=like.last_offset_delta)


def build_batch(records: Iterable[RecordTuple], **kwargs: object) -> bytes:
    """One v2 batch from (key, value) or (key, value, headers, timestamp) tuples; kwargs as the builder."""
    builder = RecordBatchBuilder(**kwargs)  # type: ignore[arg-type]
    for rec in records:
        if len(rec) == 2:
            builder.append(rec[0], rec[1])
        else:
            builder.append(rec[0], rec[1], rec[2], rec[3])
    return builder.build()
