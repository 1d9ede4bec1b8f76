"""The Schema Registry against confluent-kafka's own client and serializers (nothing of ours on the
client side): Avro, JSON Schema and Protobuf round trips through a real topic, auto-registration,
use.latest.version, 409 under BACKWARD, soft and permanent deletes, references, replay, bad input.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
pytest.importorskip("fastavro")
from confluent_kafka import Consumer, Producer  # noqa: E402
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient  # noqa: E402
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer  # noqa: E402
from confluent_kafka.schema_registry.error import SchemaRegistryError  # noqa: E402
from confluent_kafka.schema_registry.json_schema import (  # noqa: E402
    JSONDeserializer,
    JSONSerializer,
)
from confluent_kafka.serialization import MessageField, SerializationContext  # noqa: E402

from kafkalite.testing import Broker  # noqa: E402

pytestmark = pytest.mark.compat

USER_V1 = {"type": "record", "name": "User", "namespace": "t", "fields": [{"name": "name", "type": "string"}]}  # fmt: skip
USER_V2_BAD = {**USER_V1, "fields": [*USER_V1["fields"], {"name": "age", "type": "int"}]}
USER_V2_OK = {**USER_V1, "fields": [*USER_V1["fields"], {"name": "age", "type": "int", "default": 0}]}  # fmt: skip


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    with Broker(tmp_path_factory.mktemp("schemas"), config={"http.listeners": "http://127.0.0.1:0"}) as b:  # fmt: skip
        yield b


@pytest.fixture()
def client(broker: Broker) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": broker.http_url})


def _subject() -> str:
    return f"s-{uuid.uuid4().hex[:8]}"


def _roundtrip(broker: Broker, topic: str, values: list[bytes]) -> list[bytes]:
    p = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for v in values:
        p.produce(topic, v)
    assert p.flush(30) == 0
    c = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": f"g-{topic}",
            "auto.offset.reset": "earliest",
        }
    )
    c.subscribe([topic])
    out: list[bytes] = []
    try:
        while len(out) < len(values):
            m = c.poll(10)
            assert m is not None, f"only {len(out)} of {len(values)} records came back"
            assert m.error() is None, m.error()
            out.append(m.value())
    finally:
        c.close()
    return out


def http(broker: Broker, method: str, path: str, body: bytes | None = None, ctype: str = "application/vnd.schemaregistry.v1+json") -> tuple[int, Any]:  # fmt: skip
    req = urllib.request.Request(broker.http_url + path, data=body, method=method)
    req.add_header("Content-Type", ctype)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            assert resp.headers["Content-Type"].startswith("application/vnd.schemaregistry.v1+json")
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_avro_round_trip_with_auto_registration(
    broker: Broker, client: SchemaRegistryClient
) -> None:
    topic = f"avro-{uuid.uuid4().hex[:6]}"
    ser = AvroSerializer(client, json.dumps(USER_V1))
    de = AvroDeserializer(client)
    ctx = SerializationContext(topic, MessageField.VALUE)
    records = [{"name": f"u{i}"} for i in range(5)]
    raw = _roundtrip(broker, topic, [ser(r, ctx) for r in records])
    fresh = AvroDeserializer(SchemaRegistryClient({"url": broker.http_url}))
    assert [fresh(v, ctx) for v in raw] == records
    assert [de(v, ctx) for v in raw] == records
    latest = client.get_latest_version(f"{topic}-value")
    assert latest.version == 1 and json.loads(latest.schema.schema_str) == USER_V1
    assert raw[0][0] == 0 and int.from_bytes(raw[0][1:5], "big") == latest.schema_id


def test_use_latest_version(broker: Broker, client: SchemaRegistryClient) -> None:
    topic = f"latest-{uuid.uuid4().hex[:6]}"
    client.register_schema(f"{topic}-value", Schema(json.dumps(USER_V1), "AVRO"))
    v2 = client.register_schema(f"{topic}-value", Schema(json.dumps(USER_V2_OK), "AVRO"))
    ser = AvroSerializer(
        client,
        json.dumps(USER_V2_OK),
        conf={"auto.register.schemas": False, "use.latest.version": True},
    )
    ctx = SerializationContext(topic, MessageField.VALUE)
    blob = ser({"name": "x", "age": 3}, ctx)
    assert int.from_bytes(blob[1:5], "big") == v2
    assert AvroDeserializer(client)(blob, ctx) == {"name": "x", "age": 3}


def test_backward_refuses_and_none_accepts(client: SchemaRegistryClient) -> None:
    subject = _subject()
    first = client.register_schema(subject, Schema(json.dumps(USER_V1), "AVRO"))
    with pytest.raises(SchemaRegistryError) as err:
        client.register_schema(subject, Schema(json.dumps(USER_V2_BAD), "AVRO"))
    assert err.value.http_status_code == 409 and err.value.error_code == 409
    assert "READER_FIELD_MISSING_DEFAULT_VALUE" in err.value.error_message
    assert not client.test_compatibility(subject, Schema(json.dumps(USER_V2_BAD), "AVRO"))
    assert client.test_compatibility(subject, Schema(json.dumps(USER_V2_OK), "AVRO"))
    client.set_compatibility(subject, "NONE")
    assert client.get_compatibility(subject) == "NONE"
    second = client.register_schema(subject, Schema(json.dumps(USER_V2_BAD), "AVRO"))
    assert second > first and client.get_versions(subject) == [1, 2]
    # the same schema again: the same id, no new version
    assert client.register_schema(subject, Schema(json.dumps(USER_V2_BAD), "AVRO")) == second
    assert client.get_versions(subject) == [1, 2]


def test_soft_and_permanent_deletes(broker: Broker, client: SchemaRegistryClient) -> None:
    subject = _subject()
    own = {**USER_V1, "name": f"Gone{subject.replace('-', '')}"}  # used by this subject only
    sid = client.register_schema(subject, Schema(json.dumps(own), "AVRO"))
    client.set_compatibility(subject, "NONE")
    client.register_schema(subject, Schema(json.dumps(USER_V2_BAD), "AVRO"))
    with pytest.raises(SchemaRegistryError) as err:
        client.delete_version(subject, 1, permanent=True)
    assert err.value.error_code == 40407  # soft delete first
    assert client.delete_version(subject, 1) == 1
    assert client.get_versions(subject) == [2]
    assert http(broker, "GET", f"/subjects/{subject}/versions?deleted=true")[1] == [1, 2]
    assert client.delete_version(subject, 1, permanent=True) == 1
    assert client.delete_subject(subject) == [2]
    assert subject not in client.get_subjects()
    status, body = http(broker, "GET", f"/subjects/{subject}/versions")
    assert status == 404 and body["error_code"] == 40401
    assert client.delete_subject(subject, permanent=True) == [2]
    assert http(broker, "GET", f"/subjects/{subject}/versions?deleted=true")[0] == 404
    # a schema no subject uses any more is gone, and its id is never handed out again
    status, body = http(broker, "GET", f"/schemas/ids/{sid}")
    assert status == 404 and body["error_code"] == 40403
    newer = client.register_schema(_subject(), Schema(json.dumps({"type": "string"}), "AVRO"))
    assert newer > sid


def test_references(client: SchemaRegistryClient) -> None:
    address = {"type": "record", "name": "Address", "namespace": "t", "fields": [{"name": "city", "type": "string"}]}  # fmt: skip
    person = {"type": "record", "name": "Person", "namespace": "t", "fields": [{"name": "home", "type": "t.Address"}]}  # fmt: skip
    topic = f"refs-{uuid.uuid4().hex[:6]}"
    addr_subject, person_subject = _subject(), f"{topic}-value"
    client.register_schema(addr_subject, Schema(json.dumps(address), "AVRO"))
    ref = SchemaReference("t.Address", addr_subject, 1)
    pid = client.register_schema(person_subject, Schema(json.dumps(person), "AVRO", [ref]))
    got = SchemaRegistryClient({"url": client._rest_client.base_urls[0]}).get_schema(pid)
    assert [(r.name, r.subject, r.version) for r in got.references] == [
        ("t.Address", addr_subject, 1)
    ]
    assert client.get_referenced_by(addr_subject, 1) == [pid]
    ser = AvroSerializer(
        client,
        Schema(json.dumps(person), "AVRO", [ref]),
        conf={"auto.register.schemas": False, "use.latest.version": True},
    )
    ctx = SerializationContext(topic, MessageField.VALUE)
    blob = ser({"home": {"city": "Oslo"}}, ctx)
    assert int.from_bytes(blob[1:5], "big") == pid
    fresh = SchemaRegistryClient({"url": client._rest_client.base_urls[0]})
    assert AvroDeserializer(fresh)(blob, ctx) == {"home": {"city": "Oslo"}}
    with pytest.raises(SchemaRegistryError) as err:
        client.delete_subject(addr_subject)
    assert err.value.error_code == 42206  # still referenced


def test_json_schema_round_trip(broker: Broker, client: SchemaRegistryClient) -> None:
    topic = f"json-{uuid.uuid4().hex[:6]}"
    schema = {"type": "object", "properties": {"id": {"type": "integer"}, "tag": {"type": "string"}}, "required": ["id"]}  # fmt: skip
    ser = JSONSerializer(json.dumps(schema), client)
    ctx = SerializationContext(topic, MessageField.VALUE)
    records = [{"id": i, "tag": f"t{i}"} for i in range(3)]
    raw = _roundtrip(broker, topic, [ser(r, ctx) for r in records])
    de = JSONDeserializer(
        None, schema_registry_client=SchemaRegistryClient({"url": broker.http_url})
    )
    assert [de(v, ctx) for v in raw] == records
    latest = client.get_latest_version(f"{topic}-value")
    assert latest.schema.schema_type == "JSON"
    narrower = {**schema, "required": ["id", "tag"]}
    with pytest.raises(SchemaRegistryError) as err:
        client.register_schema(f"{topic}-value", Schema(json.dumps(narrower), "JSON"))
    assert err.value.http_status_code == 409


def test_protobuf_round_trip(broker: Broker, client: SchemaRegistryClient) -> None:
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    fdp = descriptor_pb2.FileDescriptorProto(name="order.proto", package="shop", syntax="proto3")
    msg = fdp.message_type.add(name="Order")
    f = descriptor_pb2.FieldDescriptorProto
    msg.field.add(name="id", number=1, type=f.TYPE_INT64, label=f.LABEL_OPTIONAL)
    msg.field.add(name="item", number=2, type=f.TYPE_STRING, label=f.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    order = message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))
    topic = f"proto-{uuid.uuid4().hex[:6]}"
    ser = ProtobufSerializer(order, client, {"use.deprecated.format": False})
    de = ProtobufDeserializer(order, {"use.deprecated.format": False})
    ctx = SerializationContext(topic, MessageField.VALUE)
    records = [order(id=i, item=f"i{i}") for i in range(3)]
    raw = _roundtrip(broker, topic, [ser(r, ctx) for r in records])
    assert [de(v, ctx) for v in raw] == records
    latest = client.get_latest_version(f"{topic}-value")
    assert latest.schema.schema_type == "PROTOBUF"
    # a .proto text that changes a field's kind is refused under BACKWARD
    changed = 'syntax = "proto3"; package shop; message Order { repeated int64 id = 1; string item = 2; }'  # fmt: skip
    with pytest.raises(SchemaRegistryError) as err:
        client.register_schema(f"{topic}-value", Schema(changed, "PROTOBUF"))
    assert err.value.http_status_code == 409 and "FIELD_KIND_CHANGED" in err.value.error_message


def test_state_is_rebuilt_by_replay(broker: Broker, client: SchemaRegistryClient) -> None:
    from kafkalite.broker.coordinators.schema_registry import SchemaRegistryComponent

    subject = _subject()
    sid = client.register_schema(subject, Schema(json.dumps(USER_V1), "AVRO"))
    client.set_compatibility(subject, "FULL")
    fresh = SchemaRegistryComponent(broker.server)
    state = broker.call(fresh.current)
    live = broker.call(broker.server.schema_registry.current)
    assert state.version(subject, "latest").id == sid
    assert state.compatibility(subject) == "FULL"
    assert state.max_id == live.max_id and state.subject_names() == live.subject_names()


def test_bad_input_gets_confluent_codes(broker: Broker, client: SchemaRegistryClient) -> None:
    s = _subject()
    cases = [
        ("POST", f"/subjects/{s}/versions", b'{"schema": "{\\"type\\": \\"recrd\\"}"}', 422, 42201),
        ("POST", f"/subjects/{s}/versions", b'{"schema": "not json"}', 422, 42201),
        ("POST", f"/subjects/{s}/versions", b'{"schema": "{}", "schemaType": "XML"}', 422, 422),
        (
            "POST",
            f"/subjects/{s}/versions",
            b'{"schema": "message {", "schemaType": "PROTOBUF"}',
            422,
            42201,
        ),
        (
            "POST",
            f"/subjects/{s}/versions",
            b'{"schema": "{\\"type\\": 5}", "schemaType": "JSON"}',
            422,
            42201,
        ),
        ("POST", f"/subjects/{s}/versions", b"[1, 2]", 422, 422),
        ("POST", f"/subjects/{s}/versions", b"{oops", 400, 400),
        ("GET", f"/subjects/{s}/versions/zero", None, 422, 42202),
        ("GET", f"/subjects/{s}/versions/1", None, 404, 40401),
        ("GET", "/schemas/ids/999999", None, 404, 40403),
        ("PUT", "/config", b'{"compatibility": "SIDEWAYS"}', 422, 42203),
        ("PUT", "/mode", b'{"mode": "SOMETIMES"}', 422, 42204),
        ("GET", f"/config/{s}", None, 404, 40408),
    ]
    for method, path, body, status, code in cases:
        got = http(broker, method, path, body)
        assert got[0] == status and got[1]["error_code"] == code, (method, path, body, got)
        assert "Traceback" not in got[1]["message"]
    got = http(broker, "POST", f"/subjects/{s}/versions", b'{"schema": "\\"int\\""}', "text/plain")
    assert got[0] == 415 and got[1]["error_code"] == 415
    huge = json.dumps(
        {"schema": json.dumps({"type": "string", "doc": "x" * (9 * 1024 * 1024)})}
    ).encode()
    got = http(broker, "POST", f"/subjects/{s}/versions", huge)
    assert got[0] == 413 and got[1]["error_code"] == 413
    # and the registry still answers
    assert client.get_subjects() is not None


def test_config_mode_and_metadata(broker: Broker, client: SchemaRegistryClient) -> None:
    assert http(broker, "GET", "/config")[1] == {"compatibilityLevel": "BACKWARD"}
    assert http(broker, "GET", "/mode")[1] == {"mode": "READWRITE"}
    assert http(broker, "GET", "/schemas/types")[1] == ["JSON", "PROTOBUF", "AVRO"]
    status, body = http(broker, "GET", "/v1/metadata/id")
    assert status == 200 and body["scope"]["clusters"]["kafka-cluster"] == broker.cluster_id
    s = _subject()
    client.register_schema(s, Schema(json.dumps(USER_V1), "AVRO", metadata=None))
    status, body = http(broker, "GET", f"/subjects/{s}/versions/latest")
    assert set(body) == {"subject", "version", "id", "schema"}
    body = json.dumps({"schema": json.dumps(USER_V2_OK), "metadata": {"properties": {"owner": "a"}}, "ruleSet": {"domainRules": []}})  # fmt: skip
    assert http(broker, "POST", f"/subjects/{s}/versions", body.encode())[0] == 200
    status, got = http(broker, "GET", f"/subjects/{s}/metadata?key=owner&value=a")
    assert (
        status == 200 and got["version"] == 2 and got["metadata"] == {"properties": {"owner": "a"}}
    )
    assert http(broker, "PUT", f"/mode/{s}", b'{"mode": "READONLY"}')[1] == {"mode": "READONLY"}
    got = http(
        broker, "POST", f"/subjects/{s}/versions", json.dumps({"schema": '"string"'}).encode()
    )
    assert got[0] == 422 and got[1]["error_code"] == 42205
    assert http(broker, "DELETE", f"/mode/{s}")[1] == {"mode": "READONLY"}


def test_cli(broker: Broker, capsys: pytest.CaptureFixture[str], tmp_path: Any) -> None:
    from kafkalite.cli.main import main

    s = _subject()
    url = ["--registry-url", broker.http_url]
    path = tmp_path / "user.avsc"
    path.write_text(json.dumps(USER_V1))
    assert main(["schemas", "register", s, "--file", str(path), *url]) == 0
    assert "id " in capsys.readouterr().out
    assert main(["schemas", "list", "--prefix", s, *url]) == 0
    assert capsys.readouterr().out.split() == [s]
    assert main(["schemas", "get", s, "--text-only", *url]) == 0
    assert json.loads(capsys.readouterr().out) == USER_V1
    assert main(["schemas", "compat", s, "--schema", json.dumps(USER_V2_BAD), *url]) == 1
    assert "READER_FIELD_MISSING_DEFAULT_VALUE" in capsys.readouterr().err
    assert main(["schemas", "config", s, "--set", "none", *url]) == 0
    assert main(["schemas", "config", s, *url]) == 0
    assert capsys.readouterr().out.split()[-1] == "NONE"
    assert main(["schemas", "delete", s, *url]) == 0
    assert main(["schemas", "delete", s, "--permanent", *url]) == 0
    assert main(["schemas", "get", s, *url]) == 2
    assert "40401" in capsys.readouterr().err
