"""The formats' pure rules: Avro schema resolution, JSON Schema and Protobuf compatibility, canonical
forms, payload checks and the compatibility levels' choice of versions and direction.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("fastavro")

from kafkalite.schemas import compatibility
from kafkalite.schemas.avro import AvroSchema
from kafkalite.schemas.formats import parse
from kafkalite.schemas.json_schema import JsonSchema
from kafkalite.schemas.model import RegistryError
from kafkalite.schemas.protobuf import ProtobufSchema


def avro(fields: list[dict[str, object]], name: str = "R") -> AvroSchema:
    return AvroSchema(json.dumps({"type": "record", "name": name, "fields": fields}))


def kinds(reasons: list) -> list[str]:  # type: ignore[type-arg]
    return [r.error_type for r in reasons]


def test_avro_resolution_rules() -> None:
    v1 = avro([{"name": "a", "type": "int"}])
    added_default = avro([{"name": "a", "type": "int"}, {"name": "b", "type": "string", "default": ""}])  # fmt: skip
    added_required = avro([{"name": "a", "type": "int"}, {"name": "b", "type": "string"}])
    promoted = avro([{"name": "a", "type": "long"}])
    assert added_default.can_read(v1) == []
    assert kinds(added_required.can_read(v1)) == ["READER_FIELD_MISSING_DEFAULT_VALUE"]
    assert promoted.can_read(v1) == []  # int -> long is a promotion
    assert kinds(v1.can_read(promoted)) == ["TYPE_MISMATCH"]
    assert kinds(avro([{"name": "a", "type": "int"}], name="S").can_read(v1)) == ["NAME_MISMATCH"]


def test_avro_unions_enums_and_recursion() -> None:
    opt = avro([{"name": "a", "type": ["null", "int"], "default": None}])
    plain = avro([{"name": "a", "type": "int"}])
    assert opt.can_read(plain) == []
    assert kinds(plain.can_read(opt)) == ["TYPE_MISMATCH"]  # the null branch cannot be read
    e1 = AvroSchema(json.dumps({"type": "enum", "name": "E", "symbols": ["A", "B"]}))
    e2 = AvroSchema(json.dumps({"type": "enum", "name": "E", "symbols": ["A"]}))
    assert kinds(e2.can_read(e1)) == ["MISSING_ENUM_SYMBOLS"]
    assert e1.can_read(e2) == []
    node = {"type": "record", "name": "Node", "fields": [{"name": "next", "type": ["null", "Node"]}]}  # fmt: skip
    assert AvroSchema(json.dumps(node)).can_read(AvroSchema(json.dumps(node))) == []


def test_avro_canonical_form_and_fingerprint() -> None:
    a = AvroSchema('{"type": "record", "name": "R", "doc": "x", "fields": [{"name": "a", "type": "int"}]}')  # fmt: skip
    b = AvroSchema('{"name":"R","type":"record","fields":[{"type":"int","name":"a"}]}')
    assert a.fingerprint() == b.fingerprint() and a.canonical_form == b.canonical_form
    assert a.canonical() != b.canonical()  # without normalize, the text as given (compacted)
    c = AvroSchema('{"fields":[{"type":"int","name":"a"}],"doc":"x","name":"R","type":"record"}')
    assert c.normalized() == a.normalized() and '"doc":"x"' in c.normalized()
    assert a.validate(b"\x02") is None  # zigzag 1
    assert a.validate(b"") is not None and a.validate(b"\x02\x02") is not None


@pytest.mark.parametrize(
    "schema_type,text",
    [
        ("AVRO", '{"type": "recrd", "name": "x"}'),
        ("AVRO", "{not json"),
        ("AVRO", '{"type": "record", "name": "R", "fields": [{"name": "a", "type": "Missing"}]}'),
        ("JSON", '{"type": 12}'),
        ("JSON", "[]"),
        ("PROTOBUF", "message M { int32 a = ; }"),
        ("PROTOBUF", 'syntax = "proto3";'),
    ],
)
def test_invalid_schemas_are_42201(schema_type: str, text: str) -> None:
    with pytest.raises(RegistryError) as err:
        parse(schema_type, text)
    assert err.value.error_code == 42201 and err.value.status == 422


def test_unknown_type_is_422() -> None:
    with pytest.raises(RegistryError) as err:
        parse("XML", "<a/>")
    assert err.value.error_code == 422


def test_json_schema_rules() -> None:
    closed = {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": False}  # fmt: skip
    closed_more = {**closed, "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}}
    open_ = {"type": "object", "properties": {"a": {"type": "string"}}}
    open_more = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}}  # fmt: skip
    j = lambda s: JsonSchema(json.dumps(s))  # noqa: E731
    assert j(closed_more).can_read(j(closed)) == []  # a new optional property, closed model
    assert kinds(j(open_more).can_read(j(open_))) == ["PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL"]
    required = {**open_, "required": ["a"]}
    assert "REQUIRED_ATTRIBUTE_ADDED" in kinds(j(required).can_read(j(open_)))
    assert kinds(j({"type": "integer"}).can_read(j({"type": "string"}))) == ["TYPE_CHANGED"]
    assert j({"type": "number"}).can_read(j({"type": "integer"})) == []
    assert kinds(j({"type": "string", "maxLength": 3}).can_read(j({"type": "string"}))) == [
        "MAX_LENGTH_DECREASED"
    ]
    assert j(required).validate(b'{"a": "x"}') is None
    assert j(required).validate(b"{}") is not None and j(required).validate(b"nope") is not None


def test_protobuf_rules_and_descriptor_form() -> None:
    v1 = ProtobufSchema('syntax = "proto3"; package p; message M { int32 a = 1; string b = 2; }')
    renamed = ProtobufSchema('syntax = "proto3"; package p; message M { int32 x = 1; string b = 2; }')  # fmt: skip
    widened = ProtobufSchema('syntax = "proto3"; package p; message M { int64 a = 1; bytes b = 2; }')  # fmt: skip
    repeated = ProtobufSchema('syntax = "proto3"; package p; message M { repeated int32 a = 1; }')
    other = ProtobufSchema('syntax = "proto3"; package p; message N { int32 a = 1; }')
    assert renamed.can_read(v1) == [] and widened.can_read(v1) == []
    assert kinds(repeated.can_read(v1)) == ["FIELD_KIND_CHANGED"]
    assert kinds(other.can_read(v1)) == ["MESSAGE_REMOVED"]
    serialized = v1.formatted("serialized")
    assert serialized is not None
    assert ProtobufSchema(serialized).canonical() == v1.canonical()
    assert v1.record_name() == "p.M"
    assert v1.validate(b"\x00\x08\x01") is None  # indexes [0], a = 1
    assert v1.validate(b"\x00\xff") is not None


def test_levels_pick_versions_and_direction() -> None:
    v1 = avro([{"name": "a", "type": "int"}])
    v2 = avro([{"name": "a", "type": "int"}, {"name": "b", "type": "int", "default": 0}])
    v3 = avro([{"name": "b", "type": "int", "default": 0}])  # drops a (no default in v1)
    history = [(1, v1), (2, v2)]
    assert compatibility.check("BACKWARD", v3, history) == []  # v3 reads v2's data
    assert compatibility.check("NONE", v3, history) == []
    assert [v for v, _ in compatibility.check("FORWARD", v3, history)] == [2]
    assert [v for v, _ in compatibility.check("FULL_TRANSITIVE", v3, history)] == [2, 1]
    assert [v for v, _ in compatibility.check("FORWARD_TRANSITIVE", v3, history)] == [2, 1]


def test_protobuf_references_and_well_known_imports() -> None:
    from google.protobuf import descriptor_pool, message_factory

    money = 'syntax = "proto3"; package shop; message Money { int64 cents = 1; }'
    order = (
        'syntax = "proto3"; package shop; import "money.proto"; '
        'import "google/protobuf/timestamp.proto"; '
        "message Order { Money total = 1; google.protobuf.Timestamp at = 2; }"
    )
    parsed = ProtobufSchema(order, {"money.proto": money})
    pool = descriptor_pool.DescriptorPool()
    from google.protobuf import timestamp_pb2

    pool.AddSerializedFile(timestamp_pb2.DESCRIPTOR.serialized_pb)
    pool.Add(ProtobufSchema(money, name="money.proto").fdp)
    pool.Add(parsed.fdp)
    cls = message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))
    msg = cls()
    msg.total.cents = 250
    msg.at.seconds = 10
    assert parsed.validate(b"\x00" + msg.SerializeToString()) is None
    assert parsed.validate(b"\x00\x0a\xff") is not None


def test_protobuf_record_name_follows_the_message_indexes() -> None:
    nested = ProtobufSchema(
        'syntax = "proto3"; package p; message A { int32 x = 1; } '
        "message B { message C { int32 y = 1; } C c = 1; }"
    )
    assert nested.record_name() == "p.A"
    assert nested.record_name(b"\x00") == "p.A"  # [0]
    assert nested.record_name(b"\x02\x02") == "p.B"  # [1]
    assert nested.record_name(b"\x04\x02\x00") == "p.B.C"  # [1, 0]
    assert nested.record_name(b"\x02\x08") is None  # [4]: no such message


def test_protobuf_descriptor_printed_as_proto_text() -> None:
    text = (
        'syntax = "proto3"; package p; import "google/protobuf/timestamp.proto"; '
        "enum Kind { A = 0; B = 1; } "
        "message M { int32 a = 1; repeated string tags = 2; map<string, int64> counts = 3; "
        "oneof pick { string s = 4; bytes b = 5; } optional bool flag = 6; "
        "google.protobuf.Timestamp at = 7; Kind kind = 8; message N { sint64 z = 1; } N n = 9; }"
    )
    original = ProtobufSchema(text)
    as_descriptor = ProtobufSchema(original.canonical())
    printed = as_descriptor.formatted("")
    assert printed is not None and "map<string, int64> counts = 3;" in printed
    reparsed = ProtobufSchema(printed)
    assert reparsed.can_read(original) == [] and original.can_read(reparsed) == []
    assert original.formatted("") is None  # registered as text: answered as given


def test_json_schema_references_resolve_by_name() -> None:
    address = json.dumps({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})  # fmt: skip
    person = json.dumps({"type": "object", "properties": {"home": {"$ref": "address.json"}}})
    parsed = JsonSchema(person, {"address.json": address})
    assert parsed.validate(b'{"home": {"city": "Oslo"}}') is None
    assert parsed.validate(b'{"home": {"city": 5}}') is not None
