"""RecordBatch v2: interop with kafka-python's reader and builder in every codec, header fields, control
batches, CRC-32C coverage of every bit, and malformed input raising only DecodeError."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalite.protocol.exceptions import DecodeError, EncodeError
from kafkalite.records import header as hdr
from kafkalite.records.batch import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    Record,
    RecordBatchBuilder,
    build_batch,
    decode_all,
    decode_batch,
    iter_batches,
    zigzag_bytes,
)
from kafkalite.records.compression import Compression, DecompressionLimitExceeded
from kafkalite.records.control import (
    ControlRecordType,
    build_end_txn_marker_batch,
    parse_control_key,
    parse_end_txn_marker,
)

default_records = pytest.importorskip("kafka.record.default_records")
memory_records = pytest.importorskip("kafka.record.memory_records")

CODECS = list(Compression)
T0 = 1_700_000_000_000

SAMPLE = [
    (b"key", b"value", [("h1", b"v1"), ("empty", b""), ("null", None)], T0),
    (None, b"null key", [], T0 + 5),
    (b"null value", None, [], T0 - 3),  # timestamps need not increase
    (b"", b"", [], T0 + 70_000),  # multi-byte timestamp delta
    (None, None, [("\u00e9t\u00e9", b"\x00\xff")], T0 + 1),
    (b"k" * 300, b"v" * 20_000, [], T0 + 2),  # 2- and 3-byte length varints
]


def _ours(records: list[Record]) -> list[tuple[object, ...]]:
    return [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in records]


def _theirs(data: bytes) -> list[tuple[object, ...]]:
    out = []
    for batch in memory_records.MemoryRecords(data):
        for r in batch:
            out.append((r.offset, r.timestamp, r.key, r.value, list(r.headers)))
    return out


def _build(codec: int = 0, **kw: object) -> bytes:
    b = RecordBatchBuilder(compression=codec, **kw)  # type: ignore[arg-type]
    for key, value, headers, ts in SAMPLE:
        b.append(key, value, headers, ts)
    return b.build()


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_kafka_python_reads_our_batches(codec: Compression) -> None:
    data = _build(codec, base_offset=1000)
    kbatch = default_records.DefaultRecordBatch(data)
    assert kbatch.validate_crc()
    assert kbatch.compression_type == codec
    assert kbatch.base_offset == 1000
    assert kbatch.last_offset_delta == len(SAMPLE) - 1
    assert kbatch.records_count == len(SAMPLE)
    assert kbatch.first_timestamp == T0
    assert kbatch.max_timestamp == max(s[3] for s in SAMPLE)
    expected = [(1000 + i, ts, k, v, h) for i, (k, v, h, ts) in enumerate(SAMPLE)]
    assert _theirs(data) == expected
    batch = decode_batch(data, verify_crc=True)
    assert _ours(batch.records) == expected


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_we_read_kafka_python_batches(codec: Compression) -> None:
    kb = default_records.DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=False,
        producer_id=77,
        producer_epoch=3,
        base_sequence=12,
        batch_size=1 << 20,
    )
    # kafka-python's payload is compressible so it really compresses
    for i, (key, value, headers, ts) in enumerate(SAMPLE):
        kb.append(i, ts, key, value, headers)
    data = bytes(kb.build())
    batch = decode_batch(data, verify_crc=True)
    assert batch.compression == codec
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (77, 3, 12)
    assert batch.last_sequence == 12 + len(SAMPLE) - 1
    assert _ours(batch.records) == _theirs(data)
    assert [r.key for r in batch.records] == [s[0] for s in SAMPLE]


def test_header_fields_and_flags() -> None:
    data = _build(
        Compression.LZ4,
        base_offset=5,
        producer_id=9,
        producer_epoch=2,
        base_sequence=2**31 - 2,
        is_transactional=True,
        partition_leader_epoch=17,
    )
    batch = decode_batch(data, verify_crc=True)
    h = hdr.parse_batch_header(data)
    assert hdr.crc_valid(data, 0, h)
    for name in (
        "base_offset",
        "batch_length",
        "partition_leader_epoch",
        "magic",
        "crc",
        "attributes",
        "last_offset_delta",
        "base_timestamp",
        "max_timestamp",
        "producer_id",
        "producer_epoch",
        "base_sequence",
        "records_count",
    ):
        assert getattr(batch, name) == getattr(h, name), name
    assert batch.size == h.size == len(data)
    assert batch.is_transactional and not batch.is_control
    assert batch.partition_leader_epoch == 17
    assert batch.last_sequence == (2**31 - 2 + 5) & 0x7FFFFFFF  # sequences wrap
    assert batch.next_offset == 5 + len(SAMPLE)
    assert batch.timestamp_type == CREATE_TIME
    assert batch.delete_horizon_ms is None
    kbatch = default_records.DefaultRecordBatch(data)
    assert kbatch.is_transactional and kbatch.producer_id == 9


def test_log_append_time_batches_report_max_timestamp() -> None:
    data = _build(timestamp_type=LOG_APPEND_TIME)
    batch = decode_batch(data)
    assert batch.timestamp_type == LOG_APPEND_TIME
    assert {r.timestamp for r in batch.records} == {batch.max_timestamp}
    assert {t[1] for t in _theirs(data)} == {batch.max_timestamp}
    # the broker's in-place stamping (header module) is read back the same way
    buf = bytearray(_build())
    hdr.set_max_timestamp_and_type(buf, 0, len(buf), T0 + 999, True)
    stamped = decode_batch(bytes(buf), verify_crc=True)
    assert {r.timestamp for r in stamped.records} == {T0 + 999}


def test_delete_horizon_flag() -> None:
    b = RecordBatchBuilder(delete_horizon_ms=T0 + 86_400_000)
    b.append(b"k", None, (), T0)
    data = b.build()
    batch = decode_batch(data, verify_crc=True)
    assert batch.has_delete_horizon
    assert batch.delete_horizon_ms == T0 + 86_400_000
    assert batch.attributes & hdr.DELETE_HORIZON_MASK
    assert batch.records[0].timestamp == T0  # negative delta from the horizon


@pytest.mark.parametrize("commit", [True, False])
def test_control_batches(commit: bool) -> None:
    data = build_end_txn_marker_batch(
        commit,
        producer_id=4242,
        producer_epoch=7,
        coordinator_epoch=31,
        base_offset=88,
        timestamp=T0,
    )
    batch = decode_batch(data, verify_crc=True)
    assert batch.is_control and batch.is_transactional
    assert batch.producer_id == 4242 and batch.producer_epoch == 7
    (rec,) = batch.records
    assert rec.offset == 88
    marker = parse_end_txn_marker(rec)
    assert marker.is_commit is commit
    assert marker.coordinator_epoch == 31
    assert parse_control_key(rec.key) == (
        0,
        ControlRecordType.COMMIT if commit else ControlRecordType.ABORT,
    )
    kbatch = default_records.DefaultRecordBatch(data)
    assert kbatch.is_control_batch
    (krec,) = list(kbatch)
    assert krec.commit is commit and krec.abort is (not commit)
    with pytest.raises(DecodeError):
        parse_end_txn_marker(Record(0, 0, b"\x00\x00\x00\x02", b"", []))
    with pytest.raises(DecodeError):
        parse_control_key(b"\x00")


def test_append_with_offset_gaps_and_last_offset_delta() -> None:
    b = RecordBatchBuilder(base_offset=100)
    b.append_with_offset(100, b"a", b"1", (), T0)
    b.append_with_offset(103, b"b", b"2", (), T0)
    with pytest.raises(EncodeError):
        b.append_with_offset(103, b"c", b"3", (), T0)
    data = b.build(last_offset_delta=9)
    batch = decode_batch(data, verify_crc=True)
    assert [r.offset for r in batch.records] == [100, 103]
    assert batch.last_offset == 109 and batch.records_count == 2
    assert [t[0] for t in _theirs(data)] == [100, 103]


def test_empty_batch_and_sizes() -> None:
    b = RecordBatchBuilder(
        compression=Compression.GZIP, producer_id=1, producer_epoch=0, base_sequence=0
    )
    assert len(b) == 0 and b.estimated_size == hdr.HEADER_SIZE
    data = b.build(last_offset_delta=4)
    assert len(data) == hdr.HEADER_SIZE
    batch = decode_batch(data, verify_crc=True)
    assert batch.records == [] and batch.last_offset_delta == 4
    assert batch.base_timestamp == batch.max_timestamp == -1
    b = RecordBatchBuilder()
    for i in range(50):
        b.append(b"k%d" % i, b"v" * i, (), T0)
    assert len(b) == 50
    assert b.estimated_size == len(b.build())


def test_build_batch_convenience_and_default_timestamp() -> None:
    data = build_batch([(b"a", b"1"), (b"b", b"2", [("h", b"x")], T0)], base_offset=7)
    recs = decode_batch(data).records
    assert [(r.offset, r.key, r.value, r.headers) for r in recs] == [
        (7, b"a", b"1", []),
        (8, b"b", b"2", [("h", b"x")]),
    ]
    assert recs[0].timestamp > T0 and recs[1].timestamp == T0


def test_zigzag_encoding_matches_protocol_primitives() -> None:
    from kafkalite.protocol.primitives import write_varlong

    for v in [0, 1, -1, 63, -64, 64, 8191, -8192, 8192, 2**31 - 1, -(2**31), 2**62, -(2**63)]:
        out = bytearray()
        write_varlong(out, v)
        assert zigzag_bytes(v) == bytes(out), v


def test_iter_batches_over_a_blob() -> None:
    blob = b"".join(_build(c, base_offset=i * 10) for i, c in enumerate(CODECS))
    batches = list(iter_batches(blob, verify_crc=True))
    assert [b.compression for b in batches] == CODECS
    assert len(decode_all(blob)) == len(SAMPLE) * len(CODECS)
    for cut in (1, 11, 12, 60, 61, 100):
        truncated = blob[:-cut]
        assert len(list(iter_batches(truncated, allow_truncated_tail=True))) == len(CODECS) - 1
        with pytest.raises(DecodeError):
            list(iter_batches(truncated))
    assert list(iter_batches(b"")) == []


def test_memoryview_and_bytearray_inputs_and_offsets() -> None:
    data = _build(base_offset=3)
    blob = b"\x00" * 5 + data
    expected = _ours(decode_batch(data).records)
    assert _ours(decode_batch(blob, 5).records) == expected
    assert _ours(decode_batch(bytearray(blob), 5).records) == expected
    assert _ours(decode_batch(memoryview(blob), 5, verify_crc=True).records) == expected


def test_decompression_limit_applies_to_batches() -> None:
    b = RecordBatchBuilder(compression=Compression.ZSTD)
    b.append(None, b"\x00" * 2_000_000, (), T0)
    data = b.build()
    with pytest.raises(DecompressionLimitExceeded):
        decode_batch(data, max_decompressed_size=1 << 20)
    assert len(decode_batch(data).records[0].value or b"") == 2_000_000


# -- CRC coverage -----------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.SNAPPY], ids=lambda c: c.name)
def test_every_flipped_bit_in_crc_range_is_detected(codec: Compression) -> None:
    b = RecordBatchBuilder(compression=codec, producer_id=3, producer_epoch=1, base_sequence=0)
    b.append(b"k", b"value", [("h", b"x")], T0)
    b.append(None, b"v2", (), T0 + 1)
    data = b.build()
    assert decode_batch(data, verify_crc=True)
    for byte in range(hdr.ATTRIBUTES_OFFSET, len(data)):
        for bit in range(8):
            bad = bytearray(data)
            bad[byte] ^= 1 << bit
            with pytest.raises(DecodeError):
                decode_batch(bytes(bad), verify_crc=True)
            try:
                h = hdr.parse_batch_header(bad)
            except DecodeError:
                continue  # the header view refuses it outright
            assert not hdr.crc_valid(bad, 0, h)
    # the CRC field itself, and the fields before it that the CRC does not cover
    for byte in range(hdr.CRC_OFFSET, hdr.ATTRIBUTES_OFFSET):
        bad = bytearray(data)
        bad[byte] ^= 0x10
        with pytest.raises(DecodeError):
            decode_batch(bytes(bad), verify_crc=True)
    moved = bytearray(data)
    hdr.set_base_offset(moved, 0, 12345)
    hdr.set_partition_leader_epoch(moved, 0, 9)
    assert decode_batch(bytes(moved), verify_crc=True).base_offset == 12345


# -- malformed input --------------------------------------------------------------------------------


def _raw_batch(records_section: bytes, count: int, codec: int = 0) -> bytes:
    """A batch with a hand-written records section and a valid CRC."""
    body = (
        struct.pack(">hiqqqhii", codec, max(count - 1, 0), T0, T0, -1, -1, -1, count)
        + records_section
    )
    import crc32c

    return struct.pack(">qiibI", 0, len(body) + 9, -1, 2, crc32c.crc32c(body)) + body


def _record(fields: bytes) -> bytes:
    return zigzag_bytes(len(fields)) + fields


GOOD = (
    b"\x00"
    + zigzag_bytes(0)
    + zigzag_bytes(0)
    + zigzag_bytes(1)
    + b"k"
    + zigzag_bytes(1)
    + b"v"
    + b"\x00"
)


def test_hand_written_batch_is_valid() -> None:
    (rec,) = decode_batch(_raw_batch(_record(GOOD), 1), verify_crc=True).records
    assert (rec.key, rec.value) == (b"k", b"v")


@pytest.mark.parametrize(
    ("section", "count"),
    [
        (_record(GOOD), 2),  # more records declared than present
        (_record(GOOD) * 2, 1),  # fewer declared: bytes left over
        (_record(GOOD)[:-1], 1),  # truncated record
        (zigzag_bytes(100) + GOOD, 1),  # length beyond the batch
        (zigzag_bytes(len(GOOD) - 1) + GOOD, 1),  # length shorter than the fields
        (zigzag_bytes(-5) + GOOD, 1),  # negative length
        (b"\xff" * 11 + GOOD, 1),  # varint longer than 10 bytes
        (_record(b"\x00" + b"\xff" * 12), 1),  # runaway timestamp varint
        (
            _record(b"\x00\x00\x00" + zigzag_bytes(-2) + zigzag_bytes(1) + b"v\x00"),
            1,
        ),  # key length -2
        (_record(b"\x00\x00\x00\x01" + zigzag_bytes(-7) + b"\x00"), 1),  # value length -7
        (_record(b"\x00\x00\x00\x01\x01" + zigzag_bytes(-1)), 1),  # negative header count
        (_record(b"\x00\x00\x00\x01\x01\x02" + zigzag_bytes(-1) + b"\x01"), 1),  # null header key
        (_record(b"\x00\x00\x00\x01\x01\x02\x02\xff\xfe\x01"), 1),  # header key not UTF-8
        (
            _record(b"\x00\x00\x00\x01\x01\x02\x02ab" + zigzag_bytes(9) + b"x"),
            1,
        ),  # header value too long
        (
            _record(b"\x00\x00\x00\x01\x01" + zigzag_bytes(1000)),
            1,
        ),  # header count beyond the record
        (b"", 1),
        (b"", -1),
    ],
)
def test_malformed_records_raise_decode_error(section: bytes, count: int) -> None:
    data = _raw_batch(section, count)
    with pytest.raises(DecodeError):
        decode_batch(data, verify_crc=True)


def test_malformed_headers_raise_decode_error() -> None:
    data = _build()
    cases = [
        data[:60],  # short header
        data[:-1],  # batch length beyond the buffer
        data[:16] + b"\x03" + data[17:],  # unknown magic
        data[:8] + struct.pack(">i", 20) + data[12:],  # length shorter than a header
        data[:23] + struct.pack(">i", -1) + data[27:],  # negative last offset delta
        data[:21] + struct.pack(">h", 6) + data[23:],  # unknown codec
        data[:21] + struct.pack(">h", 1) + data[23:],  # says gzip, is not
    ]
    for bad in cases:
        with pytest.raises(DecodeError):
            decode_batch(bad)
    with pytest.raises(DecodeError):
        decode_batch(data, pos=len(data))
    with pytest.raises(DecodeError):
        list(iter_batches(data[:8] + struct.pack(">i", -3) + data[12:]))
    with pytest.raises(DecodeError):
        list(iter_batches(data[:16] + b"\x07" + data[17:]))


def test_every_truncation_raises_decode_error() -> None:
    for codec in CODECS:
        data = _build(codec)
        for cut in range(len(data)):
            with pytest.raises(DecodeError):
                decode_batch(data[:cut])
            # and with the length field patched to match the cut: the records are cut
            if cut > hdr.HEADER_SIZE:
                patched = data[:8] + struct.pack(">i", cut - 12) + data[12:cut]
                with pytest.raises(DecodeError):
                    decode_batch(patched)


# -- properties -----------------------------------------------------------------------------------

header_st = st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=20)))
record_st = st.tuples(
    st.one_of(st.none(), st.binary(max_size=200)),
    st.one_of(st.none(), st.binary(max_size=3000)),
    st.lists(header_st, max_size=3),
    st.integers(-(2**40), 2**41),
)


@given(
    records=st.lists(record_st, max_size=30),
    codec=st.sampled_from(CODECS),
    base_offset=st.integers(0, 2**62),
    gaps=st.lists(st.integers(0, 70_000), max_size=30),
)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_round_trip_property(
    records: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]],
    codec: Compression,
    base_offset: int,
    gaps: list[int],
) -> None:
    b = RecordBatchBuilder(compression=codec, base_offset=base_offset)
    offset = base_offset
    expected = []
    for i, (k, v, h, ts) in enumerate(records):
        offset += gaps[i] if i < len(gaps) and i else 0
        b.append_with_offset(offset, k, v, h, ts)
        expected.append((offset, ts, k, v, h))
        offset += 1
    data = b.build()
    batch = decode_batch(data, verify_crc=True)
    assert _ours(batch.records) == expected
    assert _theirs(data) == expected


@given(data=st.data())
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_mutated_batches_raise_only_decode_error(data: st.DataObject) -> None:
    codec = data.draw(st.sampled_from(CODECS))
    blob = bytearray(
        _build(codec) if data.draw(st.booleans()) else _raw_batch(_record(GOOD) * 3, 3)
    )
    for _ in range(data.draw(st.integers(1, 6))):
        i = data.draw(st.integers(0, len(blob) - 1))
        blob[i] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        del blob[data.draw(st.integers(0, len(blob))) :]
    try:
        for batch in iter_batches(bytes(blob), verify_crc=data.draw(st.booleans())):
            assert isinstance(batch.records, list)
    except DecodeError:
        pass


@given(
    section=st.binary(max_size=200),
    count=st.integers(-3, 40),
    codec=st.sampled_from([0, 0, 0, 2, 3]),
)
@settings(max_examples=400, deadline=None)
def test_random_record_sections_raise_only_decode_error(
    section: bytes, count: int, codec: int
) -> None:
    try:
        decode_batch(_raw_batch(section, count, codec), verify_crc=True)
    except DecodeError:
        pass
