"""The declarative message model: one declaration per message covers all its versions.

`F(...)` declares a field (type, versions, nullable versions, tag, default); `request`/`response` build a
class per message whose encode/decode for every version is compiled from that one declaration.
"""

from __future__ import annotations

import struct as _struct
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from kafkalite.protocol import primitives as p
from kafkalite.protocol.exceptions import DecodeError, EncodeError

# ---------------------------------------------------------------------------
# Version ranges


@dataclass(frozen=True)
class Versions:
    """An inclusive version range; `Versions.parse("3+")`, `"0-5"`, `"7"` or `"none"`."""

    low: int
    high: int  # inclusive; 32767 for "N+"

    NONE: ClassVar[Versions]
    ALL: ClassVar[Versions]

    @staticmethod
    def parse(spec: str | Versions | None) -> Versions:
        if isinstance(spec, Versions):
            return spec
        if spec is None or spec == "none" or spec == "":
            return Versions.NONE
        spec = spec.strip()
        if spec.endswith("+"):
            return Versions(int(spec[:-1]), 0x7FFF)
        if "-" in spec:
            lo, hi = spec.split("-", 1)
            return Versions(int(lo), int(hi))
        v = int(spec)
        return Versions(v, v)

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.low <= version <= self.high

    def empty(self) -> bool:
        return self.low > self.high


Versions.NONE = Versions(1, 0)
Versions.ALL = Versions(0, 0x7FFF)

PRIMITIVE_TYPES = frozenset(
    {
        "bool",
        "int8",
        "int16",
        "uint16",
        "int32",
        "int64",
        "float64",
        "uuid",
        "string",
        "bytes",
        "records",
    }
)

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


# ---------------------------------------------------------------------------
# Field declarations


class _NullDefault:
    """Marker for Kafka's `"default": "null"` (a plain `default=None` means "the type's default")."""

    _instance: _NullDefault | None = None

    def __new__(cls) -> _NullDefault:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "NULL"


NULL: Any = _NullDefault()


@dataclass
class F:
    """A field declaration.

    type: a primitive name ("int32", "string", "records", ...), "[]<primitive>", "[]<StructName>" or
    "<StructName>"; struct types carry their `fields` here or refer to a common struct by name.
    versions/nullable/tagged: version ranges as strings ("0+", "3-5", "none").
    tag: the tag number of a tagged field (written only when its value differs from the default).
    """

    name: str
    type: str
    versions: str = "0+"
    nullable: str = "none"
    default: Any = None
    fields: Sequence[F] | None = None
    tag: int | None = None
    tagged: str | None = None
    ignorable: bool = False
    has_default: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        # `default=None` means "the type's default"; `default=NULL` is Kafka's explicit null default
        if self.default is NULL:
            self.default = None
            self.has_default = True
        else:
            self.has_default = self.default is not None


class Struct:
    """Base class of every message and nested struct. Fields live in __slots__ built per declaration."""

    __slots__ = ()
    _schema: ClassVar[StructSchema]

    def __init__(self, **kwargs: Any) -> None:
        schema = self._schema
        for name, fdecl in schema.by_name.items():
            if name in kwargs:
                object.__setattr__(self, name, kwargs.pop(name))
            else:
                object.__setattr__(self, name, schema.default_of(fdecl))
        if kwargs:
            raise TypeError(f"{type(self).__name__} has no field(s) {sorted(kwargs)}")

    def __getattr__(self, name: str) -> Any:  # only reached for unknown names; lets mypy see Any
        raise AttributeError(f"{type(self).__name__} has no field {name!r}")

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in self._schema.by_name)

    def __hash__(self) -> int:
        return id(self)

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in self._schema.by_name)
        return f"{type(self).__name__}({inner})"

    def to_dict(self) -> dict[str, Any]:
        def conv(v: Any) -> Any:
            if isinstance(v, Struct):
                return v.to_dict()
            if isinstance(v, list):
                return [conv(x) for x in v]
            return v

        return {n: conv(getattr(self, n)) for n in self._schema.by_name}


