"""Produce, Fetch and ListOffsets semantics through the wire: errors, long poll, KIP-74, topic ids,
legacy conversion, LogAppendTime, and proof that fetch data leaves through os.sendfile."""

from __future__ import annotations

import struct
import threading
import time
import uuid

import pytest

from kafkalite.broker.network.connection import SendfileStats
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.schema import APIS
from kafkalite.records.batch import build_batch, iter_batches
from kafkalite.records.header import parse_batch_header, read_magic
from kafkalite.records.legacy import LegacyMessageSetBuilder
from kafkalite.testing import Broker

P = APIS[0].request
F = APIS[1].request
L = APIS[2].request


def produce(c, topic, blob, *, partition=0, acks=1, version=None, txn_id=None):  # type: ignore[no-untyped-def]
    td = P.TopicProduceData(
        name=topic,
        partition_data=[P.TopicProduceData.PartitionProduceData(index=partition, records=blob)],
    )
    resp = c.send(
        P(transactional_id=txn_id, acks=acks, timeout_ms=5000, topic_data=[td]), version=version
    )
    return resp.responses[0].partition_responses[0]


def fetch(
    c,
    topic,
    offset,
    *,
    version=None,
    max_wait=0,
    min_bytes=1,
    pmax=1 << 20,
    partition=0,
    topic_id=None,
):  # type: ignore[no-untyped-def]
    ft = F.FetchTopic(
        topic=topic,
        topic_id=topic_id or uuid.UUID(int=0),
        partitions=[
            F.FetchTopic.FetchPartition(
                partition=partition, fetch_offset=offset, partition_max_bytes=pmax
            )
        ],
    )
    resp = c.send(
        F(
            replica_id=-1,
            max_wait_ms=max_wait,
            min_bytes=min_bytes,
            max_bytes=16 << 20,
            topics=[ft],
            forgotten_topics_data=[],
        ),
        version=version if version is not None else c.version_for(1, cap=12),
    )
    return resp, resp.responses[0].partitions[0]


def values(blob: bytes) -> list[bytes | None]:
    return [r.value for b in iter_batches(blob) for r in b.records]


def test_produce_then_fetch_roundtrip_with_offsets(client, topic):
    client.metadata([topic], auto_create=True)
    r1 = produce(client, topic, build_batch([(b"k", b"a"), (None, b"b")]))
    r2 = produce(client, topic, build_batch([(b"k", b"c")]))
    assert (r1.error_code, r1.base_offset, r2.base_offset) == (0, 0, 2)
    _, part = fetch(client, topic, 0)
    assert (
        part.error_code,
        part.high_watermark,
        part.last_stable_offset,
        part.log_start_offset,
    ) == (0, 3, 3, 0)
    assert values(part.records) == [b"a", b"b", b"c"]
    _, part = fetch(client, topic, 2)
    assert values(part.records)[-1] == b"c"


def test_fetch_data_goes_through_sendfile(broker, client, topic):
    client.metadata([topic], auto_create=True)
    blob = build_batch([(None, bytes([i]) * 5000) for i in range(50)])
    produce(client, topic, blob)
    before_calls, before_bytes = SendfileStats.calls, SendfileStats.bytes
    _, part = fetch(client, topic, 0)
    assert SendfileStats.calls > before_calls
    assert SendfileStats.bytes - before_bytes == len(part.records) >= len(blob)
    assert values(part.records) == [bytes([i]) * 5000 for i in range(50)]


def test_fetch_without_sendfile_sends_the_same_bytes(tmp_path):
    from kafkalite.cli.wire import WireClient

    with (
        Broker(tmp_path, config={"kafkalite.sendfile.enable": "false"}) as b,
        WireClient(b.bootstrap_servers) as c,
    ):
        c.metadata(["nf"], auto_create=True)
        produce(c, "nf", build_batch([(None, b"v%d" % i) for i in range(10)]))
        before_sf, before_fb = SendfileStats.bytes, SendfileStats.fallback_bytes
        _, part = fetch(c, "nf", 0)
        assert SendfileStats.bytes == before_sf
        assert SendfileStats.fallback_bytes - before_fb == len(part.records)
        assert values(part.records) == [b"v%d" % i for i in range(10)]


