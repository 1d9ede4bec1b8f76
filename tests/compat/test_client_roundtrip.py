"""kafkalite producer -> kafkalite consumer round trips against kafkalite and Tansu: every codec, keys,
headers, timestamps, keyed partitioning, acks levels, idempotence, async sends, consumer positioning."""

from __future__ import annotations

import asyncio
import time

import pytest
from test_client_support import any_broker, create_topic, new_topic_name  # noqa: F401

from kafkalite.client import (
    KafkaAdminClient,
    KafkaConsumer,
    KafkaProducer,
    OffsetAndMetadata,
    TopicPartition,
    UnsupportedFeatureError,
)
from kafkalite.client.partitioner import partition_for_key
from kafkalite.client.subscription import SubscriptionState  # noqa: F401

pytestmark = [pytest.mark.compat, pytest.mark.timeout(60)]


def consume_all(c: KafkaConsumer, n: int, timeout: float = 30) -> list:
    out: list = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        for recs in c.poll(500).values():
            out.extend(recs)
    return out


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_round_trip_every_codec(any_broker, codec: str) -> None:  # noqa: F811
    bs = any_broker.bootstrap_servers
    topic = create_topic(bs, new_topic_name(codec), 3)
    sent = []
    with KafkaProducer(
        bootstrap_servers=bs, compression_type=codec, linger_ms=2, batch_size=4096
    ) as p:
        futs = []
        for i in range(600):
            key = None if i % 7 == 0 else b"key-%d" % (i % 37)
            value = None if i % 50 == 49 else (b"value-%d-" % i) * (1 + i % 5)
            headers = [("i", b"%d" % i), ("null", None)] if i % 3 == 0 else []
            ts = 1_700_000_000_000 + i
            futs.append(p.send(topic, value, key=key, headers=headers, timestamp_ms=ts))
            sent.append((key, value, headers, ts))
        p.flush(30)
        metas = [f.get(10) for f in futs]
    for (key, *_), md in zip(sent, metas):
        if key is not None:
            assert md.partition == partition_for_key(key, 3)
        assert md.offset >= 0
    with KafkaConsumer(
        bootstrap_servers=bs, auto_offset_reset="earliest", enable_auto_commit=False
    ) as c:
        c.assign([TopicPartition(topic, p) for p in range(3)])
        got = consume_all(c, len(sent))
    assert len(got) == len(sent)
    by_offset = {(r.partition, r.offset): r for r in got}
    for (key, value, headers, ts), md in zip(sent, metas):
        r = by_offset[(md.partition, md.offset)]
        assert (r.key, r.value, r.timestamp, r.timestamp_type) == (key, value, ts, 0)
        assert list(r.headers) == list(headers)


@pytest.mark.parametrize("acks", [0, 1, "all"])
def test_acks_levels(any_broker, acks: object) -> None:  # noqa: F811
    bs = any_broker.bootstrap_servers
    topic = create_topic(bs, new_topic_name("acks"), 1)
    with KafkaProducer(bootstrap_servers=bs, acks=acks) as p:
        metas = [p.send(topic, b"%d" % i) for i in range(100)]
        p.flush(20)
        offs = [m.get(10).offset for m in metas]
    if acks == 0:
        assert set(offs) == {-1}
    else:
        assert offs == list(range(100))
    with KafkaConsumer(bootstrap_servers=bs, auto_offset_reset="earliest") as c:
        c.assign([(topic, 0)])
        assert [r.value for r in consume_all(c, 100)] == [b"%d" % i for i in range(100)]


def test_idempotent_producer(any_broker) -> None:  # noqa: F811
    bs = any_broker.bootstrap_servers
    topic = create_topic(bs, new_topic_name("idem"), 2)
    try:
        p = KafkaProducer(
            bootstrap_servers=bs, enable_idempotence=True, linger_ms=1, batch_size=2000
        )
    except UnsupportedFeatureError:
        pytest.skip(f"{any_broker.kind} has no InitProducerId")
    with p:
        futs = [p.send(topic, b"%05d" % i, partition=i % 2) for i in range(2000)]
        p.flush(30)
        assert all(f.get().offset >= 0 for f in futs)
    with KafkaConsumer(bootstrap_servers=bs, auto_offset_reset="earliest") as c:
        c.assign([(topic, 0), (topic, 1)])
        got = consume_all(c, 2000)
    for part in (0, 1):
        vals = [r.value for r in got if r.partition == part]
        assert vals == [b"%05d" % i for i in range(part, 2000, 2)]


