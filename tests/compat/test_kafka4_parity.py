"""Kafka 4 protocol parity through real clients: ListOffsets max-timestamp, incremental APPEND/SUBTRACT,
ListGroups filters, record-level produce errors and Metadata's allow_auto_topic_creation."""

from __future__ import annotations

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec  # noqa: E402

pytestmark = pytest.mark.compat


def _create(bs: str, topic: str, **config: str) -> None:
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(30)


def test_list_offsets_max_timestamp_names_the_record(broker, topic):
    """KAFKA-16310: the largest timestamp sits mid-batch; librdkafka's OffsetSpec.max_timestamp
    (ListOffsets v7+) gets that record's offset, not the batch's last."""
    _create(broker.bootstrap_servers, topic)
    p = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 200})
    for ts in (1_000, 50_000, 2_000, 3_000):
        p.produce(topic, value=b"v", timestamp=1_700_000_000_000 + ts)
    assert p.flush(30) == 0
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    tp = TopicPartition(topic, 0)
    res = admin.list_offsets({tp: OffsetSpec.max_timestamp()})[tp].result(30)
    assert (res.offset, res.timestamp) == (1, 1_700_000_050_000)
    latest = admin.list_offsets({tp: OffsetSpec.latest()})[tp].result(30)
    assert latest.offset == 4
