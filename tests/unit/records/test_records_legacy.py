"""Legacy message sets (magic 0/1): interop with kafka-python's legacy records, CRC32 coverage, compressed
wrappers, and the up-conversion (produce) and down-conversion (Fetch v0-3) round trips."""

from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.protocol.exceptions import DecodeError, EncodeError
from kafkalite.records.batch import (
    LOG_APPEND_TIME,
    NO_TIMESTAMP_TYPE,
    RecordBatchBuilder,
    decode_batch,
    iter_batches,
)
from kafkalite.records.compression import Compression, UnsupportedCompressionError, compress
from kafkalite.records.control import build_end_txn_marker_batch
from kafkalite.records.legacy import (
    LegacyMessageSetBuilder,
    downconvert,
    encode_message,
    inner_messages,
    iter_messages,
    read_message,
    upconvert_to_v2,
)

legacy_records = pytest.importorskip("kafka.record.legacy_records")
memory_records = pytest.importorskip("kafka.record.memory_records")

T0 = 1_600_000_000_000
LEGACY_CODECS = [Compression.NONE, Compression.GZIP, Compression.SNAPPY, Compression.LZ4]
SAMPLE = [
    (b"k", b"v", T0),
    (None, b"", T0 + 1),
    (b"", None, T0 - 7),
    (b"key" * 50, b"x" * 5000, T0 + 3),
]


def _needs_xxhash(magic: int, codec: int) -> None:
    if magic == 0 and codec == Compression.LZ4:
        pytest.importorskip("xxhash")  # kafka-python's KIP-57 LZ4 helpers


def _theirs(data: bytes) -> list[tuple[object, ...]]:
    return [
        (r.offset, r.timestamp, r.key, r.value)
        for b in memory_records.MemoryRecords(data)
        for r in b
    ]


def _ours(data: bytes) -> list[tuple[object, ...]]:
    return [
        (r.offset, r.timestamp, r.key, r.value)
        for b in iter_batches(data, verify_crc=True)
        for r in b.records
    ]


def _ts(magic: int, ts: int) -> int | None:
    return ts if magic else None


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", LEGACY_CODECS, ids=lambda c: c.name)
def test_kafka_python_reads_our_message_sets(magic: int, codec: Compression) -> None:
    _needs_xxhash(magic, codec)
    b = LegacyMessageSetBuilder(magic, codec, base_offset=500)
    for key, value, ts in SAMPLE:
        b.append(key, value, ts)
    data = b.build()
    expected = [(500 + i, _ts(magic, ts), k, v) for i, (k, v, ts) in enumerate(SAMPLE)]
    assert _theirs(data) == expected
    for kbatch in memory_records.MemoryRecords(data):
        assert kbatch.validate_crc()
    ours = _ours(data)
    assert ours == [(o, -1 if t is None else t, k, v) for o, t, k, v in expected]
    batches = list(iter_batches(data))
    assert {b.magic for b in batches} == {magic}
    assert {b.timestamp_type for b in batches} == {0 if magic else NO_TIMESTAMP_TYPE}
    assert {b.compression for b in batches} == {codec}


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", LEGACY_CODECS, ids=lambda c: c.name)
def test_we_read_kafka_python_message_sets(magic: int, codec: Compression) -> None:
    _needs_xxhash(magic, codec)
    kb = legacy_records.LegacyRecordBatchBuilder(
        magic=magic, compression_type=codec, batch_size=1 << 20
    )
    for i, (key, value, ts) in enumerate(SAMPLE):
        kb.append(i, ts, key, value)
    data = bytes(kb.build())
    expected = [(i, ts if magic else -1, k, v) for i, (k, v, ts) in enumerate(SAMPLE)]
    got = _ours(data)
    # kafka-python's producer writes wrapper offset 0: relative inner offsets then stay as they are
    assert got == expected
    assert [(k, v) for _, _, k, v in _theirs(data)] == [(k, v) for _, _, k, v in got]
    # uncompressed v1 sets are byte-identical to kafka-python's
    if codec == Compression.NONE:
        ours = LegacyMessageSetBuilder(magic, codec)
        for key, value, ts in SAMPLE:
            ours.append(key, value, ts)
        assert ours.build() == data


