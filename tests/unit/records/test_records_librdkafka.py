"""librdkafka (confluent-kafka) as the independent oracle for record batches, through a kafkalite broker:
its batches decode in our reader in every codec, and it consumes batches our builder wrote."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest

from kafkalite.protocol.schema import APIS
from kafkalite.records.batch import RecordBatchBuilder, iter_batches
from kafkalite.records.compression import XERIAL_MAGIC, Compression
from kafkalite.records.header import HEADER_SIZE, iter_batch_headers

confluent_kafka = pytest.importorskip("confluent_kafka")
testing = pytest.importorskip("kafkalite.testing")
wire = pytest.importorskip("kafkalite.cli.wire")

pytestmark = pytest.mark.compat

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
RECORDS = [
    (b"k1", b"v1", [("h1", b"x"), ("h2", None)]),
    (None, b"value-without-key", []),
    (b"", b"", []),
    (b"tombstone", None, []),
    (None, None, [("only", b"headers")]),
] + [(b"k%d" % i, b"v%d" % i * 40, []) for i in range(300)]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    with testing.Broker(tmp_path_factory.mktemp("records"), num_partitions=1) as b:
        yield b


def _fetch_all(bootstrap: str, topic: str) -> bytes:
    fetch = APIS[1].request
    with wire.WireClient(bootstrap) as c:
        blob = b""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            ft = fetch.FetchTopic(
                topic=topic,
                topic_id=uuid.UUID(int=0),
                partitions=[
                    fetch.FetchTopic.FetchPartition(
                        partition=0, fetch_offset=0, partition_max_bytes=16 << 20
                    )
                ],
            )
            resp = c.send(
                fetch(
                    replica_id=-1,
                    max_wait_ms=100,
                    min_bytes=1,
                    max_bytes=16 << 20,
                    topics=[ft],
                    forgotten_topics_data=[],
                ),
                version=c.version_for(1, cap=12),
            )
            blob = resp.responses[0].partitions[0].records or b""
            if blob:
                return bytes(blob)
    raise AssertionError("fetch returned nothing")


@pytest.mark.parametrize("codec", CODECS)
def test_librdkafka_batches_decode_in_our_reader(broker, codec: str) -> None:  # type: ignore[no-untyped-def]
    topic = f"rk-{codec}-{uuid.uuid4().hex[:8]}"
    errors: list[object] = []
    p = confluent_kafka.Producer(
        {"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 50, "compression.type": codec}
    )
    for key, value, headers in RECORDS:
        p.produce(
            topic,
            key=key,
            value=value,
            headers=headers or None,
            on_delivery=lambda err, _m: err and errors.append(err),
        )
    assert p.flush(30) == 0 and not errors, errors
    blob = _fetch_all(broker.bootstrap_servers, topic)
    while len([r for b in iter_batches(blob, verify_crc=True) for r in b.records]) < len(RECORDS):
        blob = _fetch_all(broker.bootstrap_servers, topic)  # pragma: no cover - one fetch suffices
    batches = list(iter_batches(blob, verify_crc=True))
    assert {b.compression for b in batches} == {Compression.from_name(codec)}
    got = [(r.key, r.value, r.headers) for b in batches for r in b.records]
    assert got == [(k, v, h) for k, v, h in RECORDS]
    assert [r.offset for b in batches for r in b.records] == list(range(len(RECORDS)))
    if codec == "snappy":  # librdkafka writes raw snappy, not xerial framing
        pos, _ = next(iter(iter_batch_headers(blob)))
        assert blob[pos + HEADER_SIZE : pos + HEADER_SIZE + 8] != XERIAL_MAGIC


@pytest.mark.parametrize("codec", CODECS)
def test_librdkafka_consumes_our_batches(broker, codec: str) -> None:  # type: ignore[no-untyped-def]
    topic = f"ours-{codec}-{uuid.uuid4().hex[:8]}"
    produce = APIS[0].request
    builder = RecordBatchBuilder(compression=Compression.from_name(codec))
    for key, value, headers in RECORDS:
        builder.append(key, value, headers)
    with wire.WireClient(broker.bootstrap_servers) as c:
        c.metadata([topic], auto_create=True)
        td = produce.TopicProduceData(
            name=topic,
            partition_data=[
                produce.TopicProduceData.PartitionProduceData(index=0, records=builder.build())
            ],
        )
        resp = c.send(produce(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[td]))
        assert resp.responses[0].partition_responses[0].error_code == 0
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": "records",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
    out = []
    deadline = time.monotonic() + 30
    try:
        while len(out) < len(RECORDS) and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is None:
                continue
            assert m.error() is None, m.error()
            out.append(m)
    finally:
        consumer.close()
    assert [(m.key(), m.value()) for m in out] == [(k, v) for k, v, _ in RECORDS]
    assert [m.headers() or [] for m in out] == [h for _, _, h in RECORDS]
