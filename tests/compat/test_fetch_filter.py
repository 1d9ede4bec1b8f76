"""The fetch filter on the wire (issue 35): kafkalite's consumer gets the same records from a broker that
filters (kafkalite) and from one that ignores the tag (Tansu, or kafkalite with the tag unread), while
confluent-kafka, kafka-python and aiokafka, which never send it, see every record; librdkafka reads the
broker's rewritten batches (served through a test hook) and moves past batches with nothing left."""

from __future__ import annotations

import asyncio
import socket
import struct
import time
from typing import Any

import pytest
from test_client_support import any_broker, create_topic, new_topic_name  # noqa: F401

from kafkalite.broker.apis.data import fetch as fetch_api
from kafkalite.broker.fastpath import FetchRequestView
from kafkalite.client import KafkaConsumer, KafkaProducer
from kafkalite.filters import FilterError
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.headers import RequestHeader, encode_request_header
from kafkalite.protocol.messages.fetch import FetchRequest, FetchResponse

pytestmark = [pytest.mark.compat, pytest.mark.timeout(90)]
N = 400
EXPR = "key IN ('user-7', 'user-13') OR headers.n >= 390"


def _want(n: int = N) -> list[int]:
    return [i for i in range(n) if i % 20 in (7, 13) or i >= 390]


def produce(bs: str, topic: str, compression: str = "lz4", transactional: bool = False) -> None:
    extra: dict[str, Any] = {"transactional_id": f"tx-{topic}"} if transactional else {}
    with KafkaProducer(
        bootstrap_servers=bs,
        linger_ms=20,
        batch_size=1500,  # many batches, so that whole ones are left out
        compression_type=compression,
        **extra,
    ) as p:
        if transactional:
            p.init_transactions()
        for i in range(N):
            if transactional and i % 100 == 0:
                p.begin_transaction()
            p.send(topic, b"v%d" % i, key=b"user-%d" % (i % 20), headers=[("n", b"%d" % i)])
            if transactional and i % 100 == 99:
                if i == 199:
                    p.flush(20)  # in the log first (abort drops unsent batches), then aborted
                    p.abort_transaction()  # 100..199 never reach read_committed consumers
                else:
                    p.commit_transaction()
        p.flush(20)


def consume(bs: str, topic: str, expr: str | None, **cfg: Any) -> list[int]:
    c = KafkaConsumer(bootstrap_servers=bs, auto_offset_reset="earliest", filter=expr, **cfg)
    try:
        c.assign([(topic, 0)])
        # (Tansu answers ListOffsets latest with 1 here: the log holds at least N offsets)
        end = max(c.end_offsets([(topic, 0)])[(topic, 0)], N)
        got: list[int] = []
        deadline = time.monotonic() + 30
        while c.position((topic, 0)) < end and time.monotonic() < deadline:
            for recs in c.poll(timeout_ms=200).values():
                got += [int(r.value[1:]) for r in recs]
        assert c.position((topic, 0)) == end, "the consumer did not move past filtered batches"
        return got
    finally:
        c.close()


def test_same_records_whether_or_not_the_broker_filters(any_broker) -> None:  # noqa: F811
    bs = any_broker.bootstrap_servers
    topic = create_topic(bs, new_topic_name("flt"))
    produce(bs, topic)
    assert consume(bs, topic, EXPR) == _want()
    assert consume(bs, topic, None) == list(range(N))


def _drop_tag(buf: bytes, pos: int, version: int) -> FetchRequestView:
    view = DECODE(buf, pos, version)
    view.filter = None  # a broker that does not know tag 10035 skips it
    return view


DECODE = fetch_api.decode_fetch


def test_local_fallback_and_broker_filtering_agree(
    broker: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    bs = broker.bootstrap_servers
    topic = create_topic(bs, new_topic_name("fb"))
    produce(bs, topic, compression="zstd")
    counters = broker.server.stats.fetch_filter
    scanned, sent = counters.bytes_scanned, counters.bytes_sent
    by_broker = consume(bs, topic, EXPR)
    assert counters.bytes_scanned > scanned
    assert counters.bytes_sent - sent < (counters.bytes_scanned - scanned) / 2
    monkeypatch.setattr(fetch_api, "decode_fetch", _drop_tag)
    scanned = counters.bytes_scanned
    assert consume(bs, topic, EXPR) == by_broker == _want()
    assert counters.bytes_scanned == scanned  # the broker did not filter: the client did


def test_read_committed_filters_after_aborted_transactions(broker: Any) -> None:
    bs = broker.bootstrap_servers
    topic = create_topic(bs, new_topic_name("txf"))
    produce(bs, topic, compression="gzip", transactional=True)
    committed = [i for i in _want() if not 100 <= i < 200]
    assert consume(bs, topic, EXPR, isolation_level="read_committed") == committed
    assert consume(bs, topic, EXPR) == _want()


def _fetch(bs: str, req: FetchRequest, version: int = 12) -> FetchResponse:
    host, port = bs.split(":")
    out = bytearray(4)
    encode_request_header(out, RequestHeader(1, version, 7, "t"), 2)
    req.encode_into(out, version)
    struct.pack_into(">i", out, 0, len(out) - 4)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(out)
        size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
        frame = s.recv(size, socket.MSG_WAITALL)
    return FetchResponse.decode(frame, version, 5)  # correlation id, header tags


@pytest.mark.parametrize(
    ("expr", "fault"),
    [
        ("key = ", "expected a literal"),
        ("key > 3", "key is a string"),
        ("x" * 5000, "longer than the 4096 allowed"),
        ("partition = 1", "unknown field 'partition'"),
    ],
)
def test_bad_filters_get_invalid_request_naming_the_fault(
    broker: Any, expr: str, fault: str
) -> None:
    req = FetchRequest(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=1000,
        topics=[],
        filter=expr,
    )
    resp = _fetch(broker.bootstrap_servers, req)
    assert resp.error_code == ErrorCode.INVALID_REQUEST
    assert resp.filter_error is not None and fault in resp.filter_error
    assert not resp.filtered
    with pytest.raises(FilterError, match=fault[:12]):
        KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, filter=expr)


