"""Transactions with kafka-python and aiokafka against kafkalite: each client's transactional producer
commits and aborts, and each client's read_committed consumer sees the committed records once and never
an aborted one (the clients filter aborted batches themselves from the Fetch response's list)."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest

kafka = pytest.importorskip("kafka")
aiokafka = pytest.importorskip("aiokafka")


def _kafka_python_write(bs: str, topic: str) -> None:
    p = kafka.KafkaProducer(bootstrap_servers=bs, transactional_id=f"kp-{uuid.uuid4().hex[:8]}")
    p.init_transactions()
    p.begin_transaction()
    for i in range(10):
        p.send(topic, value=b"kp-commit-%d" % i, partition=0)
    p.commit_transaction()
    p.begin_transaction()
    for i in range(10):
        p.send(topic, value=b"kp-abort-%d" % i, partition=0)
    p.flush()
    p.abort_transaction()
    p.close()


async def _aiokafka_write(bs: str, topic: str) -> None:
    p = aiokafka.AIOKafkaProducer(
        bootstrap_servers=bs, transactional_id=f"ak-{uuid.uuid4().hex[:8]}"
    )
    await p.start()
    try:
        async with p.transaction():
            for i in range(10):
                await p.send(topic, value=b"ak-commit-%d" % i, partition=0)
        await p.begin_transaction()
        for i in range(10):
            await p.send(topic, value=b"ak-abort-%d" % i, partition=0)
        await p.abort_transaction()
    finally:
        await p.stop()


def _kafka_python_read(bs: str, topic: str, expect: int) -> list[bytes]:
    c = kafka.KafkaConsumer(
        bootstrap_servers=bs,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=2000,
    )
    c.assign([kafka.TopicPartition(topic, 0)])
    c.seek_to_beginning()
    out: list[bytes] = []
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and len(out) < expect:
        for records in c.poll(timeout_ms=500).values():
            out.extend(r.value for r in records)
    # anything beyond what is expected would show up now
    for records in c.poll(timeout_ms=1000).values():
        out.extend(r.value for r in records)
    c.close()
    return out


async def _aiokafka_read(bs: str, topic: str, expect: int) -> list[bytes]:
    c = aiokafka.AIOKafkaConsumer(
        bootstrap_servers=bs,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await c.start()
    try:
        c.assign([aiokafka.TopicPartition(topic, 0)])
        await c.seek_to_beginning()
        out: list[bytes] = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and len(out) < expect:
            for records in (await c.getmany(timeout_ms=500)).values():
                out.extend(r.value for r in records)
        for records in (await c.getmany(timeout_ms=1000)).values():
            out.extend(r.value for r in records)
        return out
    finally:
        await c.stop()


def test_kafka_python_and_aiokafka_transactions(broker: Any) -> None:
    bs = broker.bootstrap_servers
    topic = f"txn-py-{uuid.uuid4().hex[:8]}"
    admin = kafka.KafkaAdminClient(bootstrap_servers=bs)
    admin.create_topics([kafka.admin.NewTopic(topic, 1, 1)])
    admin.close()
    _kafka_python_write(bs, topic)
    asyncio.run(_aiokafka_write(bs, topic))
    expected = sorted(
        [b"kp-commit-%d" % i for i in range(10)] + [b"ak-commit-%d" % i for i in range(10)]
    )
    assert sorted(_kafka_python_read(bs, topic, 20)) == expected
    assert sorted(asyncio.run(_aiokafka_read(bs, topic, 20))) == expected
