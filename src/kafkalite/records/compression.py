"""Compression codecs of Kafka record batches: none, gzip, snappy (raw and xerial), lz4 frame, zstd frame.

Owns the exact wire framings Kafka clients use and bounded decompression (a zip bomb raises, it never allocates).
"""

from __future__ import annotations

import struct
import zlib
from enum import IntEnum
from typing import Literal

import cramjam

from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.exceptions import DecodeError, EncodeError

Buffer = bytes | bytearray | memoryview

DEFAULT_MAX_DECOMPRESSED_SIZE = 64 * 1024 * 1024
"""Default cap on the bytes one compressed payload may expand to (configurable per call)."""


class Compression(IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @classmethod
    def from_name(cls, name: str) -> Compression:
        """Kafka's `compression.type` names: none, gzip, snappy, lz4, zstd."""
        try:
            return cls[name.strip().upper()]
        except KeyError:
            raise ValueError(f"unknown compression type {name!r}") from None


class CompressionError(DecodeError):
    """A compressed payload that cannot be decompressed (corrupt, truncated, unknown codec)."""

    error_code: ErrorCode = ErrorCode.CORRUPT_MESSAGE


class UnsupportedCompressionError(CompressionError):
    """A codec id this format cannot carry (5-7, or zstd inside a legacy message set)."""

    error_code = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


class DecompressionLimitExceeded(CompressionError):
    """The payload would expand beyond the configured limit (a decompression bomb, or a limit set too low)."""

    error_code = ErrorCode.RECORD_LIST_TOO_LARGE

    def __init__(self, codec: int, limit: int) -> None:
        super().__init__(
            f"{_name(codec)} payload expands beyond the {limit}-byte decompression limit"
        )
        self.codec = codec
        self.limit = limit


def _name(codec: int) -> str:
    try:
        return Compression(codec).name.lower()
    except ValueError:
        return f"codec {codec}"


# -- xxHash32 (the LZ4 frame header checksum) ----------------------------------------

_P1 = 2654435761
_P2 = 2246822519
_P3 = 3266489917
_P4 = 668265263
_P5 = 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data: Buffer, seed: int = 0) -> int:
    """xxHash32 in pure Python; used only on the few bytes of an LZ4 frame descriptor."""
    data = bytes(data)
    n = len(data)
    i = 0
    if n >= 16:
        v1 = (seed + _P1 + _P2) & _M32
        v2 = (seed + _P2) & _M32
        v3 = seed & _M32
        v4 = (seed - _P1) & _M32
        limit = n - 16
        while i <= limit:
            a, b, c, d = struct.unpack_from("<IIII", data, i)
            v1 = (_rotl((v1 + a * _P2) & _M32, 13) * _P1) & _M32
            v2 = (_rotl((v2 + b * _P2) & _M32, 13) * _P1) & _M32
            v3 = (_rotl((v3 + c * _P2) & _M32, 13) * _P1) & _M32
            v4 = (_rotl((v4 + d * _P2) & _M32, 13) * _P1) & _M32
            i += 16
        h = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while i + 4 <= n:
        h = (h + struct.unpack_from("<I", data, i)[0] * _P3) & _M32
        h = (_rotl(h, 17) * _P4) & _M32
        i += 4
    while i < n:
        h = (h + data[i] * _P5) & _M32
        h = (_rotl(h, 11) * _P1) & _M32
        i += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h


# -- gzip ----------------------------------------------------------------------------------


def _gzip_compress(data: Buffer, level: int | None) -> bytes:
    c = zlib.compressobj(6 if level is None else level, zlib.DEFLATED, 31)
    return c.compress(data) + c.flush()


def _gzip_decompress(data: Buffer, limit: int) -> bytes:
    parts: list[bytes] = []
    total = 0
    rest: Buffer = data
    try:
        while True:
            d = zlib.decompressobj(31)
            out = d.decompress(rest, limit - total + 1)
            total += len(out)
            if total > limit or d.unconsumed_tail:
                raise DecompressionLimitExceeded(Compression.GZIP, limit)
            parts.append(out)
            if not d.eof:
                raise CompressionError("truncated gzip stream")
            rest = d.unused_data
            # concatenated members are legal gzip; trailing zero padding is tolerated
            if not rest or not rest.strip(b"\x00"):
                break
    except zlib.error as exc:
        raise CompressionError(f"corrupt gzip payload: {exc}") from exc
    return parts[0] if len(parts) == 1 else b"".join(parts)


# -- snappy: raw blocks (librdkafka) and the xerial block stream (Java clients) -----------------

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
XERIAL_BLOCK_SIZE = 32 * 1024
_BE_I32 = struct.Struct(">i")


