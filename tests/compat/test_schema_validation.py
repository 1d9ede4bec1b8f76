"""Validation on produce (issue 33) with confluent-kafka: a topic with confluent.value.schema.validation
refuses a record without a schema id and one with an unknown id (INVALID_RECORD, KIP-467 message) and
accepts the good ones in the same run; RecordNameStrategy and payload validation; configs described.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
pytest.importorskip("fastavro")
from confluent_kafka import KafkaError, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic  # noqa: E402
from confluent_kafka.schema_registry import SchemaRegistryClient  # noqa: E402
from confluent_kafka.schema_registry.avro import AvroSerializer  # noqa: E402
from confluent_kafka.serialization import MessageField, SerializationContext  # noqa: E402

from kafkalite.testing import Broker  # noqa: E402

pytestmark = pytest.mark.compat

RECORD_NAME = "io.confluent.kafka.serializers.subject.RecordNameStrategy"
ORDER = {"type": "record", "name": "Order", "namespace": "shop", "fields": [{"name": "id", "type": "long"}]}  # fmt: skip


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    cfg = {"http.listeners": "http://127.0.0.1:0"}
    with Broker(tmp_path_factory.mktemp("schema-validation"), config=cfg) as b:
        yield b


def _create(broker: Broker, configs: dict[str, str]) -> str:
    topic = f"validated-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    for fut in admin.create_topics([NewTopic(topic, 1, 1, config=configs)]).values():
        fut.result(30)
    return topic


def _send(broker: Broker, topic: str, values: list[bytes | None]) -> list[Any]:
    """Each value in its own batch; the delivery error (None: delivered) of each."""
    p = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0, "retries": 0})
    out: list[Any] = []
    for v in values:
        got: list[Any] = []
        p.produce(topic, v, on_delivery=lambda err, _msg, got=got: got.append(err))
        p.flush(30)
        assert len(got) == 1
        out.append(got[0])
    return out


def test_value_validation_refuses_unframed_and_unknown_ids(broker: Broker) -> None:
    topic = _create(broker, {"confluent.value.schema.validation": "true"})
    client = SchemaRegistryClient({"url": broker.http_url})
    ser = AvroSerializer(client, json.dumps(ORDER))
    good = ser({"id": 7}, SerializationContext(topic, MessageField.VALUE))
    other = client.register_schema(
        f"other-{topic}-value", confluent_kafka.schema_registry.Schema('"string"', "AVRO")
    )
    unknown = b"\x00" + (999_999).to_bytes(4, "big") + b"\x02"
    wrong_subject = b"\x00" + other.to_bytes(4, "big") + b"\x02a"
    errs = _send(broker, topic, [good, b"plain text", unknown, wrong_subject, good, None])
    assert errs[0] is None and errs[4] is None
    for err in (errs[1], errs[2], errs[3], errs[5]):
        assert err is not None and err.code() == KafkaError.INVALID_RECORD, err
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    described = admin.describe_configs([res])[res].result(30)
    assert described["confluent.value.schema.validation"].value == "true"
    assert described["confluent.key.schema.validation"].value == "false"


def test_record_name_strategy_and_payload_validation(broker: Broker) -> None:
    topic = _create(
        broker,
        {
            "confluent.value.schema.validation": "true",
            "confluent.value.subject.name.strategy": RECORD_NAME,
            "kafkalite.schema.payload.validation": "true",
        },
    )
    client = SchemaRegistryClient({"url": broker.http_url})
    from confluent_kafka.schema_registry import record_subject_name_strategy

    ser = AvroSerializer(
        client, json.dumps(ORDER), conf={"subject.name.strategy": record_subject_name_strategy}
    )
    good = ser({"id": 1}, SerializationContext(topic, MessageField.VALUE))
    assert "shop.Order" in client.get_subjects()
    truncated = good[:5]  # the framing is right, the Avro body is not
    errs = _send(broker, topic, [good, truncated])
    assert errs[0] is None
    assert errs[1] is not None and errs[1].code() == KafkaError.INVALID_RECORD


def test_bad_strategy_is_an_invalid_config(broker: Broker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    topic = f"bad-{uuid.uuid4().hex[:6]}"
    fut = admin.create_topics(
        [NewTopic(topic, 1, 1, config={"confluent.value.subject.name.strategy": "Nope"})]
    )[topic]
    with pytest.raises(confluent_kafka.KafkaException) as err:
        fut.result(30)
    assert err.value.args[0].code() == KafkaError.INVALID_CONFIG
