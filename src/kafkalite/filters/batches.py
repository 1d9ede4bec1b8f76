"""Filtering a fetched records blob batch by batch: whole batches judged from their header, the rest decoded
and rewritten as valid RecordBatch v2 (offsets, producer fields and flags kept, CRC-32C recomputed).

Also the client's local fallback over decoded records, so both sides select exactly the same records.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence

import crc32c as _crc32c

from kafkalite.filters.compiler import ALL, NONE, CompiledFilter, Predicate
from kafkalite.protocol.exceptions import DecodeError
from kafkalite.records.batch import Record, _decode_headers, _uvarint_slow, decode_records
from kafkalite.records.compression import compress, decompress
from kafkalite.records.control import ControlRecordType, control_type_of
from kafkalite.records.header import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    CONTROL_MASK,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    BatchHeader,
    parse_batch_header,
)

_I = struct.Struct(">i")
_H = struct.Struct(">h")
_BATCH_LENGTH_OFFSET = 8
_RECORDS_COUNT_OFFSET = 57


class NotFilterable(Exception):
    """The blob holds something the broker does not rewrite (a legacy v0/v1 message set): it is sent
    as it is and the answer does not claim it filtered, so the client filters locally."""


class FilterStats:
    """What one filtering pass did (for the broker's counters and the bench)."""

    __slots__ = ("batches_decoded", "batches_kept", "batches_dropped", "records_in", "records_out")

    def __init__(self) -> None:
        self.batches_kept = (
            0  # sent unchanged (judged ALL from the header, or every record matched)
        )
        self.batches_dropped = 0
        self.batches_decoded = 0
        self.records_in = 0
        self.records_out = 0


def _zz(buf: bytes, pos: int) -> tuple[int, int]:
    """A zig-zag varint (the 1-byte case is inlined by the caller)."""
    v, pos = _uvarint_slow(buf, pos)
    return (v >> 1) ^ -(v & 1), pos


def select_spans(
    data: bytes,
    start: int,
    end: int,
    count: int,
    base_offset: int,
    base_timestamp: int,
    fixed_timestamp: int | None,
    match: Predicate,
) -> list[tuple[int, int]]:
    """(start, end) of the bytes of each record `match` selects, read in one pass without building
    record objects or slicing values (headers are decoded only for records that have some)."""
    spans: list[tuple[int, int]] = []
    pos = start
    no_headers: list[tuple[str, bytes | None]] = []
    try:
        for _ in range(count):
            rec_start = pos
            b = data[pos]
            if b < 0x80:
                pos += 1
            else:
                c = data[pos + 1]
                if c < 0x80:
                    b = (b & 0x7F) | (c << 7)
                    pos += 2
                else:
                    b, pos = _uvarint_slow(data, pos)
            length = (b >> 1) ^ -(b & 1)
            rec_end = pos + length
            if length < 0 or rec_end > end:
                raise DecodeError("record length exceeds the batch")
            pos += 1  # attributes
            b = data[pos]
            if b < 0x80:
                pos += 1
            else:
                c = data[pos + 1]
                if c < 0x80:
                    b = (b & 0x7F) | (c << 7)
                    pos += 2
                else:
                    b, pos = _uvarint_slow(data, pos)
            ts = (b >> 1) ^ -(b & 1)
            b = data[pos]
            if b < 0x80:
                pos += 1
            else:
                c = data[pos + 1]
                if c < 0x80:
                    b = (b & 0x7F) | (c << 7)
                    pos += 2
                else:
                    b, pos = _uvarint_slow(data, pos)
            od = (b >> 1) ^ -(b & 1)
            b = data[pos]
            if b < 0x80:
                kl, pos = (b >> 1) ^ -(b & 1), pos + 1
            else:
                kl, pos = _zz(data, pos)
            if kl >= 0:
                key: bytes | None = data[pos : pos + kl]
                pos += kl
            else:
                key = None
            b = data[pos]
            if b < 0x80:
                vl, pos = (b >> 1) ^ -(b & 1), pos + 1
            else:
                vl, pos = _zz(data, pos)
            if vl > 0:
                pos += vl
            if data[pos] == 0:
                headers = no_headers
            else:
                headers, _ = _decode_headers(data, pos, rec_end)
            timestamp = fixed_timestamp if fixed_timestamp is not None else base_timestamp + ts
            if match(base_offset + od, timestamp, key, headers):
                spans.append((rec_start, rec_end))
            pos = rec_end
    except IndexError:
        raise DecodeError("truncated record") from None
    if pos != end:
        raise DecodeError(f"{end - pos} bytes left after the {count} declared records")
    return spans


def rewrite_header(
    blob: bytes | memoryview, pos: int, body: bytes, count: int, codec: int
) -> bytes:
    """The batch at `pos` with a new records section: base offset, last offset delta, timestamps,
    producer id / epoch / sequence, leader epoch and flags kept; length, codec, count and CRC new."""
    out = bytearray(blob[pos : pos + HEADER_SIZE])
    out += body
    _I.pack_into(out, _BATCH_LENGTH_OFFSET, len(out) - LOG_OVERHEAD)
    attrs = _H.unpack_from(out, ATTRIBUTES_OFFSET)[0]
    _H.pack_into(out, ATTRIBUTES_OFFSET, (attrs & ~COMPRESSION_MASK) | codec)
    _I.pack_into(out, _RECORDS_COUNT_OFFSET, count)
    struct.pack_into(">I", out, 17, _crc32c.crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return bytes(out)


def _is_abort_marker(blob: bytes, h: BatchHeader, pos: int) -> bool:
    try:
        data = blob[pos + HEADER_SIZE : pos + h.size]
        if h.compression:
            data = decompress(h.compression, data)
        recs = decode_records(data, 0, len(data), h.records_count, h.base_offset, 0)
        return bool(recs) and control_type_of(recs[0]) == ControlRecordType.ABORT
    except Exception:
        return False


def filter_records(
    blob: bytes,
    flt: CompiledFilter,
    aborted: Sequence[tuple[int, int]] | None = None,
    stats: FilterStats | None = None,
) -> bytes:
    """The batches of a fetched blob with only the records `flt` selects.

    `aborted` (read_committed): (producer id, first offset) of aborted transactions in the range; their
    data batches go first, as the consumer would drop them, and the filter runs on what is left.
    Control batches are kept as they are. A batch with nothing left is dropped, except the last one,
    kept as an empty batch so the consumer's next fetch offset moves past the range (as after
    compaction). An incomplete batch at the end (a fetch cut by its byte limit) is kept unchanged.
    Raises NotFilterable for legacy message sets, DecodeError for malformed batches.
    """
    st = stats if stats is not None else FilterStats()
    out: list[bytes] = []
    match = flt.match
    mv = memoryview(blob)
    pending = sorted(((f, p) for p, f in aborted or ()), reverse=True)
    aborted_pids: set[int] = set()
    pos = 0
    end = len(blob)
    last_dropped: tuple[int, BatchHeader] | None = None
    while pos < end:
        if end - pos < HEADER_SIZE:
            out.append(blob[pos:])
            last_dropped = None
            break
        if blob[pos + MAGIC_OFFSET] != 2:
            raise NotFilterable("a legacy (magic 0/1) message set is not filtered on the broker")
        size = _I.unpack_from(blob, pos + _BATCH_LENGTH_OFFSET)[0] + LOG_OVERHEAD
        if size > end - pos:
            out.append(blob[pos:])  # the truncated tail, as the unfiltered answer would end
            last_dropped = None
            break
        h = parse_batch_header(blob, pos)
        while pending and pending[-1][0] <= h.last_offset:
            aborted_pids.add(pending.pop()[1])
        attrs = h.attributes
        if attrs & CONTROL_MASK:
            if h.producer_id in aborted_pids and _is_abort_marker(blob, h, pos):
                aborted_pids.discard(h.producer_id)
            out.append(blob[pos : pos + size])
            last_dropped = None
            pos += size
            continue
        st.records_in += h.records_count
        verdict = (
            NONE
            if attrs & TRANSACTIONAL_MASK and h.producer_id in aborted_pids
            else flt.judge_batch(
                h.base_offset,
                h.last_offset_delta,
                h.max_timestamp,
                bool(attrs & TIMESTAMP_TYPE_MASK),
            )
        )
        if verdict == ALL:
            out.append(blob[pos : pos + size])
            st.batches_kept += 1
            st.records_out += h.records_count
            last_dropped = None
        elif verdict == NONE or h.records_count == 0:
            st.batches_dropped += 1
            last_dropped = (pos, h)
        else:
            st.batches_decoded += 1
            codec = attrs & COMPRESSION_MASK
            data: bytes
            if codec:
                data = decompress(codec, mv[pos + HEADER_SIZE : pos + size])
                start, stop = 0, len(data)
            else:
                data, start, stop = blob, pos + HEADER_SIZE, pos + size
            fixed = h.max_timestamp if attrs & TIMESTAMP_TYPE_MASK else None
            keep = select_spans(
                data, start, stop, h.records_count, h.base_offset, h.base_timestamp, fixed, match
            )
            if len(keep) == h.records_count:
                out.append(blob[pos : pos + size])
                st.batches_kept += 1
                last_dropped = None
            elif not keep:
                st.batches_dropped += 1
                last_dropped = (pos, h)
            else:
                body = b"".join([data[a:b] for a, b in keep])
                if codec:
                    body = compress(codec, body)
                out.append(rewrite_header(blob, pos, body, len(keep), codec))
                last_dropped = None
            st.records_out += len(keep)
        pos += size
    if last_dropped is not None:
        # the consumer must still move past the dropped tail: an empty batch keeps its offsets
        out.append(rewrite_header(blob, last_dropped[0], b"", 0, 0))
    return b"".join(out)


def select_records(flt: CompiledFilter, records: Iterable[Record]) -> list[Record]:
    """The client's local fallback: the records `flt` selects, in order."""
    match = flt.match
    return [r for r in records if match(r.offset, r.timestamp, r.key, r.headers)]