def test_compressed_magic1_offsets_are_relative_to_the_wrapper() -> None:
    b = LegacyMessageSetBuilder(1, Compression.GZIP, base_offset=1000)
    for key, value, ts in SAMPLE:
        b.append(key, value, ts)
    data = b.build()
    (wrapper,) = list(iter_messages(data))
    assert wrapper.offset == 1000 + len(SAMPLE) - 1
    assert wrapper.key is None and wrapper.compression == Compression.GZIP
    assert wrapper.timestamp == max(ts for _, _, ts in SAMPLE)
    inner_raw = list(iter_messages(zlib.decompress(wrapper.value or b"", 31)))
    assert [m.offset for m in inner_raw] == list(range(len(SAMPLE)))
    assert [m.offset for m in inner_messages(wrapper)] == [1000 + i for i in range(len(SAMPLE))]


def test_magic1_log_append_time_wrapper_sets_inner_timestamps() -> None:
    b = LegacyMessageSetBuilder(
        1, Compression.SNAPPY, base_offset=0, timestamp_type=LOG_APPEND_TIME
    )
    for key, value, ts in SAMPLE:
        b.append(key, value, ts)
    data = b.build()
    (batch,) = list(iter_batches(data))
    assert batch.timestamp_type == LOG_APPEND_TIME
    assert {r.timestamp for r in batch.records} == {max(ts for _, _, ts in SAMPLE)}
    assert {t for _, t, _, _ in _theirs(data)} == {max(ts for _, _, ts in SAMPLE)}


@pytest.mark.parametrize("magic", [0, 1])
def test_every_flipped_bit_is_detected_by_crc32(magic: int) -> None:
    data = encode_message(42, magic, 0, T0, b"key", b"value")
    assert read_message(data).value == b"value"
    for byte in range(16, len(data)):
        for bit in range(8):
            bad = bytearray(data)
            bad[byte] ^= 1 << bit
            with pytest.raises(DecodeError):
                read_message(bytes(bad), verify_crc=True)
    for byte in range(12, 16):  # the CRC field
        bad = bytearray(data)
        bad[byte] ^= 0x01
        with pytest.raises(DecodeError):
            read_message(bytes(bad))


def test_malformed_legacy_input() -> None:
    good = encode_message(0, 1, 0, T0, b"k", b"v")
    for cut in range(len(good)):
        with pytest.raises(DecodeError):
            read_message(good[:cut])
        with pytest.raises(DecodeError):
            list(iter_batches(good + good[:cut] if cut >= 17 else good[:cut] or b"\x00"))

    def msg(body: bytes, offset: int = 0) -> bytes:
        return struct.pack(">qiI", offset, len(body) + 4, zlib.crc32(body)) + body

    cases = [
        msg(
            b"\x01\x00" + struct.pack(">q", T0) + struct.pack(">i", -2) + struct.pack(">i", 0)
        ),  # key len -2
        msg(
            b"\x00\x00" + struct.pack(">i", 5) + b"ab" + struct.pack(">i", 0)
        ),  # key beyond message
        msg(b"\x00\x00" + struct.pack(">i", 0) + struct.pack(">i", 0) + b"extra"),  # trailing bytes
        msg(b"\x01\x00" + struct.pack(">i", 0) + struct.pack(">i", 0)),  # v1 too short
        msg(
            b"\x00\x07" + struct.pack(">i", -1) + struct.pack(">i", 3) + b"abc"
        ),  # codec 7, not a payload
        msg(
            b"\x00\x01" + struct.pack(">i", -1) + struct.pack(">i", -1)
        ),  # compressed with null value
        msg(b"\x00\x01" + struct.pack(">i", -1) + struct.pack(">i", 3) + b"abc"),  # not gzip
        msg(
            b"\x01\x04" + struct.pack(">q", T0) + struct.pack(">i", -1) + struct.pack(">i", 0)
        ),  # zstd in v1
    ]
    # wrappers around bad inner sets: empty, nested compression, magic mismatch
    for inner in (
        b"",
        encode_message(
            0, 0, Compression.GZIP, -1, None, compress(1, encode_message(0, 0, 0, -1, b"a", b"b"))
        ),
        encode_message(0, 1, 0, T0, b"a", b"b"),
    ):
        payload = compress(Compression.GZIP, inner)
        cases.append(encode_message(0, 0, Compression.GZIP, -1, None, payload))
    for bad in cases:
        with pytest.raises(DecodeError):
            list(iter_batches(bad, verify_crc=True))
        with pytest.raises(DecodeError):
            upconvert_to_v2(bad)
    with pytest.raises(UnsupportedCompressionError):
        LegacyMessageSetBuilder(1, Compression.ZSTD)