def _snappy_compress(data: Buffer) -> bytes:
    """Xerial framing, as Java's SnappyOutputStream writes it (every Kafka client reads it)."""
    mv = memoryview(data)
    parts = [_XERIAL_HEADER]
    compress_raw = cramjam.snappy.compress_raw
    # at least one block: some readers take a bare 16-byte header for a raw block
    for i in range(0, max(len(mv), 1), XERIAL_BLOCK_SIZE):
        block = bytes(compress_raw(mv[i : i + XERIAL_BLOCK_SIZE]))
        parts.append(_BE_I32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_raw_decompress(block: Buffer, limit: int, already: int = 0) -> bytes:
    try:
        n = cramjam.snappy.decompress_raw_len(block)
    except Exception as exc:
        raise CompressionError(f"corrupt snappy block: {exc}") from exc
    if n + already > limit:
        raise DecompressionLimitExceeded(Compression.SNAPPY, limit)
    try:
        return bytes(cramjam.snappy.decompress_raw(block))
    except Exception as exc:
        raise CompressionError(f"corrupt snappy block: {exc}") from exc


def _snappy_decompress(data: Buffer, limit: int) -> bytes:
    mv = memoryview(data)
    if len(mv) < 16 or mv[:8] != XERIAL_MAGIC:
        return _snappy_raw_decompress(mv, limit)
    # xerial: 16-byte header (magic, version, compat: ignored, some writers get their byte order
    # wrong), then [int32 big-endian length][raw snappy block]...; a writer may restart the header.
    parts: list[bytes] = []
    total = 0
    pos = 16
    end = len(mv)
    while pos < end:
        if end - pos >= 16 and mv[pos : pos + 8] == XERIAL_MAGIC:
            pos += 16
            continue
        if end - pos < 4:
            raise CompressionError("truncated xerial snappy block length")
        n = _BE_I32.unpack_from(mv, pos)[0]
        pos += 4
        if n < 0 or n > end - pos:
            raise CompressionError(f"xerial snappy block of {n} bytes exceeds the {end - pos} left")
        out = _snappy_raw_decompress(mv[pos : pos + n], limit, total)
        total += len(out)
        parts.append(out)
        pos += n
    return parts[0] if len(parts) == 1 else b"".join(parts)


# -- lz4: the LZ4 frame format with independent blocks (KIP-57) --------------------------------

LZ4_MAGIC = 0x184D2204
_LZ4_MAGIC_BYTES = struct.pack("<I", LZ4_MAGIC)
LZ4_BLOCK_SIZE = 64 * 1024
_LZ4_BLOCK_SIZES = {4: 64 * 1024, 5: 256 * 1024, 6: 1024 * 1024, 7: 4 * 1024 * 1024}
_LE_U32 = struct.Struct("<I")
_LZ4_FLG = (
    0x60  # version 01, independent blocks, no checksums, no content size (Kafka's own writer)
)
_LZ4_BD = 0x40  # 64 KiB maximum block size


_LZ4_HC_CACHE: dict[bytes, int] = {}


def _lz4_header_checksum(descriptor: bytes) -> int:
    """Second byte of xxh32(descriptor); memoized, as writers repeat the same few descriptors."""
    hc = _LZ4_HC_CACHE.get(descriptor)
    if hc is None:
        hc = (xxh32(descriptor) >> 8) & 0xFF
        if len(_LZ4_HC_CACHE) >= 4096:  # descriptors with a content size vary: stay bounded
            _LZ4_HC_CACHE.clear()
        _LZ4_HC_CACHE[descriptor] = hc
    return hc


def _lz4_compress(data: Buffer, level: int | None, broken_header_checksum: bool = False) -> bytes:
    """One LZ4 frame of independent 64 KiB blocks; `broken_header_checksum` for magic 0 messages."""
    descriptor = bytes((_LZ4_FLG, _LZ4_BD))
    if broken_header_checksum:  # the checksum old Kafka wrote: over magic + descriptor
        hc = _lz4_header_checksum(_LZ4_MAGIC_BYTES + descriptor)
    else:
        hc = _lz4_header_checksum(descriptor)
    parts = [_LZ4_MAGIC_BYTES, descriptor, bytes((hc,))]
    mv = memoryview(data)
    compress_block = cramjam.lz4.compress_block
    mode: Literal["default", "high_compression"] = (
        "default" if level is None else "high_compression"
    )
    for i in range(0, len(mv), LZ4_BLOCK_SIZE):
        chunk = mv[i : i + LZ4_BLOCK_SIZE]
        block = bytes(compress_block(chunk, mode=mode, compression=level, store_size=False))
        if len(block) >= len(chunk):
            parts.append(_LE_U32.pack(len(chunk) | 0x80000000))
            parts.append(bytes(chunk))
        else:
            parts.append(_LE_U32.pack(len(block)))
            parts.append(block)
    parts.append(b"\x00\x00\x00\x00")
    return b"".join(parts)


def _lz4_decompress(data: Buffer, limit: int, ignore_header_checksum: bool) -> bytes:
    mv = memoryview(data)
    end = len(mv)
    if end < 7 or mv[:4] != _LZ4_MAGIC_BYTES:
        raise CompressionError("not an LZ4 frame (bad magic)")
    flg = mv[4]
    bd = mv[5]
    if flg >> 6 != 1:
        raise CompressionError(f"unsupported LZ4 frame version {flg >> 6}")
    max_block = _LZ4_BLOCK_SIZES.get((bd >> 4) & 0x07)
    if max_block is None or bd & 0x8F or flg & 0x02:
        raise CompressionError("invalid LZ4 frame descriptor")
    independent = bool(flg & 0x20)
    block_checksum = bool(flg & 0x10)
    content_checksum = bool(flg & 0x04)
    pos = 6
    if flg & 0x08:  # content size
        pos += 8
    if flg & 0x01:  # dictionary id
        pos += 4
    if pos >= end:
        raise CompressionError("truncated LZ4 frame descriptor")
    if not ignore_header_checksum and mv[pos] != _lz4_header_checksum(bytes(mv[4:pos])):
        raise CompressionError("LZ4 frame descriptor checksum mismatch")
    pos += 1
    # walk the blocks: (start, length, compressed)
    blocks: list[tuple[int, int, bool]] = []
    bound = 0
    while True:
        if end - pos < 4:
            raise CompressionError("truncated LZ4 frame (no end mark)")
        size = _LE_U32.unpack_from(mv, pos)[0]
        pos += 4
        if size == 0:
            break
        compressed = not size & 0x80000000
        size &= 0x7FFFFFFF
        if size > max_block:
            raise CompressionError(f"LZ4 block of {size} bytes exceeds the frame's {max_block}")
        if size > end - pos:
            raise CompressionError("truncated LZ4 block")
        blocks.append((pos, size, compressed))
        bound += max_block if compressed else size
        pos += size + (4 if block_checksum else 0)
    if content_checksum and end - pos < 4:
        raise CompressionError("truncated LZ4 content checksum")
    if not independent:
        # linked blocks: only a whole-frame decoder can follow them; bound by the block walk first
        if bound > limit:
            raise DecompressionLimitExceeded(Compression.LZ4, limit)
        frame = bytearray(mv[:pos])
        frame[4] = (
            flg & ~0x04 & 0xFF
        )  # we already stopped at the end mark: drop the content checksum
        hpos = 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
        frame[hpos] = (xxh32(frame[4:hpos]) >> 8) & 0xFF
        try:
            out = bytes(cramjam.lz4.decompress(bytes(frame)))
        except Exception as exc:
            raise CompressionError(f"corrupt LZ4 frame: {exc}") from exc
        if len(out) > limit:
            raise DecompressionLimitExceeded(Compression.LZ4, limit)
        return out
    decompress_into = cramjam.lz4.decompress_block_into
    if bound <= limit:
        buf = bytearray(bound)
        out_mv = memoryview(buf)
        o = 0
        try:
            for start, size, compressed in blocks:
                if compressed:
                    o += decompress_into(mv[start : start + size], out_mv[o : o + max_block])
                else:
                    out_mv[o : o + size] = mv[start : start + size]
                    o += size
        except Exception as exc:
            raise CompressionError(f"corrupt LZ4 block: {exc}") from exc
        finally:
            out_mv.release()
        del buf[o:]
        return bytes(buf)
    parts: list[bytes] = []
    total = 0
    scratch = bytearray(max_block)
    for start, size, compressed in blocks:
        if compressed:
            try:
                n = decompress_into(mv[start : start + size], scratch)
            except Exception as exc:
                raise CompressionError(f"corrupt LZ4 block: {exc}") from exc
            chunk = bytes(scratch[:n])
        else:
            chunk = bytes(mv[start : start + size])
        total += len(chunk)
        if total > limit:
            raise DecompressionLimitExceeded(Compression.LZ4, limit)
        parts.append(chunk)
    return b"".join(parts)


# -- zstd -------------------------------------------------------------------------------------

_ZSTD_MAGIC = 0xFD2FB528
_ZSTD_MAX_BLOCK = 128 * 1024


def _zstd_bound(mv: memoryview) -> int:
    """An upper bound of the decompressed size, from the frame and block headers alone."""
    end = len(mv)
    pos = 0
    bound = 0
    while pos < end:
        if end - pos < 4:
            raise CompressionError("truncated zstd frame magic")
        magic = _LE_U32.unpack_from(mv, pos)[0]
        pos += 4
        if magic & 0xFFFFFFF0 == 0x184D2A50:  # skippable frame
            if end - pos < 4:
                raise CompressionError("truncated zstd skippable frame")
            pos += 4 + _LE_U32.unpack_from(mv, pos)[0]
            continue
        if magic != _ZSTD_MAGIC:
            raise CompressionError("not a zstd frame (bad magic)")
        if pos >= end:
            raise CompressionError("truncated zstd frame header")
        fhd = mv[pos]
        pos += 1
        if fhd & 0x08:
            raise CompressionError("zstd frame header has its reserved bit set")
        single_segment = bool(fhd & 0x20)
        fcs_size = (1 if single_segment else 0, 2, 4, 8)[fhd >> 6]
        pos += (0 if single_segment else 1) + (0, 1, 2, 4)[fhd & 0x03] + fcs_size
        while True:
            if end - pos < 3:
                raise CompressionError("truncated zstd block header")
            bh = mv[pos] | (mv[pos + 1] << 8) | (mv[pos + 2] << 16)
            pos += 3
            btype = (bh >> 1) & 0x03
            bsize = bh >> 3
            if btype == 0:  # raw
                bound += bsize
                pos += bsize
            elif btype == 1:  # RLE: one byte repeated bsize times
                bound += bsize
                pos += 1
            elif btype == 2:
                bound += _ZSTD_MAX_BLOCK
                pos += bsize
            else:
                raise CompressionError("reserved zstd block type")
            if pos > end:
                raise CompressionError("truncated zstd block")
            if bh & 1:
                break
        if fhd & 0x04:
            pos += 4
        if pos > end:
            raise CompressionError("truncated zstd frame checksum")
    return bound


def _zstd_decompress(data: Buffer, limit: int) -> bytes:
    mv = memoryview(data)
    if _zstd_bound(mv) > limit:
        raise DecompressionLimitExceeded(Compression.ZSTD, limit)
    try:
        out = bytes(cramjam.zstd.decompress(mv))
    except Exception as exc:
        raise CompressionError(f"corrupt zstd payload: {exc}") from exc
    if len(out) > limit:  # cannot happen given the bound; kept as a guard
        raise DecompressionLimitExceeded(Compression.ZSTD, limit)
    return out


# -- public API ---------------------------------------------------------------------------------


def compress(
    codec: int, data: Buffer, *, level: int | None = None, legacy_lz4: bool = False
) -> bytes:
    """Compress `data` in the framing Kafka clients expect for `codec`.

    `legacy_lz4` writes the broken LZ4 header checksum of magic 0 messages (KIP-57).
    """
    if codec == Compression.NONE:
        return bytes(data)
    if codec == Compression.GZIP:
        return _gzip_compress(data, level)
    if codec == Compression.SNAPPY:
        return _snappy_compress(data)
    if codec == Compression.LZ4:
        return _lz4_compress(data, level, broken_header_checksum=legacy_lz4)
    if codec == Compression.ZSTD:
        return bytes(cramjam.zstd.compress(data, level=3 if level is None else level))
    raise EncodeError(f"unknown compression codec {codec}")


def decompress(
    codec: int,
    data: Buffer,
    *,
    max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    legacy_lz4: bool = False,
) -> bytes:
    """Decompress a payload; raise DecompressionLimitExceeded past `max_size` bytes.

    Every failure is a CompressionError (a DecodeError). Snappy accepts raw and xerial-framed input;
    `legacy_lz4` ignores the LZ4 descriptor checksum that magic 0 writers got wrong.
    """
    if codec == Compression.NONE:
        if len(data) > max_size:
            raise DecompressionLimitExceeded(codec, max_size)
        return bytes(data)
    if codec == Compression.GZIP:
        return _gzip_decompress(data, max_size)
    if codec == Compression.SNAPPY:
        return _snappy_decompress(data, max_size)
    if codec == Compression.LZ4:
        return _lz4_decompress(data, max_size, ignore_header_checksum=legacy_lz4)
    if codec == Compression.ZSTD:
        return _zstd_decompress(data, max_size)
    raise UnsupportedCompressionError(f"unknown compression codec {codec}")
