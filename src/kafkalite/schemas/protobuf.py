"""Protobuf schemas: `.proto` text through proto-schema-parser, or a base64 FileDescriptorProto as
confluent-kafka's serializer registers it; both become a FileDescriptorProto (the `serialized` format),
payloads are checked with the protobuf runtime, and Confluent's Protobuf compatibility rules apply.
"""

from __future__ import annotations

import base64
import binascii
import functools
from typing import Any

from antlr4.error.ErrorListener import ErrorListener
from google.protobuf import (
    any_pb2,
    api_pb2,
    descriptor_pb2,
    descriptor_pool,
    duration_pb2,
    empty_pb2,
    field_mask_pb2,
    message_factory,
    source_context_pb2,
    struct_pb2,
    timestamp_pb2,
    type_pb2,
    wrappers_pb2,
)
from google.protobuf.message import DecodeError
from proto_schema_parser import ast
from proto_schema_parser.parser import Parser

from kafkalite.schemas.model import PROTOBUF, Incompatibility, ParsedSchema, invalid_schema

FDP = descriptor_pb2.FileDescriptorProto
# google/protobuf/*.proto: importable by every schema without a reference (as confluent-kafka does)
_WELL_KNOWN = (
    descriptor_pb2, any_pb2, source_context_pb2, type_pb2, api_pb2, duration_pb2, empty_pb2,
    field_mask_pb2, struct_pb2, timestamp_pb2, wrappers_pb2,
)  # fmt: skip
FieldProto = descriptor_pb2.FieldDescriptorProto
_SCALARS = {
    name: getattr(FieldProto, "TYPE_" + name.upper())
    for name in ("double", "float", "int64", "uint64", "int32", "fixed64", "fixed32", "bool",
                 "string", "bytes", "uint32", "sfixed32", "sfixed64", "sint32", "sint64")
}  # fmt: skip
# scalar types whose wire encodings are interchangeable (Protobuf's "compatible types")
_WIRE_GROUPS = [
    {FieldProto.TYPE_INT32, FieldProto.TYPE_UINT32, FieldProto.TYPE_INT64,
     FieldProto.TYPE_UINT64, FieldProto.TYPE_BOOL},
    {FieldProto.TYPE_SINT32, FieldProto.TYPE_SINT64},
    {FieldProto.TYPE_FIXED32, FieldProto.TYPE_SFIXED32},
    {FieldProto.TYPE_FIXED64, FieldProto.TYPE_SFIXED64},
    {FieldProto.TYPE_STRING, FieldProto.TYPE_BYTES},
]  # fmt: skip


class _SyntaxErrors(ErrorListener):  # type: ignore[misc]
    """Turns the .proto grammar's first syntax error into an exception (ANTLR would recover)."""

    def syntaxError(
        self, recognizer: Any, symbol: Any, line: int, column: int, msg: str, e: Any
    ) -> None:
        raise ValueError(f"line {line}:{column} {msg}")


def _strict(recognizer: Any) -> None:
    recognizer.removeErrorListeners()
    recognizer.addErrorListener(_SyntaxErrors())


def _decode_descriptor(text: str) -> Any:
    stripped = text.strip()
    if not stripped or any(c.isspace() for c in stripped) or "{" in stripped or ";" in stripped:
        return None
    try:
        raw = base64.b64decode(stripped, validate=True)
        fdp = FDP.FromString(raw)
    except (binascii.Error, DecodeError, ValueError):
        return None
    return fdp