def test_await_send_and_sticky_null_keys(any_broker) -> None:  # noqa: F811
    bs = any_broker.bootstrap_servers
    topic = create_topic(bs, new_topic_name("aw"), 4)
    with KafkaProducer(bootstrap_servers=bs, linger_ms=50) as p:

        async def main() -> list:
            return list(await asyncio.gather(*(p.send(topic, b"x%d" % i) for i in range(20))))

        metas = asyncio.run(main())
    # KIP-480: one linger window of null-key records lands in one partition
    assert len({m.partition for m in metas}) == 1
    assert sorted(m.offset for m in metas) == list(range(20))


def test_consumer_positioning(any_broker) -> None:  # noqa: F811
    bs = any_broker.bootstrap_servers
    topic = create_topic(bs, new_topic_name("pos"), 1)
    tp = TopicPartition(topic, 0)
    with KafkaProducer(bootstrap_servers=bs) as p:
        for i in range(50):
            p.send(topic, b"%d" % i, timestamp_ms=1_000_000 + i * 10)
        p.flush(20)
    with KafkaConsumer(bootstrap_servers=bs, auto_offset_reset="latest") as c:
        c.assign([tp])
        if any_broker.kind == "tansu" and c.position(tp) != 50:
            pytest.xfail(
                "Tansu defect: ListOffsets(timestamp=-1) after one 50-record batch answers 1, "
                "not 50 (confluent-kafka's get_watermark_offsets sees the same)"
            )
        assert c.position(tp) == 50
        assert c.poll(200) == {}
        c.seek(tp, 10)
        got = consume_all(c, 5)
        assert got[0].offset == 10
        c.seek_to_beginning(tp)
        assert c.position(tp) == 0
        c.seek_to_end(tp)
        assert c.position(tp) == 50
        assert c.beginning_offsets([tp]) == {tp: 0} and c.end_offsets([tp]) == {tp: 50}
        found = c.offsets_for_times({tp: 1_000_000 + 205})
        assert found[tp] is not None and found[tp].offset == 21
        assert c.offsets_for_times({tp: 9_000_000})[tp] is None
        # pause / resume
        c.seek(tp, 0)
        c.pause(tp)
        assert c.poll(300) == {} and c.paused() == {tp}
        c.resume(tp)
        got = consume_all(c, 50)
        assert [r.offset for r in got] == list(range(50))
        # max.poll.records
        c.seek(tp, 0)
        first = c.poll(3000, max_records=7)
        assert sum(len(v) for v in first.values()) == 7
        assert c.position(tp) == 7


def test_auto_offset_reset_none_and_commit_metadata(any_broker) -> None:  # noqa: F811
    bs = any_broker.bootstrap_servers
    topic = create_topic(bs, new_topic_name("none"), 1)
    tp = TopicPartition(topic, 0)
    group = new_topic_name("grp")
    with KafkaProducer(bootstrap_servers=bs) as p:
        for i in range(10):
            p.send(topic, b"%d" % i)
        p.flush(20)
    from kafkalite.client.errors import NoOffsetForPartitionError

    with KafkaConsumer(
        bootstrap_servers=bs, group_id=group, auto_offset_reset="none", enable_auto_commit=False
    ) as c:
        c.assign([tp])
        with pytest.raises(NoOffsetForPartitionError):
            c.poll(500)
        c.commit({tp: OffsetAndMetadata(4, "meta-data")})
        committed = c.committed(tp)
        assert committed.offset == 4
        if any_broker.kind == "tansu":
            assert committed.metadata in ("", None)  # Tansu defect: commit metadata is dropped
        else:
            assert committed.metadata == "meta-data"
        got = consume_all(c, 6)
        assert [r.offset for r in got] == list(range(4, 10))
    with KafkaAdminClient(bootstrap_servers=bs) as admin:
        # Tansu defect: OffsetFetch with topics=null answers a null topics array; ask explicitly there
        offs = admin.list_consumer_group_offsets(
            group, [tp] if any_broker.kind == "tansu" else None
        )
        assert offs[tp].offset == 4