class StructSchema:
    """A struct's fields plus the compiled per-version codecs (built lazily, cached)."""

    def __init__(self, name: str, fields: Sequence[F], flexible: Versions) -> None:
        self.name = name
        self.fields = list(fields)
        self.flexible = flexible
        self.by_name: dict[str, F] = {}
        self.children: dict[str, type[Struct]] = {}  # struct-typed field name -> class
        self._codecs: dict[int, _StructCodec] = {}
        self.cls: type[Struct] = Struct  # replaced by make_struct_class

    def default_of(self, fdecl: F) -> Any:
        if fdecl.has_default:
            d = fdecl.default
            return list(d) if isinstance(d, list) else d
        t = fdecl.type
        if t.startswith("[]"):
            return []
        if t in ("int8", "int16", "uint16", "int32", "int64"):
            return 0
        if t == "float64":
            return 0.0
        if t == "bool":
            return False
        if t == "string":
            return ""  # Kafka's default for strings, nullable or not, unless declared "null"
        if t == "bytes":
            return b""
        if t == "records":
            return None
        if t == "uuid":
            return p.ZERO_UUID
        child = self.children.get(fdecl.name)
        if child is not None:
            return None if Versions.parse(fdecl.nullable) == Versions.ALL else child()
        raise EncodeError(f"no default for field {fdecl.name} of type {t}")

    def codec(self, version: int) -> _StructCodec:
        c = self._codecs.get(version)
        if c is None:
            c = _StructCodec(self, version)
            self._codecs[version] = c
        return c


def _snake_ok(name: str) -> None:
    if not name.isidentifier() or name != name.lower():
        raise ValueError(f"field names are snake_case identifiers, got {name!r}")


def make_struct_class(
    name: str,
    fields: Sequence[F],
    flexible: Versions,
    common: dict[str, Sequence[F]],
    base: type[Struct] = Struct,
    attrs: dict[str, Any] | None = None,
) -> type[Struct]:
    schema = StructSchema(name, fields, flexible)
    for fdecl in fields:
        _snake_ok(fdecl.name)
        if fdecl.name in schema.by_name:
            raise ValueError(f"{name}: duplicate field {fdecl.name}")
        schema.by_name[fdecl.name] = fdecl
    ns: dict[str, Any] = {"__slots__": tuple(schema.by_name), "_schema": schema}
    for fdecl in fields:
        elem = fdecl.type[2:] if fdecl.type.startswith("[]") else fdecl.type
        if elem in PRIMITIVE_TYPES:
            continue
        sub_fields = fdecl.fields if fdecl.fields is not None else common.get(elem)
        if sub_fields is None:
            raise ValueError(f"{name}.{fdecl.name}: struct type {elem} has no fields")
        child = make_struct_class(elem, sub_fields, flexible, common)
        schema.children[fdecl.name] = child
        ns[elem] = child
    if attrs:
        ns.update(attrs)
    cls = type(name, (base,), ns)
    schema.cls = cls
    return cls


# ---------------------------------------------------------------------------
# Per-version codecs


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


class _StructCodec:
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

    def write(self, out: bytearray, obj: Any) -> None:
        for name, _, wr in self.regular:
            try:
                wr(out, getattr(obj, name))
            except EncodeError as exc:
                raise EncodeError(f"{self.schema.name}.{name}: {exc}") from None
            except (TypeError, AttributeError, _struct.error, ValueError) as exc:
                raise EncodeError(
                    f"{self.schema.name}.{name} at v{self.version}: {type(exc).__name__}: {exc}"
                ) from None
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
                except EncodeError as exc:
                    raise EncodeError(f"{self.schema.name}.{name}: {exc}") from None
                except (TypeError, AttributeError, _struct.error, ValueError) as exc:
                    raise EncodeError(
                        f"{self.schema.name}.{name} at v{self.version}: {type(exc).__name__}: {exc}"
                    ) from None
                present.append((tag, bytes(tmp)))
            p.write_uvarint(out, len(present))
            for tag, data in present:
                p.write_uvarint(out, tag)
                p.write_uvarint(out, len(data))
                out += data


# ---------------------------------------------------------------------------
# Messages

_DECODE_ERRORS = (
    _struct.error,
    IndexError,
    ValueError,
    UnicodeDecodeError,
    OverflowError,
    MemoryError,
    RecursionError,
)