class ProtobufSchema:
    """One Protobuf file: its FileDescriptorProto and the files its references name."""

    schema_type = PROTOBUF
    fdp: Any  # the FileDescriptorProto

    def __init__(
        self, text: str, references: dict[str, str] | None = None, name: str = "schema.proto"
    ) -> None:
        fdp = _decode_descriptor(text)
        self.from_descriptor = fdp is not None
        if fdp is None:
            try:
                tree = Parser(setup_lexer=_strict, setup_parser=_strict).parse(text)
            except Exception as exc:
                raise invalid_schema(f"{text[:200]}, details: {str(exc)[:300]}") from None
            known = dict(_well_known_names())
            for ref_name, ref_text in (references or {}).items():
                known.update(_type_names(ProtobufSchema(ref_text, name=ref_name).fdp))
            fdp = _to_descriptor(tree, name, known)
        if not fdp.message_type and not fdp.enum_type:
            raise invalid_schema(f"{text[:200]}, details: no message or enum is defined")
        self.fdp = fdp
        self.references = references or {}
        self.text = text
        self._pool: Any = None

    def canonical(self) -> str:
        return base64.b64encode(self.fdp.SerializeToString(deterministic=True)).decode("ascii")

    def normalized(self) -> str:
        return self.canonical()

    def record_name(self, payload: bytes | None = None) -> str | None:
        try:
            indexes = _message_indexes(payload)[0] if payload else [0]
            message = self.fdp.message_type[indexes[0]]
            name = message.name
            for i in indexes[1:]:
                message = message.nested_type[i]
                name += "." + message.name
        except (IndexError, ValueError):
            return None
        return f"{self.fdp.package}.{name}" if self.fdp.package else name

    def formatted(self, fmt: str) -> str | None:
        """`serialized`: the base64 descriptor; otherwise `.proto` text (a schema registered as a
        descriptor is printed from it; one registered as text is answered as it was given)."""
        if fmt == "serialized":
            return self.canonical()
        if self.from_descriptor:
            return to_proto_text(self.fdp)
        return None

    # -- payloads ------------------------------------------------------------------------------------
    def _message_class(self, indexes: list[int]) -> Any:
        if self._pool is None:
            pool = descriptor_pool.DescriptorPool()
            loaded = set()
            for module in _WELL_KNOWN:
                pool.AddSerializedFile(module.DESCRIPTOR.serialized_pb)
                loaded.add(module.DESCRIPTOR.name)
            for ref_name, ref in self.references.items():  # (dependencies first)
                ref_fdp = ProtobufSchema(ref, name=ref_name).fdp
                if ref_fdp.name not in loaded:
                    pool.Add(ref_fdp)
                    loaded.add(ref_fdp.name)
            pool.Add(self.fdp)
            self._pool = pool
        fd = self._pool.FindFileByName(self.fdp.name)
        desc = fd.message_types_by_name[self.fdp.message_type[indexes[0]].name]
        for i in indexes[1:]:
            desc = desc.nested_types[i]
        return message_factory.GetMessageClass(desc)

    def validate(self, payload: bytes) -> str | None:
        try:
            indexes, pos = _message_indexes(payload)
            cls = self._message_class(indexes)
            msg = cls()
            msg.ParseFromString(payload[pos:])
        except (DecodeError, IndexError, KeyError, ValueError, TypeError) as exc:
            return f"the Protobuf payload does not match the schema: {exc!s:.200}"
        return None

    # -- compatibility ------------------------------------------------------------------------------
    def can_read(self, writer: ParsedSchema) -> list[Incompatibility]:
        if not isinstance(writer, ProtobufSchema):
            return [Incompatibility("TYPE_CHANGED", "the other schema is not Protobuf")]
        out: list[Incompatibility] = []
        mine, theirs = _messages(self.fdp), _messages(writer.fdp)
        for name, wfields in theirs.items():
            rfields = mine.get(name)
            if rfields is None:
                out.append(Incompatibility("MESSAGE_REMOVED", f"message {name} was removed", name))
                continue
            for number, wf in wfields.items():
                rf = rfields.get(number)
                if rf is None:
                    if wf.label == FieldProto.LABEL_REQUIRED:
                        out.append(_field("REQUIRED_FIELD_REMOVED", name, wf))
                    continue
                _compare_field(name, rf, wf, out)
            for number, rf in rfields.items():
                if number not in wfields and rf.label == FieldProto.LABEL_REQUIRED:
                    out.append(_field("REQUIRED_FIELD_ADDED", name, rf))
        return out


def _field(kind: str, message: str, f: Any) -> Incompatibility:
    return Incompatibility(kind, f"field {f.name} (number {f.number}) of {message}", message)


def _compare_field(message: str, rf: Any, wf: Any, out: list[Incompatibility]) -> None:
    repeated = (rf.label == FieldProto.LABEL_REPEATED, wf.label == FieldProto.LABEL_REPEATED)
    if repeated[0] != repeated[1]:
        out.append(_field("FIELD_KIND_CHANGED", message, rf))
        return
    named = (FieldProto.TYPE_MESSAGE, FieldProto.TYPE_ENUM, FieldProto.TYPE_GROUP)
    if rf.type in named or wf.type in named:
        if rf.type != wf.type:
            out.append(_field("FIELD_KIND_CHANGED", message, rf))
        elif rf.type_name.lstrip(".") != wf.type_name.lstrip("."):
            out.append(_field("FIELD_NAMED_TYPE_CHANGED", message, rf))
        return
    if rf.type != wf.type and not any(rf.type in g and wf.type in g for g in _WIRE_GROUPS):
        out.append(_field("FIELD_SCALAR_KIND_CHANGED", message, rf))


