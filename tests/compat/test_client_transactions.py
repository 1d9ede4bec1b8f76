"""Transactions end to end on the embedded broker: read_committed sees committed records exactly once,
a second producer with the same transactional.id fences the first, and offsets sent in a
transaction become committed only when it commits. Skipped until the broker offers EndTxn."""

from __future__ import annotations

from typing import Any

import pytest
from test_client_support import create_topic, new_topic_name

from kafkalite.client import (
    KafkaConsumer,
    KafkaProducer,
    ProducerFencedError,
    TopicPartition,
)
from kafkalite.client.config import PRODUCER, make_config
from kafkalite.client.io_thread import IOThread
from kafkalite.client.network import NetworkClient

pytestmark = [pytest.mark.compat, pytest.mark.timeout(90)]
END_TXN = 26


@pytest.fixture(scope="module")
def txn_broker(broker: Any) -> Any:
    io = IOThread("txn-probe")
    try:
        client = NetworkClient(
            make_config(PRODUCER, {"bootstrap.servers": broker.bootstrap_servers}, {}), io
        )

        async def offered() -> bool:
            conn = await client.connection(client.least_loaded_node())
            return END_TXN in conn.versions

        has_txn = io.run(offered(), 10)
        io.run(client.close(), 5)
    finally:
        io.stop()
    if not has_txn:
        pytest.skip("the broker does not offer EndTxn (API 26) yet")
    return broker


def _read_committed(bs: str, tp: TopicPartition, **kw: Any) -> list[bytes]:
    with KafkaConsumer(
        bootstrap_servers=bs,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
        consumer_timeout_ms=2000,
        **kw,
    ) as c:
        c.assign([tp])
        return [r.value for r in c]


def test_read_committed_sees_committed_records_once(txn_broker: Any) -> None:
    bs = txn_broker.bootstrap_servers
    topic = create_topic(bs, new_topic_name("txn"), 1)
    tp = TopicPartition(topic, 0)
    with KafkaProducer(bootstrap_servers=bs, transactional_id=new_topic_name("tid")) as p:
        p.init_transactions(20)
        p.begin_transaction()
        for i in range(5):
            p.send(topic, b"c1-%d" % i, partition=0)
        p.commit_transaction(20)
        p.begin_transaction()
        for i in range(5):
            p.send(topic, b"ab-%d" % i, partition=0)
        p.flush(20)
        p.abort_transaction(20)
        p.begin_transaction()
        p.send(topic, b"c2", partition=0)
        p.commit_transaction(20)
    got = _read_committed(bs, tp)
    assert got == [b"c1-%d" % i for i in range(5)] + [b"c2"]
    with KafkaConsumer(
        bootstrap_servers=bs, auto_offset_reset="earliest", consumer_timeout_ms=2000
    ) as c:
        c.assign([tp])
        uncommitted = [(r.offset, r.value) for r in c]
        end = c.end_offsets([tp])[tp]
    # read_uncommitted sees the aborted records too, but never the three markers
    assert [v for _, v in uncommitted] == [b"c1-%d" % i for i in range(5)] + [
        b"ab-%d" % i for i in range(5)
    ] + [b"c2"]
    assert [o for o, _ in uncommitted] == [*range(5), *range(6, 11), 12] and end == 14


def test_second_producer_fences_the_first(txn_broker: Any) -> None:
    bs = txn_broker.bootstrap_servers
    topic = create_topic(bs, new_topic_name("fence"), 1)
    tid = new_topic_name("tid")
    with (
        KafkaProducer(bootstrap_servers=bs, transactional_id=tid) as old,
        KafkaProducer(bootstrap_servers=bs, transactional_id=tid) as new,
    ):
        old.init_transactions(20)
        old.begin_transaction()
        old.send(topic, b"zombie", partition=0).get(20)
        new.init_transactions(20)  # aborts the old producer's open transaction
        with pytest.raises(ProducerFencedError):
            old.commit_transaction(20)
        with pytest.raises(ProducerFencedError):
            old.begin_transaction()
        new.begin_transaction()
        new.send(topic, b"live", partition=0)
        new.commit_transaction(20)
    assert _read_committed(bs, TopicPartition(topic, 0)) == [b"live"]


def test_offsets_move_only_when_the_transaction_commits(txn_broker: Any) -> None:
    bs = txn_broker.bootstrap_servers
    src = create_topic(bs, new_topic_name("src"), 1)
    dst = create_topic(bs, new_topic_name("dst"), 1)
    group = new_topic_name("g")
    tp = TopicPartition(src, 0)
    with KafkaProducer(bootstrap_servers=bs) as plain:
        for i in range(4):
            plain.send(src, b"%d" % i, partition=0)
        plain.flush(20)
    with (
        KafkaConsumer(
            src,
            bootstrap_servers=bs,
            group_id=group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            isolation_level="read_committed",
        ) as c,
        KafkaProducer(bootstrap_servers=bs, transactional_id=new_topic_name("tid")) as p,
    ):
        p.init_transactions(20)
        records: list[Any] = []
        for _ in range(50):
            records += c.poll(200).get(tp, [])
            if len(records) >= 4:
                break
        assert len(records) == 4
        p.begin_transaction()
        p.send(dst, b"out", partition=0)
        p.send_offsets_to_transaction({tp: 2}, c.group_metadata(), 20)
        p.abort_transaction(20)
        assert c.committed(tp) is None
        p.begin_transaction()
        p.send(dst, b"out", partition=0)
        p.send_offsets_to_transaction({tp: 4}, c.group_metadata(), 20)
        p.commit_transaction(20)
        assert c.committed(tp).offset == 4
    assert _read_committed(bs, TopicPartition(dst, 0)) == [b"out"]
