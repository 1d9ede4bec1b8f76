"""The declarative message model: one declaration per message covers all its versions.

`F(...)` declares a field (type, versions, nullable versions, tag, default); `request`/`response` build a
class per message whose encode/decode for every version is compiled from that one declaration.
"""

from __future__ import annotations

import struct as _struct
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Self, TypeVar

from kafkalite.protocol import primitives as p
from kafkalite.protocol.exceptions import DecodeError, EncodeError

if TYPE_CHECKING:
    from kafkalite.protocol.codec import StructCodec

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

    if not TYPE_CHECKING:  # mypy reads each message's fields from its stub (protocol/stubgen.py)

        def __getattr__(self, name: str) -> Any:  # only reached for unknown names
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
        self._codecs: dict[int, StructCodec] = {}
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

    def codec(self, version: int) -> StructCodec:
        c = self._codecs.get(version)
        if c is None:
            from kafkalite.protocol.codec import StructCodec  # codec.py builds on this module

            c = StructCodec(self, version)
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
    def decode(cls, buf: p.Buffer, version: int, pos: int = 0, *, exact: bool = True) -> Self:
        """Decode one message body; with `exact`, trailing bytes are an error."""
        obj, end = cls.decode_from(buf, version, pos)
        if exact and end != len(buf):
            raise DecodeError(f"{cls.__name__} v{version}: {len(buf) - end} trailing bytes")
        return obj

    @classmethod
    def decode_from(cls, buf: p.Buffer, version: int, pos: int = 0) -> tuple[Self, int]:
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


R = TypeVar("R", bound="Response")


class Request(Message, Generic[R]):
    """A request; its stub names the response it is answered with (`ProduceRequest(Request[ProduceResponse])`)."""

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
    request: type[Request[Any]]
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