# -- conversion ----------------------------------------------------------------------------------


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", LEGACY_CODECS, ids=lambda c: c.name)
def test_upconvert_kafka_python_produce_requests(magic: int, codec: Compression) -> None:
    _needs_xxhash(magic, codec)
    kb = legacy_records.LegacyRecordBatchBuilder(
        magic=magic, compression_type=codec, batch_size=1 << 20
    )
    for i, (key, value, ts) in enumerate(SAMPLE):
        kb.append(i, ts, key, value)
    v2 = upconvert_to_v2(bytes(kb.build()))
    batches = list(iter_batches(v2, verify_crc=True))
    assert all(b.magic == 2 for b in batches)
    assert len(batches) == 1, "one batch per wrapper or per uncompressed run"
    (batch,) = batches
    assert batch.compression == codec
    assert [(r.key, r.value) for r in batch.records] == [(k, v) for k, v, _ in SAMPLE]
    assert [r.timestamp for r in batch.records] == [ts if magic else -1 for _, _, ts in SAMPLE]
    assert [r.offset for r in batch.records] == list(range(len(SAMPLE)))


def test_upconvert_groups_runs_and_wrappers() -> None:
    parts = []
    for i, codec in enumerate([0, 0, 1, 0, 2, 3]):
        b = LegacyMessageSetBuilder(1, codec, base_offset=i * 10)
        b.append(b"k%d" % i, b"v%d" % i, T0 + i)
        b.append(None, b"w%d" % i, T0 + i)
        parts.append(b.build())
    parts.append(LegacyMessageSetBuilder(0).build())
    b0 = LegacyMessageSetBuilder(0, base_offset=70)
    b0.append(b"old", b"magic0")
    parts.append(b0.build())  # a different magic starts a new run
    blob = b"".join(parts)
    v2 = upconvert_to_v2(blob)
    batches = list(iter_batches(v2, verify_crc=True))
    assert [b.compression for b in batches] == [0, 1, 0, 2, 3, 0]
    assert [len(b.records) for b in batches] == [4, 2, 2, 2, 2, 1]
    flat = [(r.offset, r.timestamp, r.key, r.value) for b in batches for r in b.records]
    assert flat == _ours(blob)
    assert flat[-1] == (70, -1, b"old", b"magic0")
    # a codec override re-compresses everything alike
    assert {b.compression for b in iter_batches(upconvert_to_v2(blob, compression=4))} == {4}


def test_upconvert_renumbers_offsets_that_do_not_increase() -> None:
    blob = b"".join(encode_message(0, 1, 0, T0 + i, b"k", b"v%d" % i) for i in range(3))
    (batch,) = list(iter_batches(upconvert_to_v2(blob)))
    assert [r.offset for r in batch.records] == [0, 1, 2]
    assert [r.value for r in batch.records] == [b"v0", b"v1", b"v2"]


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", LEGACY_CODECS, ids=lambda c: c.name)
def test_downconvert_round_trip(magic: int, codec: Compression) -> None:
    _needs_xxhash(magic, codec)
    b = RecordBatchBuilder(compression=codec, base_offset=300)
    for key, value, ts in SAMPLE:
        b.append(key, value, [("dropped", b"header")], ts)
    v2 = b.build()
    control = build_end_txn_marker_batch(True, 1, 0, 0, base_offset=304, timestamp=T0)
    empty = RecordBatchBuilder(base_offset=305).build()
    legacy = downconvert(v2 + control + empty, magic)
    expected = [(300 + i, _ts(magic, ts), k, v) for i, (k, v, ts) in enumerate(SAMPLE)]
    assert _theirs(legacy) == expected, "control and empty batches are skipped, headers dropped"
    for kbatch in memory_records.MemoryRecords(legacy):
        assert kbatch.magic == magic and kbatch.compression_type == codec and kbatch.validate_crc()
    back = upconvert_to_v2(legacy)
    (batch,) = list(iter_batches(back, verify_crc=True))
    assert [(r.offset, r.key, r.value) for r in batch.records] == [
        (o, k, v) for o, _, k, v in expected
    ]
    assert all(r.headers == [] for r in batch.records)
    again = downconvert(back, magic)
    assert _theirs(again) == expected


