"""Per-version codecs compiled from a struct declaration (protocol/schema.py): the readers and writers
of fixed-width fields, strings, bytes, arrays, nullable and nested structs, and tagged fields (KIP-482).
"""

from __future__ import annotations

import struct as _struct
from typing import Any

from kafkalite.protocol import primitives as p
from kafkalite.protocol.exceptions import DecodeError, EncodeError
from kafkalite.protocol.schema import F, Struct, StructSchema, Versions


class Encoded:
    """A nested struct already encoded at the version being written: its bytes are written as they
    are (an answer that repeats a part, such as Metadata's unchanged topics, encodes it once).
    Whoever builds one answers for the version: `StructCodec.encode` makes it."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data


_FIXED: dict[str, tuple[p.ReadFn, p.WriteFn]] = {
    "bool": (p.read_bool, p.write_bool),
    "int8": (p.read_int8, p.write_int8),
    "int16": (p.read_int16, p.write_int16),
    "uint16": (p.read_uint16, p.write_uint16),
    "int32": (p.read_int32, p.write_int32),
    "int64": (p.read_int64, p.write_int64),
    "float64": (p.read_float64, p.write_float64),
    "uuid": (p.read_uuid, p.write_uuid),
}


def _array_codec(
    elem_read: p.ReadFn, elem_write: p.WriteFn, compact: bool, nullable: bool
) -> tuple[p.ReadFn, p.WriteFn]:
    def read(buf: p.Buffer, pos: int) -> tuple[Any, int]:
        n, pos = p.read_length(buf, pos, compact)
        if n < 0:
            if n == -1 and nullable:
                return None, pos
            raise DecodeError(f"invalid array length {n}")
        if n > len(buf) - pos:
            raise DecodeError(f"array length {n} exceeds the {len(buf) - pos} bytes left")
        out: list[Any] = []
        append = out.append
        for _ in range(n):
            v, pos = elem_read(buf, pos)
            append(v)
        return out, pos

    def write(out: bytearray, value: Any) -> None:
        if value is None:
            if not nullable:
                raise EncodeError("null value for a non-nullable array")
            p.write_length(out, -1, compact)
            return
        p.write_length(out, len(value), compact)
        for v in value:
            elem_write(out, v)

    return read, write


def _nullable_struct_codec(rd: p.ReadFn, wr: p.WriteFn) -> tuple[p.ReadFn, p.WriteFn]:
    def read(buf: p.Buffer, pos: int) -> tuple[Any, int]:
        marker, pos = p.read_int8(buf, pos)
        if marker < 0:
            return None, pos
        return rd(buf, pos)

    def write(out: bytearray, value: Any) -> None:
        if value is None:
            out.append(0xFF)
        else:
            out.append(1)
            wr(out, value)

    return read, write


_FIELD_ERRORS = (EncodeError, TypeError, AttributeError, _struct.error, ValueError)


class StructCodec:
    """Compiled field readers/writers of one struct at one version."""

    def __init__(self, schema: StructSchema, version: int) -> None:
        self.schema = schema
        self.version = version
        self.flexible = version in schema.flexible
        self.regular: list[tuple[str, p.ReadFn, p.WriteFn]] = []
        self.tagged: dict[int, tuple[str, p.ReadFn, p.WriteFn, F]] = {}
        self.absent: list[F] = []
        for fdecl in schema.fields:
            present = version in Versions.parse(fdecl.versions)
            tagged_v = Versions.parse(fdecl.tagged if fdecl.tagged is not None else fdecl.versions)
            if not present:
                self.absent.append(fdecl)
                continue
            rd, wr = self._field_codec(fdecl)
            if fdecl.tag is not None and version in tagged_v:
                if not self.flexible:
                    raise ValueError(
                        f"{schema.name}.{fdecl.name}: tagged field in non-flexible version"
                    )
                self.tagged[fdecl.tag] = (fdecl.name, rd, wr, fdecl)
            elif fdecl.tag is not None:
                self.absent.append(fdecl)
            else:
                self.regular.append((fdecl.name, rd, wr))
        self.tag_order = sorted(self.tagged)
        # defaults resolved once: immutable values are shared, lists and structs are built per instance
        self.absent_const: list[tuple[str, Any]] = []
        self.absent_fresh: list[F] = []
        for fdecl in self.absent + [t[3] for t in self.tagged.values()]:
            value = schema.default_of(fdecl)
            if isinstance(value, (list, Struct)):
                self.absent_fresh.append(fdecl)
            else:
                self.absent_const.append((fdecl.name, value))

    def _field_codec(self, fdecl: F) -> tuple[p.ReadFn, p.WriteFn]:
        v = self.version
        nullable = v in Versions.parse(fdecl.nullable)
        compact = self.flexible
        t = fdecl.type
        is_array = t.startswith("[]")
        elem = t[2:] if is_array else t
        rd: p.ReadFn
        wr: p.WriteFn
        if elem in _FIXED:
            rd, wr = _FIXED[elem]
        elif elem == "string":
            rd, wr = p.STRING_CODECS[(compact, nullable and not is_array)]
        elif elem in ("bytes", "records"):
            rd, wr = p.BYTES_CODECS[(compact, nullable and not is_array)]
        else:
            child = self.schema.children[fdecl.name]
            sub = child._schema.codec(v)
            rd, wr = sub.read, sub.write
            if nullable and not is_array:
                rd, wr = _nullable_struct_codec(rd, wr)
        if is_array:
            rd, wr = _array_codec(rd, wr, compact, nullable)
        return rd, wr

    def read(self, buf: p.Buffer, pos: int) -> tuple[Any, int]:
        schema = self.schema
        obj = schema.cls.__new__(schema.cls)
        setter = object.__setattr__
        for name, rd, _ in self.regular:
            val, pos = rd(buf, pos)
            setter(obj, name, val)
        # absent and tagged fields start at their defaults; tagged ones are overwritten when present
        for name, value in self.absent_const:
            setter(obj, name, value)
        for fdecl in self.absent_fresh:
            setter(obj, fdecl.name, schema.default_of(fdecl))
        if self.flexible:
            count, pos = p.read_uvarint(buf, pos)
            if count > len(buf) - pos:
                raise DecodeError(f"tagged field count {count} exceeds the bytes left")
            view = memoryview(buf) if count else None  # bounded sub-views, never copies
            for _ in range(count):
                tag, pos = p.read_uvarint(buf, pos)
                size, pos = p.read_uvarint(buf, pos)
                if size > len(buf) - pos:
                    raise DecodeError(f"tagged field {tag} size {size} exceeds the bytes left")
                entry = self.tagged.get(tag)
                if entry is not None:
                    assert view is not None
                    val, end = entry[1](view[: pos + size], pos)
                    if end != pos + size:
                        raise DecodeError(
                            f"tagged field {tag} declared {size} bytes, used {end - pos}"
                        )
                    setter(obj, entry[0], val)
                pos += size
        return obj, pos

    def encode(self, obj: Any) -> Encoded:
        """`obj` written at this codec's version, to be placed where such a struct goes."""
        out = bytearray()
        self.write(out, obj)
        return Encoded(bytes(out))

    def write(self, out: bytearray, obj: Any) -> None:
        if type(obj) is Encoded:
            out += obj.data
            return
        name = ""
        try:
            for name, _, wr in self.regular:
                wr(out, getattr(obj, name))
        except _FIELD_ERRORS as exc:
            raise self._field_error(name, exc) from None
        for fdecl in self.absent:
            if not fdecl.ignorable and fdecl.tag is None:
                val = getattr(obj, fdecl.name, None)
                if (
                    val is not None
                    and val != self.schema.default_of(fdecl)
                    and not isinstance(val, Struct)
                ):
                    raise EncodeError(
                        f"{self.schema.name}.{fdecl.name}={val!r} cannot be sent at version {self.version}"
                    )
        if self.flexible:
            present: list[tuple[int, bytes]] = []
            for tag in self.tag_order:
                name, _, wr, fdecl = self.tagged[tag]
                val = getattr(obj, name)
                if val == self.schema.default_of(fdecl):
                    continue
                tmp = bytearray()
                try:
                    wr(tmp, val)
                except _FIELD_ERRORS as exc:
                    raise self._field_error(name, exc) from None
                present.append((tag, bytes(tmp)))
            p.write_uvarint(out, len(present))
            for tag, data in present:
                p.write_uvarint(out, tag)
                p.write_uvarint(out, len(data))
                out += data

    def _field_error(self, name: str, exc: Exception) -> EncodeError:
        """The EncodeError for field `name` that failed to encode, naming the struct (and version)."""
        if isinstance(exc, EncodeError):
            return EncodeError(f"{self.schema.name}.{name}: {exc}")
        return EncodeError(
            f"{self.schema.name}.{name} at v{self.version}: {type(exc).__name__}: {exc}"
        )
