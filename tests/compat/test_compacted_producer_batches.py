"""Compaction of an idempotent producer's batches: the producer's newest batch stays as an empty batch
(as Kafka's cleaner leaves it), and confluent-kafka, kafka-python, aiokafka and our client read past it."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalite.records.batch import iter_batches
from kafkalite.testing import Broker

pytestmark = pytest.mark.compat

EXPECTED = {b"k0": b"new-0", b"k1": b"new-1", b"k2": b"new-2"}


@pytest.fixture(scope="module")
def compacted(broker: Broker) -> str:
    topic = f"cp-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    config = {
        "cleanup.policy": "compact",
        "segment.bytes": "2048",
        "min.cleanable.dirty.ratio": "0",
    }
    admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(30)
    idem = Producer({"bootstrap.servers": broker.bootstrap_servers, "enable.idempotence": True})
    for i in range(3):  # one batch per record: each flushed before the next
        idem.produce(topic, key=b"k%d" % i, value=b"old-%d" % i)
        assert idem.flush(30) == 0
    plain = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    for i in range(3):
        plain.produce(topic, key=b"k%d" % i, value=b"new-%d" % i)
    assert plain.flush(30) == 0
    lg = broker.server.log_manager.get_log(topic, 0)
    for i in range(40):  # roll past the records above, then compact the closed segments
        plain.produce(topic, key=b"k%d" % (i % 3), value=b"new-%d" % (i % 3) + b" " * 200)
        assert plain.flush(30) == 0
    for i in range(3):  # the newest value per key comes last again, in the active segment
        plain.produce(topic, key=b"k%d" % i, value=b"new-%d" % i)
    assert plain.flush(30) == 0
    assert len(lg.segments) > 2
    broker.server.log_manager.run_cleaner_once(force=True)
    return topic


def _batches(broker: Broker, topic: str) -> list:
    lg = broker.server.log_manager.get_log(topic, 0)
    seg = lg.segments[0]
    return list(iter_batches(seg.read_bytes(0, seg.size)))


def test_the_producers_newest_batch_is_kept_empty(broker: Broker, compacted: str) -> None:
    first = _batches(broker, compacted)
    idem = [b for b in first if b.producer_id >= 0]
    assert [(b.base_offset, b.base_sequence, len(b.records)) for b in idem] == [(2, 2, 0)]


def _end(broker: Broker, topic: str) -> int:
    return broker.server.log_manager.get_log(topic, 0).log_end_offset


def test_confluent_reads_past_the_empty_batch(broker: Broker, compacted: str) -> None:
    c = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "cp-ck"})
    c.assign([TopicPartition(compacted, 0, OFFSET_BEGINNING)])
    got: dict[bytes, bytes] = {}
    last = -1
    end = _end(broker, compacted)
    deadline = time.monotonic() + 30
    try:
        while last < end - 1 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got[m.key()] = m.value().rstrip()
                last = m.offset()
    finally:
        c.close()
    assert last == end - 1 and got == EXPECTED


def test_kafka_python_reads_past_the_empty_batch(broker: Broker, compacted: str) -> None:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTopicPartition

    c = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest")
    tp = KTopicPartition(compacted, 0)
    c.assign([tp])
    got: dict[bytes, bytes] = {}
    last = -1
    end = _end(broker, compacted)
    deadline = time.monotonic() + 30
    while last < end - 1 and time.monotonic() < deadline:
        for m in c.poll(timeout_ms=500).get(tp, []):
            got[m.key] = m.value.rstrip()
            last = m.offset
    c.close()
    assert last == end - 1 and got == EXPECTED


def test_aiokafka_and_kafkalite_read_past_the_empty_batch(broker: Broker, compacted: str) -> None:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition as ATopicPartition

    from kafkalite.client import KafkaConsumer

    end = _end(broker, compacted)

    async def aio() -> tuple[int, dict[bytes, bytes]]:
        c = AIOKafkaConsumer(
            bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest"
        )
        await c.start()
        try:
            tp = ATopicPartition(compacted, 0)
            c.assign([tp])
            await c.seek_to_beginning(tp)
            got: dict[bytes, bytes] = {}
            last = -1
            deadline = time.monotonic() + 30
            while last < end - 1 and time.monotonic() < deadline:
                for m in (await c.getmany(timeout_ms=500)).get(tp, []):
                    got[m.key] = m.value.rstrip()
                    last = m.offset
            return last, got
        finally:
            await c.stop()

    assert asyncio.run(aio()) == (end - 1, EXPECTED)

    ours = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest")
    ours.assign([(compacted, 0)])
    got: dict[bytes, bytes] = {}
    last = -1
    deadline = time.monotonic() + 30
    while last < end - 1 and time.monotonic() < deadline:
        for recs in ours.poll(500).values():
            for r in recs:
                got[r.key] = r.value.rstrip()
                last = r.offset
    ours.close()
    assert (last, got) == (end - 1, EXPECTED)
