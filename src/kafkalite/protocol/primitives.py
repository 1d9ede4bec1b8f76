"""Primitive codecs of the Kafka protocol: fixed-width ints, varints, strings, bytes, uuids.

Readers take (buffer, position) and return (value, new position); writers append to a bytearray.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from typing import Any

from kafkalite.protocol.exceptions import DecodeError

Buffer = bytes | bytearray | memoryview
ReadFn = Callable[[Buffer, int], tuple[Any, int]]
WriteFn = Callable[[bytearray, Any], None]

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_F64 = struct.Struct(">d")

ZERO_UUID = uuid.UUID(int=0)


def _fixed(st: struct.Struct) -> tuple[ReadFn, WriteFn]:
    size = st.size
    unpack_from = st.unpack_from
    pack = st.pack

    def read(buf: Buffer, pos: int) -> tuple[Any, int]:
        if pos + size > len(buf):
            raise DecodeError(f"need {size} bytes at offset {pos}, have {len(buf) - pos}")
        return unpack_from(buf, pos)[0], pos + size

    def write(out: bytearray, value: Any) -> None:
        try:
            out += pack(value)
        except struct.error as exc:
            from kafkalite.protocol.exceptions import EncodeError

            raise EncodeError(f"{value!r} does not fit {st.format}: {exc}") from exc

    return read, write


read_int8, write_int8 = _fixed(_I8)
read_int16, write_int16 = _fixed(_I16)
read_uint16, write_uint16 = _fixed(_U16)
read_int32, write_int32 = _fixed(_I32)
read_uint32, write_uint32 = _fixed(_U32)
read_int64, write_int64 = _fixed(_I64)
read_float64, write_float64 = _fixed(_F64)


def read_bool(buf: Buffer, pos: int) -> tuple[bool, int]:
    if pos >= len(buf):
        raise DecodeError(f"need 1 byte at offset {pos}")
    return buf[pos] != 0, pos + 1


def write_bool(out: bytearray, value: Any) -> None:
    out.append(1 if value else 0)


# -- varints -----------------------------------------------------------------


def read_uvarint(buf: Buffer, pos: int) -> tuple[int, int]:
    """Unsigned LEB128 varint of at most 5 bytes (32 bits)."""
    result = 0
    shift = 0
    end = len(buf)
    while True:
        if pos >= end:
            raise DecodeError("truncated varint")
        b = buf[pos]
        pos += 1
        if shift == 28 and b > 0x0F:
            raise DecodeError("varint overflows 32 bits")
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 28:
            raise DecodeError("varint longer than 5 bytes")


def read_uvarlong(buf: Buffer, pos: int) -> tuple[int, int]:
    """Unsigned LEB128 varint of at most 10 bytes (64 bits)."""
    result = 0
    shift = 0
    end = len(buf)
    while True:
        if pos >= end:
            raise DecodeError("truncated varlong")
        b = buf[pos]
        pos += 1
        if shift == 63 and b > 0x01:
            raise DecodeError("varlong overflows 64 bits")
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise DecodeError("varlong longer than 10 bytes")


def write_uvarint(out: bytearray, value: int) -> None:
    if value < 0:
        value &= 0xFFFFFFFFFFFFFFFF
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def uvarint_bytes(value: int) -> bytes:
    out = bytearray()
    write_uvarint(out, value)
    return bytes(out)


def read_varint(buf: Buffer, pos: int) -> tuple[int, int]:
    """Zig-zag signed varint (int32)."""
    v, pos = read_uvarint(buf, pos)
    return (v >> 1) ^ -(v & 1), pos


def read_varlong(buf: Buffer, pos: int) -> tuple[int, int]:
    """Zig-zag signed varlong (int64)."""
    v, pos = read_uvarlong(buf, pos)
    return (v >> 1) ^ -(v & 1), pos


def write_varint(out: bytearray, value: int) -> None:
    if not -0x80000000 <= value <= 0x7FFFFFFF:
        from kafkalite.protocol.exceptions import EncodeError

        raise EncodeError(f"{value} does not fit a 32-bit varint")
    write_uvarint(out, ((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def write_varlong(out: bytearray, value: int) -> None:
    if not -0x8000000000000000 <= value <= 0x7FFFFFFFFFFFFFFF:
        from kafkalite.protocol.exceptions import EncodeError

        raise EncodeError(f"{value} does not fit a 64-bit varlong")
    write_uvarint(out, ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


def varint_size(value: int) -> int:
    v = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    n = 1
    while v > 0x7F:
        v >>= 7
        n += 1
    return n


# -- lengths -------------------------------------------------------------------


def _check_len(buf: Buffer, pos: int, n: int, what: str) -> None:
    if n > len(buf) - pos:
        raise DecodeError(f"{what} length {n} exceeds the {len(buf) - pos} bytes left")


def read_length(buf: Buffer, pos: int, compact: bool) -> tuple[int, int]:
    """A collection length: int32 (classic) or unsigned varint N+1 (compact); -1 means null."""
    if compact:
        n, pos = read_uvarint(buf, pos)
        return n - 1, pos
    n, pos = read_int32(buf, pos)
    return n, pos


def write_length(out: bytearray, n: int, compact: bool) -> None:
    if compact:
        write_uvarint(out, n + 1)
    else:
        out += _I32.pack(n)


# -- strings and bytes -----------------------------------------------------------


def _make_string(compact: bool, nullable: bool) -> tuple[ReadFn, WriteFn]:
    def read(buf: Buffer, pos: int) -> tuple[Any, int]:
        if compact:
            n, pos = read_uvarint(buf, pos)
            n -= 1
        else:
            if pos + 2 > len(buf):
                raise DecodeError("truncated string length")
            n = _I16.unpack_from(buf, pos)[0]
            pos += 2
        if n < 0:
            if n == -1 and nullable:
                return None, pos
            raise DecodeError(f"invalid string length {n}")
        _check_len(buf, pos, n, "string")
        try:
            return bytes(buf[pos : pos + n]).decode("utf-8"), pos + n
        except UnicodeDecodeError as exc:
            raise DecodeError(f"string is not valid UTF-8: {exc}") from exc

    def write(out: bytearray, value: Any) -> None:
        if value is None:
            if not nullable:
                from kafkalite.protocol.exceptions import EncodeError

                raise EncodeError("null value for a non-nullable string")
            if compact:
                out.append(0)
            else:
                out += _I16.pack(-1)
            return
        data = value.encode("utf-8")
        if compact:
            write_uvarint(out, len(data) + 1)
        else:
            if len(data) > 0x7FFF:
                from kafkalite.protocol.exceptions import EncodeError

                raise EncodeError("string longer than 32767 bytes")
            out += _I16.pack(len(data))
        out += data

    return read, write


def _make_bytes(compact: bool, nullable: bool) -> tuple[ReadFn, WriteFn]:
    def read(buf: Buffer, pos: int) -> tuple[Any, int]:
        n, pos = read_length(buf, pos, compact)
        if n < 0:
            if n == -1 and nullable:
                return None, pos
            raise DecodeError(f"invalid bytes length {n}")
        _check_len(buf, pos, n, "bytes")
        return bytes(buf[pos : pos + n]), pos + n

    def write(out: bytearray, value: Any) -> None:
        if value is None:
            if not nullable:
                from kafkalite.protocol.exceptions import EncodeError

                raise EncodeError("null value for non-nullable bytes")
            write_length(out, -1, compact)
            return
        n = len(value)
        write_length(out, n, compact)
        if n >= SPLICE_MIN and isinstance(out, SplicedOutput):
            out.splice(value)
        else:
            out += value

    return read, write


SPLICE_MIN = 8192
"""Bytes values at least this large are spliced into a SplicedOutput instead of copied into it."""


class SplicedOutput(bytearray):
    """An encode target that leaves large bytes/records values out of itself (no copy): the bytes
    writer notes where each belongs, and parts() gives the whole encoding as buffers to write in order.

    Everything else is encoded into the bytearray as usual; a spliced value must not change until
    its parts are written.
    """

    __slots__ = ("_splices", "_spliced_size")

    def __init__(self, size: int = 0) -> None:
        super().__init__(size)
        self._splices: list[tuple[int, Buffer]] = []
        self._spliced_size = 0

    def splice(self, value: Buffer) -> None:
        """Place `value` at the current end of the encoding without copying it."""
        self._splices.append((len(self), value))
        self._spliced_size += len(value)

    @property
    def spliced(self) -> bool:
        return bool(self._splices)

    @property
    def total_size(self) -> int:
        """The length of the whole encoding, spliced values included."""
        return len(self) + self._spliced_size

    def parts(self) -> list[Buffer]:
        """The encoding as buffers in order: views of this bytearray between the spliced values."""
        if not self._splices:
            return [self]
        view = memoryview(self)
        out: list[Buffer] = []
        pos = 0
        for at, value in self._splices:
            if at > pos:
                out.append(view[pos:at])
            out.append(value)
            pos = at
        if pos < len(self):
            out.append(view[pos:])
        return out

    def getvalue(self) -> bytes:
        """The whole encoding as one bytes object (a copy)."""
        return b"".join(self.parts())


STRING_CODECS = {(c, n): _make_string(c, n) for c in (False, True) for n in (False, True)}
BYTES_CODECS = {(c, n): _make_bytes(c, n) for c in (False, True) for n in (False, True)}


def read_string(buf: Buffer, pos: int) -> tuple[str, int]:
    v, pos = STRING_CODECS[(False, False)][0](buf, pos)
    return str(v), pos


def write_string(out: bytearray, value: str) -> None:
    STRING_CODECS[(False, False)][1](out, value)


def read_nullable_string(buf: Buffer, pos: int) -> tuple[str | None, int]:
    v, pos = STRING_CODECS[(False, True)][0](buf, pos)
    return None if v is None else str(v), pos


def write_nullable_string(out: bytearray, value: str | None) -> None:
    STRING_CODECS[(False, True)][1](out, value)


def read_uuid(buf: Buffer, pos: int) -> tuple[uuid.UUID, int]:
    if pos + 16 > len(buf):
        raise DecodeError("truncated uuid")
    return uuid.UUID(bytes=bytes(buf[pos : pos + 16])), pos + 16


def write_uuid(out: bytearray, value: Any) -> None:
    if value is None:
        value = ZERO_UUID
    out += value.bytes