def test_produce_errors(broker, client, topic):
    broker.create_topic(
        topic, 1, max_message_bytes=2000, message_timestamp_difference_max_ms=60_000
    )
    assert (
        produce(client, topic, build_batch([(None, b"x")]), acks=2).error_code
        == ErrorCode.INVALID_REQUIRED_ACKS
    )
    assert (
        produce(client, topic, build_batch([(None, b"x" * 5000)])).error_code
        == ErrorCode.MESSAGE_TOO_LARGE
    )
    bad = bytearray(build_batch([(None, b"x")]))
    bad[-1] ^= 1
    assert produce(client, topic, bytes(bad)).error_code == ErrorCode.CORRUPT_MESSAGE
    assert produce(client, topic, b"\x00" * 30).error_code == ErrorCode.CORRUPT_MESSAGE
    moved = bytearray(build_batch([(None, b"x")]))
    struct.pack_into(
        ">q", moved, 0, 7
    )  # base offset is outside the CRC: still a valid batch, but not from a client
    resp = produce(client, topic, bytes(moved))
    assert resp.error_code == ErrorCode.INVALID_RECORD and resp.error_message
    old = build_batch([(None, b"x", [], 1000)])
    assert produce(client, topic, old).error_code == ErrorCode.INVALID_TIMESTAMP
    assert (
        produce(client, topic, build_batch([(None, b"x")]), partition=3).error_code
        == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    )
    assert (
        produce(client, "bad name!", build_batch([(None, b"x")])).error_code
        == ErrorCode.INVALID_TOPIC_EXCEPTION
    )
    assert broker.server.get_log(topic, 0).log_end_offset == 0  # nothing bad was appended
    assert produce(client, topic, build_batch([(None, b"fine")])).base_offset == 0


def test_record_level_errors_name_the_records(broker, client, topic):
    """KIP-467 (Produce v8+): a compacted topic refuses keyless records; the whole batch is dropped
    and record_errors names each record by its index in the batch, with Kafka's messages."""
    broker.create_topic(topic, 1, cleanup_policy="compact")
    blob = build_batch([(b"k0", b"a"), (None, b"b"), (b"k2", b"c"), (None, b"d")])
    for version in (8, 9, 11):
        resp = produce(client, topic, blob, version=version)
        assert resp.error_code == ErrorCode.INVALID_RECORD
        assert [e.batch_index for e in resp.record_errors] == [1, 3]
        expect = f"Compacted topic cannot accept message without key in topic partition {topic}-0"
        assert all(e.batch_index_error_message == expect for e in resp.record_errors)
        assert resp.error_message.startswith(
            "One or more records have been rejected due to 2 record errors in total"
        )
        assert f"RecordError(batchIndex=1, message='{expect}')" in resp.error_message
    old = produce(client, topic, blob, version=7)  # before v8: the code alone
    assert old.error_code == ErrorCode.INVALID_RECORD
    # a compressed batch is decoded to find them
    gz = build_batch([(None, b"x" * 100)], compression=1)
    resp = produce(client, topic, gz, version=9)
    assert resp.error_code == ErrorCode.INVALID_RECORD
    assert [e.batch_index for e in resp.record_errors] == [0]
    assert broker.server.get_log(topic, 0).log_end_offset == 0  # nothing of any batch appended
    ok = produce(client, topic, build_batch([(b"k", b"v")]), version=9)
    assert ok.error_code == 0 and ok.record_errors == [] and ok.error_message is None

    timed = f"{topic}-ts"
    broker.create_topic(timed, 1, message_timestamp_difference_max_ms=60_000)
    now = int(time.time() * 1000)
    blob = build_batch([(None, b"a", [], now), (None, b"b", [], 1000), (None, b"c", [], now)])
    resp = produce(client, timed, blob, version=9)
    assert resp.error_code == ErrorCode.INVALID_TIMESTAMP
    assert resp.error_message == "One or more records have been rejected due to invalid timestamp"
    assert [e.batch_index for e in resp.record_errors] == [1]
    assert resp.record_errors[0].batch_index_error_message.startswith(
        "Timestamp 1000 of message with offset 1 is out of range. The timestamp should be within ["
    )
    assert broker.server.get_log(timed, 0).log_end_offset == 0
    # both kinds in one batch: every record named, and an untimely one makes it INVALID_TIMESTAMP
    both = f"{topic}-both"
    broker.create_topic(both, 1, cleanup_policy="compact", message_timestamp_before_max_ms=60_000)
    blob = build_batch([(None, b"a", [], now), (b"k", b"b", [], 1000), (b"k", b"c", [], now)])
    resp = produce(client, both, blob, version=9)
    assert resp.error_code == ErrorCode.INVALID_TIMESTAMP
    assert [e.batch_index for e in resp.record_errors] == [0, 1]
    assert resp.record_errors[0].batch_index_error_message.startswith("Compacted topic")
    assert resp.record_errors[1].batch_index_error_message.startswith("Timestamp 1000")


