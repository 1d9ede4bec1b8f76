"""A topic's compression.type naming a codec: the broker rewrites producer batches into that codec
(records, offsets, timestamps and producer fields unchanged); `producer` keeps the producer's codec."""

from __future__ import annotations

import struct

import pytest
from test_produce_fetch import fetch, produce

from kafkalite.protocol.errors import ErrorCode
from kafkalite.records.batch import build_batch, iter_batches
from kafkalite.records.header import compute_crc, parse_batch_header

CODECS = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
RECORDS = [
    (b"k%d" % i, b"value-%d " % i * 30, [("h", b"x")], 1_700_000_000_000 + i) for i in range(50)
]


@pytest.mark.parametrize(
    ("topic_codec", "producer_codec"),
    [("zstd", 0), ("gzip", 3), ("uncompressed", 1), ("lz4", 2), ("snappy", 4), ("producer", 3)],
)
def test_batches_are_stored_in_the_topic_codec(broker, client, topic, topic_codec, producer_codec):
    broker.create_topic(topic, 1, **{"compression.type": topic_codec})
    blob = build_batch(
        RECORDS, compression=producer_codec, producer_id=5, producer_epoch=1, base_sequence=0
    )
    r = produce(client, topic, blob, acks=-1)
    assert (r.error_code, r.base_offset) == (0, 0)
    _resp, part = fetch(client, topic, 0)
    stored = bytes(part.records)
    h = parse_batch_header(stored, 0)
    expected = producer_codec if topic_codec == "producer" else CODECS[topic_codec]
    assert h.compression == expected
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (5, 1, 0)
    (batch,) = list(iter_batches(stored))
    assert [(x.offset, x.key, x.value, x.timestamp) for x in batch.records] == [
        (i, k, v, ts) for i, (k, v, _h, ts) in enumerate(RECORDS)
    ]
    assert all(x.headers == [("h", b"x")] for x in batch.records)


def test_garbage_records_under_a_valid_crc_are_refused_when_recompressing(broker, client, topic):
    """The rewrite decodes the records: garbage inside a batch whose CRC matches gets CORRUPT_MESSAGE
    and leaves the log as it was."""
    broker.create_topic(topic, 1, **{"compression.type": "gzip"})
    good = build_batch(RECORDS[:3])
    assert produce(client, topic, good).error_code == 0
    bad = bytearray(build_batch(RECORDS[:3]))
    bad[61:] = b"\xfe" * (len(bad) - 61)  # record bytes replaced, lengths that lead nowhere
    struct.pack_into(">I", bad, 17, compute_crc(bad, 0, len(bad)))
    r = produce(client, topic, bytes(bad))
    assert r.error_code == ErrorCode.CORRUPT_MESSAGE
    _resp, part = fetch(client, topic, 0)
    stored = list(iter_batches(bytes(part.records)))
    assert [x.value for b in stored for x in b.records] == [v for _k, v, _h, _t in RECORDS[:3]]
    assert produce(client, topic, good).base_offset == 3  # the log still takes appends