def _messages(fdp: Any) -> dict[str, dict[int, Any]]:
    out: dict[str, dict[int, Any]] = {}

    def walk(prefix: str, messages: Any) -> None:
        for m in messages:
            full = f"{prefix}{m.name}"
            out[full] = {f.number: f for f in m.field}
            walk(full + ".", m.nested_type)

    walk(f"{fdp.package}." if fdp.package else "", fdp.message_type)
    return out


def _message_indexes(payload: bytes) -> tuple[list[int], int]:
    """Confluent's framing after the schema id: a zigzag-varint count and that many indexes
    (a lone 0 byte is [0])."""
    pos = 0

    def varint() -> int:
        nonlocal pos
        shift = result = 0
        while True:
            b = payload[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                break
            shift += 7
        return (result >> 1) ^ -(result & 1)

    count = varint()
    if count == 0:
        return [0], pos
    if not 0 < count < 64:
        raise ValueError(f"bad message-index count {count}")
    return [varint() for _ in range(count)], pos


# -- .proto text -> FileDescriptorProto -------------------------------------------------------------


def _type_names(fdp: Any) -> dict[str, int]:
    """Every message and enum a file defines, by full name, as a field's type would name it."""
    out: dict[str, int] = {}

    def walk(prefix: str, messages: Any, enums: Any) -> None:
        for e in enums:
            out[prefix + e.name] = FieldProto.TYPE_ENUM
        for m in messages:
            out[prefix + m.name] = FieldProto.TYPE_MESSAGE
            walk(prefix + m.name + ".", m.nested_type, m.enum_type)

    walk(f"{fdp.package}." if fdp.package else "", fdp.message_type, fdp.enum_type)
    return out


@functools.cache
def _well_known_names() -> dict[str, int]:
    out: dict[str, int] = {}
    for module in _WELL_KNOWN:
        out.update(_type_names(FDP.FromString(module.DESCRIPTOR.serialized_pb)))
    return out


def _to_descriptor(tree: ast.File, name: str, imported: dict[str, int]) -> Any:
    fdp = FDP(name=name, syntax=tree.syntax or "proto2")
    package = ""
    for el in tree.file_elements:
        if isinstance(el, ast.Package):
            package = el.name
            fdp.package = el.name
        elif isinstance(el, ast.Import):
            fdp.dependency.append(el.name)
    enums: set[str] = set()
    messages: set[str] = set()

    def collect(prefix: str, elements: Any) -> None:
        for el in elements:
            if isinstance(el, ast.Message):
                messages.add(prefix + el.name)
                collect(prefix + el.name + ".", el.elements)
            elif isinstance(el, ast.Enum):
                enums.add(prefix + el.name)

    base = f"{package}." if package else ""
    collect(base, tree.file_elements)

    def resolve(scope: str, name: str) -> tuple[int, str]:
        if name.startswith("."):
            full = name[1:]
            return (FieldProto.TYPE_ENUM if full in enums else FieldProto.TYPE_MESSAGE), name
        parts = scope.rstrip(".").split(".") if scope.rstrip(".") else []
        for i in range(len(parts), -1, -1):
            candidate = ".".join([*parts[:i], name])
            if candidate in enums:
                return FieldProto.TYPE_ENUM, "." + candidate
            if candidate in messages:
                return FieldProto.TYPE_MESSAGE, "." + candidate
            if candidate in imported:
                return imported[candidate], "." + candidate
        return FieldProto.TYPE_MESSAGE, "." + name  # (unknown: the pool will say so)

    def add_field(msg: Any, scope: str, f: Any, oneof: int | None, proto3: bool) -> None:
        fp = msg.field.add(name=f.name, number=f.number, json_name=_json_name(f.name))
        card = getattr(f.cardinality, "value", None)
        fp.label = {
            "REPEATED": FieldProto.LABEL_REPEATED,
            "REQUIRED": FieldProto.LABEL_REQUIRED,
        }.get(card or "", FieldProto.LABEL_OPTIONAL)
        if f.type in _SCALARS:
            fp.type = _SCALARS[f.type]
        else:
            fp.type, fp.type_name = resolve(scope, f.type)
        if oneof is not None:
            fp.oneof_index = oneof
        elif proto3 and card == "OPTIONAL":
            fp.proto3_optional = True
            fp.oneof_index = len(msg.oneof_decl)
            msg.oneof_decl.add(name=f"_{f.name}")

    def build_message(msg: Any, scope: str, m: ast.Message, proto3: bool) -> None:
        msg.name = m.name
        inner = f"{scope}{m.name}."
        for el in m.elements:
            if isinstance(el, ast.Field):
                add_field(msg, inner, el, None, proto3)
            elif isinstance(el, ast.OneOf):
                idx = len(msg.oneof_decl)
                msg.oneof_decl.add(name=el.name)
                for f in el.elements:
                    if isinstance(f, ast.Field):
                        add_field(msg, inner, f, idx, proto3)
            elif isinstance(el, ast.MapField):
                entry = msg.nested_type.add(name=_map_entry(el.name))
                entry.options.map_entry = True
                key = ast.Field(name="key", number=1, type=el.key_type)
                value = ast.Field(name="value", number=2, type=el.value_type)
                add_field(entry, inner, key, None, False)
                add_field(entry, inner, value, None, False)
                fp = msg.field.add(name=el.name, number=el.number, json_name=_json_name(el.name))
                fp.label = FieldProto.LABEL_REPEATED
                fp.type = FieldProto.TYPE_MESSAGE
                fp.type_name = f".{inner}{entry.name}"
            elif isinstance(el, ast.Message):
                build_message(msg.nested_type.add(), inner, el, proto3)
            elif isinstance(el, ast.Enum):
                build_enum(msg.enum_type.add(), el)

    def build_enum(en: Any, e: ast.Enum) -> None:
        en.name = e.name
        for v in e.elements:
            if isinstance(v, ast.EnumValue):
                en.value.add(name=v.name, number=v.number)

    proto3 = fdp.syntax == "proto3"
    for el in tree.file_elements:
        if isinstance(el, ast.Message):
            build_message(fdp.message_type.add(), base, el, proto3)
        elif isinstance(el, ast.Enum):
            build_enum(fdp.enum_type.add(), el)
    return fdp


def _json_name(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def _map_entry(name: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in name.split("_")) + "Entry"


# -- FileDescriptorProto -> .proto text ------------------------------------------------------------

_LABELS = {FieldProto.LABEL_REPEATED: "repeated ", FieldProto.LABEL_REQUIRED: "required "}
_TYPE_NAMES = {number: name for name, number in _SCALARS.items()}


def to_proto_text(fdp: Any) -> str:
    """The `.proto` text of a file descriptor: syntax, package, imports, messages (fields, oneofs,
    maps, nested messages and enums) and enums; options other than map entries are left out."""
    out = [f'syntax = "{fdp.syntax or "proto2"}";']
    if fdp.package:
        out.append(f"package {fdp.package};")
    out += [f'import "{dep}";' for dep in fdp.dependency]
    for e in fdp.enum_type:
        out += _enum_text(e, "")
    for m in fdp.message_type:
        out += _message_text(m, "", fdp.syntax == "proto3")
    return "\n".join(out) + "\n"


def _enum_text(e: Any, indent: str) -> list[str]:
    return [
        f"{indent}enum {e.name} {{",
        *[f"{indent}  {v.name} = {v.number};" for v in e.value],
        f"{indent}}}",
    ]


def _field_type(f: Any) -> str:
    if f.type in (FieldProto.TYPE_MESSAGE, FieldProto.TYPE_ENUM, FieldProto.TYPE_GROUP):
        return str(f.type_name)
    return _TYPE_NAMES.get(f.type, "bytes")


def _message_text(m: Any, indent: str, proto3: bool) -> list[str]:
    inner = indent + "  "
    maps = {n.name: n for n in m.nested_type if n.options.map_entry}
    out = [f"{indent}message {m.name} {{"]
    oneofs: dict[int, list[Any]] = {}
    for f in m.field:
        if f.HasField("oneof_index") and not f.proto3_optional:
            oneofs.setdefault(f.oneof_index, []).append(f)
            continue
        entry = (
            maps.get(f.type_name.rsplit(".", 1)[-1]) if f.type == FieldProto.TYPE_MESSAGE else None
        )
        if entry is not None and f.label == FieldProto.LABEL_REPEATED:
            key, value = entry.field[0], entry.field[1]
            out.append(
                f"{inner}map<{_field_type(key)}, {_field_type(value)}> {f.name} = {f.number};"
            )
            continue
        label = (
            "optional "
            if f.proto3_optional
            else _LABELS.get(f.label, "" if proto3 else "optional ")
        )
        out.append(f"{inner}{label}{_field_type(f)} {f.name} = {f.number};")
    for index, fields in sorted(oneofs.items()):
        out.append(f"{inner}oneof {m.oneof_decl[index].name} {{")
        out += [f"{inner}  {_field_type(f)} {f.name} = {f.number};" for f in fields]
        out.append(f"{inner}}}")
    for n in m.nested_type:
        if not n.options.map_entry:
            out += _message_text(n, inner, proto3)
    for e in m.enum_type:
        out += _enum_text(e, inner)
    out.append(f"{indent}}}")
    return out