def test_log_append_time(broker, client, topic):
    broker.create_topic(topic, 1, message_timestamp_type="LogAppendTime")
    before = int(time.time() * 1000)
    resp = produce(client, topic, build_batch([(None, b"x", [], 5)]))
    assert resp.log_append_time_ms >= before
    _, part = fetch(client, topic, 0)
    batch = next(iter_batches(part.records))
    assert batch.timestamp_type == 1 and batch.max_timestamp == resp.log_append_time_ms


def test_long_poll_woken_by_append(client, broker, topic):
    from kafkalite.cli.wire import WireClient

    client.metadata([topic], auto_create=True)

    def later() -> None:
        time.sleep(0.3)
        with WireClient(broker.bootstrap_servers) as c2:
            produce(c2, topic, build_batch([(None, b"late")]))

    th = threading.Thread(target=later)
    th.start()
    t0 = time.monotonic()
    _, part = fetch(client, topic, 0, max_wait=10_000)
    elapsed = time.monotonic() - t0
    th.join()
    assert values(part.records) == [b"late"]
    assert 0.2 < elapsed < 5


def test_long_poll_times_out_with_nothing(client, topic):
    client.metadata([topic], auto_create=True)
    t0 = time.monotonic()
    _, part = fetch(client, topic, 0, max_wait=300)
    assert 0.25 < time.monotonic() - t0 < 3
    assert part.error_code == 0 and not part.records


def test_min_bytes_waits_for_enough_data(client, broker, topic):
    client.metadata([topic], auto_create=True)
    produce(client, topic, build_batch([(None, b"small")]))
    t0 = time.monotonic()
    _, part = fetch(client, topic, 0, max_wait=400, min_bytes=100_000)
    assert (
        time.monotonic() - t0 > 0.3
    )  # not enough bytes: waits the full max wait, then answers what it has
    assert values(part.records) == [b"small"]


def test_offset_out_of_range(client, topic):
    client.metadata([topic], auto_create=True)
    produce(client, topic, build_batch([(None, b"x")]))
    _, part = fetch(client, topic, 5)
    assert part.error_code == ErrorCode.OFFSET_OUT_OF_RANGE


def test_kip74_first_batch_even_if_larger_than_max_bytes(client, topic):
    client.metadata([topic], auto_create=True)
    produce(client, topic, build_batch([(None, b"y" * 10_000)]))
    produce(client, topic, build_batch([(None, b"z" * 10_000)]))
    _, part = fetch(client, topic, 0, pmax=100)
    assert values(part.records) == [b"y" * 10_000]


def test_fetch_by_topic_id(broker, client, topic):
    broker.create_topic(topic, 2)
    tid = broker.server.metadata_store.get(topic).topic_id
    produce(client, topic, build_batch([(None, b"by-id")]), partition=1)
    resp, part = fetch(client, "", 0, version=13, partition=1, topic_id=tid)
    assert resp.responses[0].topic_id == tid
    assert values(part.records) == [b"by-id"]
    _, part = fetch(client, "", 0, version=13, topic_id=uuid.uuid4())
    assert part.error_code == ErrorCode.UNKNOWN_TOPIC_ID