class Message(Struct):
    """A request or response of one API; encode/decode take the API version."""

    __slots__ = ()
    API_KEY: ClassVar[int]
    VALID_VERSIONS: ClassVar[Versions]
    FLEXIBLE_VERSIONS: ClassVar[Versions]
    IS_REQUEST: ClassVar[bool]

    def encode(self, version: int) -> bytes:
        out = bytearray()
        self.encode_into(out, version)
        return bytes(out)

    def encode_into(self, out: bytearray, version: int) -> None:
        cls = type(self)
        if version not in cls.VALID_VERSIONS:
            raise EncodeError(f"{cls.__name__} has no version {version}")
        cls._schema.codec(version).write(out, self)

    @classmethod
    def decode(cls, buf: p.Buffer, version: int, pos: int = 0, *, exact: bool = True) -> Any:
        """Decode one message body; with `exact`, trailing bytes are an error."""
        obj, end = cls.decode_from(buf, version, pos)
        if exact and end != len(buf):
            raise DecodeError(f"{cls.__name__} v{version}: {len(buf) - end} trailing bytes")
        return obj

    @classmethod
    def decode_from(cls, buf: p.Buffer, version: int, pos: int = 0) -> tuple[Any, int]:
        if version not in cls.VALID_VERSIONS:
            raise DecodeError(f"{cls.__name__} has no version {version}")
        try:
            return cls._schema.codec(version).read(buf, pos)
        except DecodeError:
            raise
        except _DECODE_ERRORS as exc:
            raise DecodeError(f"{cls.__name__} v{version}: {type(exc).__name__}: {exc}") from None

    @classmethod
    def is_flexible(cls, version: int) -> bool:
        return version in cls.FLEXIBLE_VERSIONS


class Request(Message):
    __slots__ = ()
    IS_REQUEST = True
    RESPONSE: ClassVar[type[Response]]


class Response(Message):
    __slots__ = ()
    IS_REQUEST = False


@dataclass
class Api:
    """One Kafka API: its key, name, request and response classes, and version ranges."""

    key: int
    name: str
    request: type[Request]
    response: type[Response]

    @property
    def min_version(self) -> int:
        return self.request.VALID_VERSIONS.low

    @property
    def max_version(self) -> int:
        return self.request.VALID_VERSIONS.high


# registry filled by `api(...)`, keyed by API key
APIS: dict[int, Api] = {}


def _message(
    base: type[Message],
    api_key: int,
    name: str,
    valid: str,
    flexible: str,
    fields: Iterable[F],
    common: dict[str, Sequence[F]] | None,
) -> Any:
    flex = Versions.parse(flexible)
    attrs = {"API_KEY": api_key, "VALID_VERSIONS": Versions.parse(valid), "FLEXIBLE_VERSIONS": flex}
    return make_struct_class(name, list(fields), flex, common or {}, base=base, attrs=attrs)


def request(
    api_key: int,
    name: str,
    *,
    valid: str,
    flexible: str,
    fields: Iterable[F],
    common: dict[str, Sequence[F]] | None = None,
) -> Any:
    """Declare a request message; returns its class."""
    return _message(Request, api_key, name, valid, flexible, fields, common)


def response(
    api_key: int,
    name: str,
    *,
    valid: str,
    flexible: str,
    fields: Iterable[F],
    common: dict[str, Sequence[F]] | None = None,
) -> Any:
    """Declare a response message; returns its class."""
    return _message(Response, api_key, name, valid, flexible, fields, common)


class Data(Message):
    """A versioned struct that is not an API message (consumer protocol metadata, __consumer_offsets records)."""

    __slots__ = ()
    IS_REQUEST = False


def data(
    name: str,
    *,
    valid: str,
    flexible: str,
    fields: Iterable[F],
    common: dict[str, Sequence[F]] | None = None,
) -> Any:
    """Declare a versioned data struct (API_KEY -1, not registered in APIS); encode/decode take the version."""
    return _message(Data, -1, name, valid, flexible, fields, common)


def api(name: str, req: Any, resp: Any) -> Api:
    """Register an API (request and response classes of the same key and versions)."""
    if req.API_KEY != resp.API_KEY:
        raise ValueError(f"{name}: request key {req.API_KEY} != response key {resp.API_KEY}")
    if req.API_KEY in APIS:
        raise ValueError(f"{name}: API key {req.API_KEY} registered twice")
    req.RESPONSE = resp
    a = Api(req.API_KEY, name, req, resp)
    APIS[a.key] = a
    return a


def all_versions(cls: type[Message]) -> range:
    return range(cls.VALID_VERSIONS.low, cls.VALID_VERSIONS.high + 1)


def new_uuid() -> uuid.UUID:
    return uuid.uuid4()


__all__ = [
    "APIS",
    "F",
    "NULL",
    "Api",
    "Message",
    "Request",
    "Response",
    "Struct",
    "Versions",
    "all_versions",
    "api",
    "request",
    "response",
]