def test_downconvert_log_append_time_and_zstd() -> None:
    b = RecordBatchBuilder(timestamp_type=LOG_APPEND_TIME, compression=Compression.GZIP)
    for key, value, ts in SAMPLE:
        b.append(key, value, (), ts)
    legacy = downconvert(b.build(), 1)
    (wrapper,) = list(iter_messages(legacy))
    assert wrapper.timestamp_type == LOG_APPEND_TIME
    assert {t for _, t, _, _ in _theirs(legacy)} == {max(ts for _, _, ts in SAMPLE)}
    z = RecordBatchBuilder(compression=Compression.ZSTD)
    z.append(b"k", b"v", (), T0)
    with pytest.raises(UnsupportedCompressionError):
        downconvert(z.build(), 1)
    assert downconvert(b"", 0) == b""


@given(
    records=st.lists(
        st.tuples(
            st.one_of(st.none(), st.binary(max_size=50)),
            st.one_of(st.none(), st.binary(max_size=500)),
            st.integers(0, 2**45),
        ),
        min_size=1,
        max_size=20,
    ),
    codec=st.sampled_from([0, 1, 2, 3]),
    magic=st.sampled_from([0, 1]),
    base=st.integers(0, 2**40),
)
@settings(max_examples=100, deadline=None)
def test_conversion_round_trip_property(
    records: list[tuple[bytes | None, bytes | None, int]], codec: int, magic: int, base: int
) -> None:
    b = RecordBatchBuilder(compression=codec, base_offset=base)
    for key, value, ts in records:
        b.append(key, value, (), ts)
    v2 = b.build()
    original = [
        (r.offset, r.timestamp if magic else -1, r.key, r.value) for r in decode_batch(v2).records
    ]
    legacy = downconvert(v2, magic)
    assert _ours(legacy) == original
    assert [
        (r.offset, r.timestamp, r.key, r.value)
        for b in iter_batches(upconvert_to_v2(legacy))
        for r in b.records
    ] == original


@given(data=st.data())
@settings(max_examples=300, deadline=None)
def test_mutated_legacy_sets_raise_only_decode_error(data: st.DataObject) -> None:
    magic = data.draw(st.sampled_from([0, 1]))
    codec = data.draw(st.sampled_from([0, 1, 2, 3]))
    b = LegacyMessageSetBuilder(magic, codec)
    for key, value, ts in SAMPLE[:3]:
        b.append(key, value, ts)
    blob = bytearray(b.build())
    for _ in range(data.draw(st.integers(1, 5))):
        i = data.draw(st.integers(0, len(blob) - 1))
        blob[i] = data.draw(st.integers(0, 255))
    verify = data.draw(st.booleans())
    try:
        list(iter_batches(bytes(blob), verify_crc=verify))
    except DecodeError:
        pass
    try:
        upconvert_to_v2(bytes(blob), verify_crc=verify)
    except DecodeError:
        pass


def test_conversion_out_of_range_values_raise_decode_error() -> None:
    b = RecordBatchBuilder(base_offset=2**63 - 1)
    b.append(b"k", b"v", (), T0)
    b.append(b"k", b"v", (), T0)  # offset 2**63 does not fit a legacy int64 offset
    with pytest.raises(DecodeError):
        downconvert(b.build(), 1)
    with pytest.raises(EncodeError):
        encode_message(2**63, 1, 0, T0, None, b"")
    with pytest.raises(EncodeError):
        RecordBatchBuilder(base_offset=2**64).build()