def test_legacy_produce_is_upconverted_and_old_fetch_downconverted(client, topic):
    client.metadata([topic], auto_create=True)
    b = LegacyMessageSetBuilder(1)
    b.append(b"k1", b"old-1", timestamp=1_700_000_000_000)
    b.append(None, b"old-2", timestamp=1_700_000_000_001)
    resp = produce(client, topic, b.build(), version=2)
    assert (resp.error_code, resp.base_offset) == (0, 0)
    _, part = fetch(client, topic, 0, version=4)
    assert read_magic(part.records, 0) == 2
    assert values(part.records) == [b"old-1", b"old-2"]
    _, part = fetch(client, topic, 0, version=3)
    assert read_magic(part.records, 0) == 1
    assert values(part.records) == [b"old-1", b"old-2"]
    _, part = fetch(client, topic, 1, version=0)
    assert read_magic(part.records, 0) == 0
    assert values(part.records)[-1] == b"old-2"


def test_list_offsets_earliest_latest_max_timestamp_and_by_time(client, topic):
    client.metadata([topic], auto_create=True)
    for i in range(5):
        produce(client, topic, build_batch([(None, b"%d" % i, [], 1_000_000 + i * 10)]))

    def lookup(ts: int, version: int = 7) -> tuple[int, int]:
        t = L.ListOffsetsTopic(
            name=topic,
            partitions=[L.ListOffsetsTopic.ListOffsetsPartition(partition_index=0, timestamp=ts)],
        )
        p = (
            client.send(L(replica_id=-1, isolation_level=0, topics=[t]), version=version)
            .topics[0]
            .partitions[0]
        )
        assert p.error_code == 0
        return (p.old_style_offsets[0], -1) if version == 0 else (p.offset, p.timestamp)

    assert lookup(-2)[0] == 0
    assert lookup(-1)[0] == 5
    assert lookup(-3) == (4, 1_000_040)
    assert lookup(1_000_015) == (2, 1_000_020)
    assert lookup(9_999_999)[0] == -1
    assert lookup(-1, version=0)[0] == 5


def test_fetch_many_partitions_respects_response_max_bytes(broker, client, topic):
    broker.create_topic(topic, 4)
    for p in range(4):
        produce(client, topic, build_batch([(None, b"p" * 3000)]), partition=p)
    ft = F.FetchTopic(
        topic=topic,
        partitions=[
            F.FetchTopic.FetchPartition(partition=p, fetch_offset=0, partition_max_bytes=1 << 20)
            for p in range(4)
        ],
    )
    resp = client.send(
        F(
            replica_id=-1,
            max_wait_ms=0,
            min_bytes=1,
            max_bytes=5000,
            topics=[ft],
            forgotten_topics_data=[],
        ),
        version=12,
    )
    sizes = [len(p.records or b"") for p in resp.responses[0].partitions]
    assert (
        sizes[0] > 3000 and sum(s > 0 for s in sizes) == 1
    )  # first batch always, then the budget is spent
    for p in resp.responses[0].partitions:
        if p.records:
            parse_batch_header(p.records, 0)


@pytest.mark.parametrize("version", [4, 7, 11, 12])
def test_fetch_versions_decode(client, topic, version):
    client.metadata([topic], auto_create=True)
    produce(client, topic, build_batch([(None, b"v")]))
    _, part = fetch(client, topic, 0, version=version)
    assert values(part.records) == [b"v"]


def test_clients_cannot_produce_to_internal_topics(client, broker):
    if broker.server.metadata_store.get("__consumer_offsets") is None:
        pytest.skip("no group coordinator in this build")
    assert (
        produce(client, "__consumer_offsets", build_batch([(None, b"x")])).error_code
        == ErrorCode.INVALID_TOPIC_EXCEPTION
    )
