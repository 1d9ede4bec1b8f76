"""Transactions with librdkafka (confluent-kafka) against kafkalite: commit and abort seen through a
read_committed consumer, consume-transform-produce with send_offsets_to_transaction, fencing, bad input."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

ALSO_ON_CLUSTER = True


def _create(bs: str, topic: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bs})
    fut = admin.create_topics([NewTopic(topic, partitions)])[topic]
    fut.result(30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # a cluster announces new leaders a moment later
        md = admin.list_topics(topic, timeout=10).topics[topic]
        if md.error is None and all(p.leader >= 0 for p in md.partitions.values()):
            return
        time.sleep(0.1)


def _txn_producer(bs: str, txn_id: str, **conf: Any) -> Producer:
    p = Producer(
        {
            "bootstrap.servers": bs,
            "transactional.id": txn_id,
            "linger.ms": 5,
            "transaction.timeout.ms": 30000,
            **conf,
        }
    )
    p.init_transactions(30)
    return p


def _read(
    bs: str, topic: str, isolation: str, expect: int | None = None, timeout: float = 15.0
) -> list[tuple[int, bytes]]:
    c = Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": f"g-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": isolation,
        }
    )
    c.subscribe([topic])
    out: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + timeout
    idle_until = None
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                if expect is not None and len(out) >= expect:
                    if idle_until is None:
                        idle_until = time.monotonic() + 1.0  # anything extra would show up now
                    elif time.monotonic() > idle_until:
                        break
                continue
            if m.error():
                continue
            out.append((m.offset(), m.value()))
    finally:
        c.close()
    return out


def test_commit_is_visible_once_and_abort_never(broker: Any) -> None:
    bs = broker.bootstrap_servers
    topic = f"txn-{uuid.uuid4().hex[:8]}"
    _create(bs, topic, 2)
    p = _txn_producer(bs, f"tx-{uuid.uuid4().hex[:8]}")
    p.begin_transaction()
    for i in range(20):
        p.produce(topic, value=b"committed-%d" % i, partition=i % 2)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(20):
        p.produce(topic, value=b"aborted-%d" % i, partition=i % 2)
    p.flush(30)
    p.abort_transaction(30)
    p.begin_transaction()
    for i in range(5):
        p.produce(topic, value=b"late-%d" % i, partition=i % 2)
    p.commit_transaction(30)
    committed = _read(bs, topic, "read_committed", expect=25)
    values = sorted(v for _, v in committed)
    assert values == sorted(
        [b"committed-%d" % i for i in range(20)] + [b"late-%d" % i for i in range(5)]
    )
    # read_uncommitted sees the aborted records too (never the markers)
    everything = _read(bs, topic, "read_uncommitted", expect=45)
    assert len(everything) == 45


def test_open_transaction_holds_read_committed_back(broker: Any) -> None:
    bs = broker.bootstrap_servers
    topic = f"txn-{uuid.uuid4().hex[:8]}"
    _create(bs, topic)
    p = _txn_producer(bs, f"tx-{uuid.uuid4().hex[:8]}")
    p.begin_transaction()
    p.produce(topic, value=b"pending")
    p.flush(30)
    assert _read(bs, topic, "read_committed", timeout=3) == []
    assert [v for _, v in _read(bs, topic, "read_uncommitted", expect=1, timeout=10)] == [
        b"pending"
    ]
    c = Consumer(
        {"bootstrap.servers": bs, "group.id": "lso-probe", "isolation.level": "read_committed"}
    )
    low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    c.close()
    assert (low, high) == (0, 0)  # the last stable offset is where the transaction starts
    p.commit_transaction(30)
    assert [v for _, v in _read(bs, topic, "read_committed", expect=1)] == [b"pending"]


def test_consume_transform_produce_commits_offsets_only_with_the_transaction(broker: Any) -> None:
    bs = broker.bootstrap_servers
    src, dst = f"src-{uuid.uuid4().hex[:8]}", f"dst-{uuid.uuid4().hex[:8]}"
    _create(bs, src)
    _create(bs, dst)
    plain = Producer({"bootstrap.servers": bs})
    for i in range(30):
        plain.produce(src, value=b"%d" % i)
    plain.flush(30)
    group = f"ctp-{uuid.uuid4().hex[:8]}"
    consumer = Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    consumer.subscribe([src])
    p = _txn_producer(bs, f"ctp-{uuid.uuid4().hex[:8]}")
    seen = 0
    aborted_once = False
    deadline = time.monotonic() + 60
    while seen < 30 and time.monotonic() < deadline:
        msgs = consumer.consume(10, 1.0)
        msgs = [m for m in msgs if not m.error()]
        if not msgs:
            continue
        p.begin_transaction()
        for m in msgs:
            p.produce(dst, value=b"x" + m.value())
        positions = consumer.position(consumer.assignment())
        p.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 30)
        if not aborted_once:
            # abort the first batch: its output disappears and the group's offset does not move
            p.abort_transaction(30)
            aborted_once = True
            committed = consumer.committed([TopicPartition(src, 0)], timeout=10)
            assert committed[0].offset < 0
            consumer.seek(TopicPartition(src, 0, msgs[0].offset()))
            continue
        p.commit_transaction(30)
        seen += len(msgs)
    assert seen == 30
    committed = consumer.committed([TopicPartition(src, 0)], timeout=10)
    assert committed[0].offset == 30
    consumer.close()
    out = sorted(v for _, v in _read(bs, dst, "read_committed", expect=30))
    assert out == sorted(b"x%d" % i for i in range(30))


def test_a_second_instance_fences_the_first(broker: Any) -> None:
    bs = broker.bootstrap_servers
    topic = f"txn-{uuid.uuid4().hex[:8]}"
    _create(bs, topic)
    txn_id = f"fence-{uuid.uuid4().hex[:8]}"
    first = _txn_producer(bs, txn_id)
    first.begin_transaction()
    first.produce(topic, value=b"zombie")
    first.flush(30)
    second = _txn_producer(bs, txn_id)  # aborts the first's open transaction, bumps the epoch
    second.begin_transaction()
    second.produce(topic, value=b"new")
    second.commit_transaction(30)
    with pytest.raises(KafkaException) as err:
        first.produce(topic, value=b"zombie-2")
        first.commit_transaction(30)
    assert err.value.args[0].fatal() or "fenced" in str(err.value).lower()
    values = [v for _, v in _read(bs, topic, "read_committed", expect=1)]
    assert values == [b"new"]


def test_a_timed_out_transaction_is_aborted_by_the_coordinator(broker: Any) -> None:
    bs = broker.bootstrap_servers
    topic = f"txn-{uuid.uuid4().hex[:8]}"
    _create(bs, topic)
    p = _txn_producer(bs, f"slow-{uuid.uuid4().hex[:8]}", **{"transaction.timeout.ms": 1000})
    p.begin_transaction()
    p.produce(topic, value=b"abandoned")
    p.flush(30)
    # nobody ends it: the coordinator aborts after the timeout (conftest: it checks every 500 ms)
    deadline = time.monotonic() + 30
    high = 0
    while time.monotonic() < deadline:
        c = Consumer(
            {"bootstrap.servers": bs, "group.id": "x", "isolation.level": "read_committed"}
        )
        _, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        c.close()
        if high >= 2:
            break
        time.sleep(0.5)
    assert high == 2  # the record and the abort marker: the last stable offset moved on
    assert _read(bs, topic, "read_committed", timeout=3) == []