def test_other_clients_see_every_record_and_librdkafka_reads_rewritten_batches(
    broker: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    kafka = pytest.importorskip("kafka")
    aiokafka = pytest.importorskip("aiokafka")
    bs = broker.bootstrap_servers
    topic = create_topic(bs, new_topic_name("oth"))
    produce(bs, topic, compression="snappy")

    def rdkafka_values(end: int = N, **conf: Any) -> list[int]:
        c = confluent_kafka.Consumer(
            {
                "bootstrap.servers": bs,
                "group.id": f"g-{time.time()}",
                "enable.auto.commit": False,
                **conf,
            }
        )
        c.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
        got: list[int] = []
        deadline = time.monotonic() + 30
        try:
            while time.monotonic() < deadline:
                m = c.poll(0.2)
                if m is not None and not m.error():
                    got.append(int(m.value()[1:]))
                pos = c.position([confluent_kafka.TopicPartition(topic, 0)])[0].offset
                if pos >= end:
                    break
            assert pos == end, "librdkafka did not move past the filtered batches"
        finally:
            c.close()
        return got

    assert rdkafka_values() == list(range(N))

    def kafka_python_values(end: int = N, **conf: Any) -> list[int]:
        kc = kafka.KafkaConsumer(bootstrap_servers=bs, auto_offset_reset="earliest", **conf)
        tp = kafka.TopicPartition(topic, 0)
        kc.assign([tp])
        got: list[int] = []
        deadline = time.monotonic() + 30
        while kc.position(tp) < end and time.monotonic() < deadline:
            for recs in kc.poll(timeout_ms=200).values():
                got += [int(r.value[1:]) for r in recs]
        assert kc.position(tp) == end, "kafka-python did not move past the filtered batches"
        kc.close()
        return got

    assert kafka_python_values() == list(range(N))

    async def aio() -> list[int]:
        c = aiokafka.AIOKafkaConsumer(bootstrap_servers=bs, auto_offset_reset="earliest")
        await c.start()
        c.assign([aiokafka.TopicPartition(topic, 0)])
        out: list[int] = []
        try:
            while len(out) < N:
                m = await asyncio.wait_for(c.getone(), 30)
                out.append(int(m.value[1:]))
        finally:
            await c.stop()
        return out

    assert asyncio.run(aio()) == list(range(N))

    # a test hook: every flexible Fetch carries the filter, so librdkafka is served rewritten batches
    # Nothing matches in 200..399: those batches are left out, and the last one of each answer is
    # kept empty. With small fetches librdkafka reaches the record at 400 only by moving past them.
    hook_expr = "key = 'user-7' AND (offset < 200 OR offset >= 400)"
    with KafkaProducer(bootstrap_servers=bs) as p:
        p.send(topic, b"v400", key=b"user-7").get(20)

    def with_filter(buf: bytes, pos: int, version: int) -> FetchRequestView:
        view = DECODE(buf, pos, version)
        view.filter = hook_expr
        return view

    monkeypatch.setattr(fetch_api, "decode_fetch", with_filter)
    counters = broker.server.stats.fetch_filter
    before, dropped = counters.bytes_scanned, counters.batches_dropped
    small = {"fetch.max.bytes": 1000, "message.max.bytes": 1000, "max.partition.fetch.bytes": 1}
    want = [i for i in range(200) if i % 20 == 7] + [400]
    assert rdkafka_values(N + 1, **small) == want
    scanned = counters.bytes_scanned
    assert kafka_python_values(N + 1, max_partition_fetch_bytes=1, fetch_max_bytes=1) == want
    assert counters.bytes_scanned > scanned, "kafka-python fetched below v12"
    assert counters.bytes_scanned > before, "librdkafka fetched below v12"
    assert counters.batches_dropped > dropped
