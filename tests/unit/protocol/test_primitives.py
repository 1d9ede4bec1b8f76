"""Primitive codecs against known byte encodings, hypothesis round trips, and typed errors on bad input.

Covers ints, varints (zig-zag), unsigned varints, strings/bytes/arrays (classic and compact, nullable), uuid, float64, bool.
"""

from __future__ import annotations

import math
import struct
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import PROTOCOL_SETTINGS

from kafkalite.protocol import primitives as p
from kafkalite.protocol.exceptions import DecodeError, EncodeError
from kafkalite.protocol.schema import F, Versions, request

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

ROUNDTRIP_SETTINGS = settings(PROTOCOL_SETTINGS, max_examples=200)


def _write(fn: Any, value: Any) -> bytes:
    out = bytearray()
    fn(out, value)
    return bytes(out)


# -- fixed-width ----------------------------------------------------------------------------------

FIXED = {
    "int8": (p.read_int8, p.write_int8, 1, -(2**7), 2**7 - 1),
    "int16": (p.read_int16, p.write_int16, 2, -(2**15), 2**15 - 1),
    "uint16": (p.read_uint16, p.write_uint16, 2, 0, 2**16 - 1),
    "int32": (p.read_int32, p.write_int32, 4, INT32_MIN, INT32_MAX),
    "int64": (p.read_int64, p.write_int64, 8, INT64_MIN, INT64_MAX),
}


@pytest.mark.parametrize(
    ("writer", "value", "expected"),
    [
        (p.write_int8, -1, b"\xff"),
        (p.write_int8, 127, b"\x7f"),
        (p.write_int8, -128, b"\x80"),
        (p.write_int16, 1, b"\x00\x01"),
        (p.write_int16, -2, b"\xff\xfe"),
        (p.write_uint16, 65535, b"\xff\xff"),
        (p.write_int32, 0x01020304, b"\x01\x02\x03\x04"),
        (p.write_int32, INT32_MIN, b"\x80\x00\x00\x00"),
        (p.write_int64, -1, b"\xff" * 8),
        (p.write_int64, INT64_MAX, b"\x7f" + b"\xff" * 7),
        (p.write_float64, 1.0, b"\x3f\xf0\x00\x00\x00\x00\x00\x00"),
        (p.write_float64, -2.5, b"\xc0\x04\x00\x00\x00\x00\x00\x00"),
        (p.write_bool, True, b"\x01"),
        (p.write_bool, False, b"\x00"),
    ],
)
def test_fixed_known_bytes(writer: Any, value: Any, expected: bytes) -> None:
    assert _write(writer, value) == expected


@pytest.mark.parametrize("name", sorted(FIXED))
def test_fixed_roundtrip_and_truncation(name: str) -> None:
    read, write, size, lo, hi = FIXED[name]

    @ROUNDTRIP_SETTINGS
    @given(st.integers(lo, hi), st.binary(max_size=3))
    def check(value: int, prefix: bytes) -> None:
        data = _write(write, value)
        assert len(data) == size
        assert read(prefix + data, len(prefix)) == (value, len(prefix) + size)
        for cut in range(size):
            with pytest.raises(DecodeError):
                read(data[:cut], 0)

    check()


@pytest.mark.parametrize("name", sorted(FIXED))
def test_fixed_out_of_range_is_encode_error(name: str) -> None:
    _, write, _, lo, hi = FIXED[name]
    for bad in (lo - 1, hi + 1):
        with pytest.raises(EncodeError):
            _write(write, bad)


@ROUNDTRIP_SETTINGS
@given(st.floats(allow_nan=True))
def test_float64_roundtrip(value: float) -> None:
    data = _write(p.write_float64, value)
    assert data == struct.pack(">d", value)
    got, pos = p.read_float64(data, 0)
    assert pos == 8
    assert (math.isnan(got) and math.isnan(value)) or (
        got == value and math.copysign(1, got) == math.copysign(1, value)
    )
    with pytest.raises(DecodeError):
        p.read_float64(data[:7], 0)


def test_bool_reads_any_nonzero_as_true() -> None:
    assert p.read_bool(b"\x00", 0) == (False, 1)
    assert p.read_bool(b"\x01", 0) == (True, 1)
    assert p.read_bool(b"\x02", 0) == (True, 1)
    with pytest.raises(DecodeError):
        p.read_bool(b"", 0)


# -- varints --------------------------------------------------------------------------------------

VARINT_KNOWN = [
    (0, b"\x00"),
    (-1, b"\x01"),
    (1, b"\x02"),
    (-2, b"\x03"),
    (63, b"\x7e"),
    (-64, b"\x7f"),
    (64, b"\x80\x01"),
    (-65, b"\x81\x01"),
    (300, b"\xd8\x04"),
    (INT32_MAX, b"\xfe\xff\xff\xff\x0f"),
    (INT32_MIN, b"\xff\xff\xff\xff\x0f"),
]
VARLONG_KNOWN = [
    *VARINT_KNOWN[:-2],
    (INT32_MAX, b"\xfe\xff\xff\xff\x0f"),
    (INT32_MIN, b"\xff\xff\xff\xff\x0f"),
    (2**31, b"\x80\x80\x80\x80\x10"),
    (INT64_MAX, b"\xfe" + b"\xff" * 8 + b"\x01"),
    (INT64_MIN, b"\xff" * 9 + b"\x01"),
]
UVARINT_KNOWN = [
    (0, b"\x00"),
    (1, b"\x01"),
    (127, b"\x7f"),
    (128, b"\x80\x01"),
    (300, b"\xac\x02"),
    (16383, b"\xff\x7f"),
    (16384, b"\x80\x80\x01"),
    (2**32 - 1, b"\xff\xff\xff\xff\x0f"),
]


@pytest.mark.parametrize(("value", "encoded"), VARINT_KNOWN)
def test_varint_known(value: int, encoded: bytes) -> None:
    assert _write(p.write_varint, value) == encoded
    assert p.read_varint(encoded, 0) == (value, len(encoded))
    assert p.varint_size(value) == len(encoded)


@pytest.mark.parametrize(("value", "encoded"), VARLONG_KNOWN)
def test_varlong_known(value: int, encoded: bytes) -> None:
    assert _write(p.write_varlong, value) == encoded
    assert p.read_varlong(encoded, 0) == (value, len(encoded))
    assert p.varint_size(value) == len(encoded)


@pytest.mark.parametrize(("value", "encoded"), UVARINT_KNOWN)
def test_uvarint_known(value: int, encoded: bytes) -> None:
    assert _write(p.write_uvarint, value) == encoded
    assert p.uvarint_bytes(value) == encoded
    assert p.read_uvarint(encoded, 0) == (value, len(encoded))
    assert p.read_uvarlong(encoded, 0) == (value, len(encoded))


@ROUNDTRIP_SETTINGS
@given(st.integers(INT32_MIN, INT32_MAX), st.binary(max_size=2))
def test_varint_roundtrip(value: int, prefix: bytes) -> None:
    data = _write(p.write_varint, value)
    assert 1 <= len(data) <= 5
    assert p.read_varint(prefix + data, len(prefix)) == (value, len(prefix) + len(data))
    with pytest.raises(DecodeError):
        p.read_varint(data[:-1], 0)


@ROUNDTRIP_SETTINGS
@given(st.integers(INT64_MIN, INT64_MAX))
def test_varlong_roundtrip(value: int) -> None:
    data = _write(p.write_varlong, value)
    assert 1 <= len(data) <= 10
    assert len(data) == p.varint_size(value)
    assert p.read_varlong(data, 0) == (value, len(data))
    with pytest.raises(DecodeError):
        p.read_varlong(data[:-1], 0)


@ROUNDTRIP_SETTINGS
@given(st.integers(0, 2**32 - 1))
def test_uvarint_roundtrip(value: int) -> None:
    data = _write(p.write_uvarint, value)
    assert p.read_uvarint(data, 0) == (value, len(data))
    for cut in range(len(data)):
        with pytest.raises(DecodeError):
            p.read_uvarint(data[:cut], 0)


def test_overlong_varints_are_decode_errors() -> None:
    with pytest.raises(DecodeError):
        p.read_uvarint(b"\x80" * 5 + b"\x00", 0)  # 6 bytes
    with pytest.raises(DecodeError):
        p.read_varint(b"\xff" * 6, 0)
    with pytest.raises(DecodeError):
        p.read_uvarlong(b"\x80" * 10 + b"\x00", 0)  # 11 bytes
    with pytest.raises(DecodeError):
        p.read_varlong(b"\xff" * 11, 0)


def test_varint_fifth_byte_overflow_is_decode_error() -> None:
    with pytest.raises(DecodeError):
        p.read_uvarint(b"\xff\xff\xff\xff\x7f", 0)


def test_varlong_tenth_byte_overflow_is_decode_error() -> None:
    with pytest.raises(DecodeError):
        p.read_uvarlong(b"\xff" * 9 + b"\x7f", 0)


@ROUNDTRIP_SETTINGS
@given(st.binary(max_size=12))
def test_varint_readers_never_raise_other_errors(data: bytes) -> None:
    for reader in (p.read_uvarint, p.read_uvarlong, p.read_varint, p.read_varlong):
        try:
            value, pos = reader(data, 0)
        except DecodeError:
            continue
        assert 0 < pos <= len(data)
        assert isinstance(value, int)


@pytest.mark.parametrize("value", [2**31, INT32_MIN - 1])
def test_varint_out_of_range_is_encode_error(value: int) -> None:
    with pytest.raises(EncodeError):
        _write(p.write_varint, value)


# -- strings and bytes ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("compact", "nullable", "value", "expected"),
    [
        (False, False, "", b"\x00\x00"),
        (False, False, "abc", b"\x00\x03abc"),
        (False, True, None, b"\xff\xff"),
        (False, True, "é", b"\x00\x02\xc3\xa9"),
        (True, False, "", b"\x01"),
        (True, False, "abc", b"\x04abc"),
        (True, True, None, b"\x00"),
        (True, True, "é", b"\x03\xc3\xa9"),
    ],
)
def test_string_known(compact: bool, nullable: bool, value: str | None, expected: bytes) -> None:
    read, write = p.STRING_CODECS[(compact, nullable)]
    assert _write(write, value) == expected
    assert read(expected, 0) == (value, len(expected))


@pytest.mark.parametrize(
    ("compact", "nullable", "value", "expected"),
    [
        (False, False, b"", b"\x00\x00\x00\x00"),
        (False, False, b"\x01\x02", b"\x00\x00\x00\x02\x01\x02"),
        (False, True, None, b"\xff\xff\xff\xff"),
        (True, False, b"", b"\x01"),
        (True, False, b"\x01\x02", b"\x03\x01\x02"),
        (True, True, None, b"\x00"),
    ],
)
def test_bytes_known(compact: bool, nullable: bool, value: bytes | None, expected: bytes) -> None:
    read, write = p.BYTES_CODECS[(compact, nullable)]
    assert _write(write, value) == expected
    assert read(expected, 0) == (value, len(expected))


@pytest.mark.parametrize("compact", [False, True])
def test_null_rejected_where_not_nullable(compact: bool) -> None:
    sread, swrite = p.STRING_CODECS[(compact, False)]
    bread, bwrite = p.BYTES_CODECS[(compact, False)]
    null_string = b"\x00" if compact else b"\xff\xff"
    null_bytes = b"\x00" if compact else b"\xff\xff\xff\xff"
    with pytest.raises(DecodeError):
        sread(null_string, 0)
    with pytest.raises(DecodeError):
        bread(null_bytes, 0)
    with pytest.raises(EncodeError):
        _write(swrite, None)
    with pytest.raises(EncodeError):
        _write(bwrite, None)


def test_negative_lengths_other_than_minus_one_are_decode_errors() -> None:
    # only the classic encodings can express a length below -1
    sread, _ = p.STRING_CODECS[(False, True)]
    with pytest.raises(DecodeError):
        sread(b"\xff\xfe", 0)  # -2
    bread, _ = p.BYTES_CODECS[(False, True)]
    with pytest.raises(DecodeError):
        bread(b"\xff\xff\xff\xfe", 0)
    with pytest.raises(DecodeError):
        p.STRING_CODECS[(False, False)][0](b"\x80\x00", 0)  # int16 min


def test_classic_string_length_limit() -> None:
    _, write = p.STRING_CODECS[(False, False)]
    read, _ = p.STRING_CODECS[(False, False)]
    ok = "x" * 0x7FFF
    data = _write(write, ok)
    assert data[:2] == b"\x7f\xff"
    assert read(data, 0) == (ok, len(data))
    with pytest.raises(EncodeError):
        _write(write, "x" * 0x8000)
    with pytest.raises(EncodeError):  # the limit counts UTF-8 bytes, not characters
        _write(write, "é" * 0x4000)
    # compact strings have no int16 limit
    cread, cwrite = p.STRING_CODECS[(True, False)]
    long = "y" * 0x8000
    assert cread(_write(cwrite, long), 0)[0] == long


@pytest.mark.parametrize("compact", [False, True])
@pytest.mark.parametrize("nullable", [False, True])
def test_invalid_utf8_is_decode_error(compact: bool, nullable: bool) -> None:
    read, _ = p.STRING_CODECS[(compact, nullable)]
    data = (b"\x03" if compact else b"\x00\x02") + b"\xc3\x28"
    with pytest.raises(DecodeError):
        read(data, 0)


@pytest.mark.parametrize("compact", [False, True])
@pytest.mark.parametrize("nullable", [False, True])
def test_string_and_bytes_roundtrip_and_truncation(compact: bool, nullable: bool) -> None:
    sread, swrite = p.STRING_CODECS[(compact, nullable)]
    bread, bwrite = p.BYTES_CODECS[(compact, nullable)]
    maybe_none = st.none() if nullable else st.nothing()

    @ROUNDTRIP_SETTINGS
    @given(st.text(max_size=40) | maybe_none, st.binary(max_size=40) | maybe_none)
    def check(text: str | None, blob: bytes | None) -> None:
        for read, write, value in ((sread, swrite, text), (bread, bwrite, blob)):
            data = _write(write, value)
            assert read(data + b"tail", 0) == (value, len(data))
            for cut in range(len(data)):
                with pytest.raises(DecodeError):
                    read(data[:cut], 0)

    check()


def test_oversized_declared_length_is_decode_error_not_allocation() -> None:
    # a length far beyond the bytes left must fail before any allocation
    for compact in (False, True):
        bread, _ = p.BYTES_CODECS[(compact, True)]
        huge = p.uvarint_bytes(2**31) if compact else b"\x7f\xff\xff\xff"
        with pytest.raises(DecodeError):
            bread(huge + b"abc", 0)
        sread, _ = p.STRING_CODECS[(compact, True)]
        huge_s = p.uvarint_bytes(2**20) if compact else b"\x7f\xff"
        with pytest.raises(DecodeError):
            sread(huge_s + b"abc", 0)


def test_named_string_helpers() -> None:
    assert _write(p.write_string, "ab") == b"\x00\x02ab"
    assert p.read_string(b"\x00\x02ab", 0) == ("ab", 4)
    assert _write(p.write_nullable_string, None) == b"\xff\xff"
    assert p.read_nullable_string(b"\xff\xff", 0) == (None, 2)


# -- lengths and arrays (through a tiny declared message) ----------------------------------------


@pytest.mark.parametrize(
    ("compact", "n", "expected"),
    [
        (False, 0, b"\x00\x00\x00\x00"),
        (False, -1, b"\xff\xff\xff\xff"),
        (True, 0, b"\x01"),
        (True, -1, b"\x00"),
    ],
)
def test_length_known(compact: bool, n: int, expected: bytes) -> None:
    assert _write(lambda out, v: p.write_length(out, v, compact), n) == expected
    assert p.read_length(expected, 0, compact) == (n, len(expected))


_ArrayProbe = request(
    32000,
    "ArrayProbeRequest",
    valid="0-1",
    flexible="1+",
    fields=[
        F("ints", "[]int32", "0+", nullable="0+"),
        F("names", "[]string", "0+"),
        F("items", "[]Item", "0+", fields=[F("id", "uuid", "0+"), F("ok", "bool", "0+")]),
    ],
)


@pytest.mark.parametrize(
    ("version", "msg_kwargs", "expected"),
    [
        (0, {"ints": None}, b"\xff\xff\xff\xff" + b"\x00\x00\x00\x00" * 2),
        (
            0,
            {"ints": [1], "names": ["a"]},
            b"\x00\x00\x00\x01\x00\x00\x00\x01"
            + b"\x00\x00\x00\x01\x00\x01a"
            + b"\x00\x00\x00\x00",
        ),
        (1, {"ints": None}, b"\x00\x01\x01\x00"),
        (1, {"ints": [1], "names": ["a"]}, b"\x02\x00\x00\x00\x01\x02\x02a\x01\x00"),
        (
            1,
            {"items": [_ArrayProbe.Item(id=uuid.UUID(int=1), ok=True)]},
            b"\x01\x01\x02" + b"\x00" * 15 + b"\x01\x01\x00" + b"\x00",
        ),
    ],
)
def test_arrays_known(version: int, msg_kwargs: dict[str, Any], expected: bytes) -> None:
    msg = _ArrayProbe(**msg_kwargs)
    assert msg.encode(version) == expected
    assert _ArrayProbe.decode(expected, version) == msg


def test_array_null_and_oversized_lengths() -> None:
    # names is not nullable: a null array is a decode error, in both encodings
    with pytest.raises(DecodeError):
        _ArrayProbe.decode(b"\x00\x00\x00\x00" + b"\xff\xff\xff\xff" + b"\x00\x00\x00\x00", 0)
    with pytest.raises(DecodeError):
        _ArrayProbe.decode(b"\x01\x00\x01\x00", 1)
    # a declared element count far beyond the bytes left fails before allocating
    with pytest.raises(DecodeError):
        _ArrayProbe.decode(b"\x7f\xff\xff\xff", 0)
    with pytest.raises(DecodeError):
        _ArrayProbe.decode(p.uvarint_bytes(2**31), 1)
    with pytest.raises(EncodeError):
        _ArrayProbe(names=None).encode(0)


# -- uuid -----------------------------------------------------------------------------------------


def test_uuid_known() -> None:
    u = uuid.UUID("01234567-89ab-cdef-0123-456789abcdef")
    data = _write(p.write_uuid, u)
    assert data == bytes.fromhex("0123456789abcdef0123456789abcdef")
    assert p.read_uuid(data, 0) == (u, 16)
    assert _write(p.write_uuid, None) == b"\x00" * 16
    assert p.read_uuid(b"\x00" * 16, 0) == (p.ZERO_UUID, 16)
    with pytest.raises(DecodeError):
        p.read_uuid(data[:15], 0)


@ROUNDTRIP_SETTINGS
@given(st.uuids(allow_nil=True))
def test_uuid_roundtrip(u: uuid.UUID) -> None:
    data = _write(p.write_uuid, u)
    assert p.read_uuid(b"x" + data, 1) == (u, 17)


def test_versions_parse() -> None:
    assert Versions.parse("3+") == Versions(3, 0x7FFF)
    assert Versions.parse("0-5") == Versions(0, 5)
    assert Versions.parse("7") == Versions(7, 7)
    assert Versions.parse("none").empty()
    assert 4 in Versions.parse("3+") and 2 not in Versions.parse("3+")


# -- tagged fields (through a tiny declared message) ------------------------------------------------

_TaggedProbe = request(
    32001,
    "TaggedProbeRequest",
    valid="0",
    flexible="0+",
    fields=[
        F("plain", "int32", "0+"),
        F("count", "int64", "0+", tag=0, tagged="0+", default=-1),
        F("label", "string", "0+", tag=1, tagged="0+", nullable="0+"),
        F("ids", "[]int32", "0+", tag=2, tagged="0+"),
        F("point", "Point", "0+", tag=3, tagged="0+", fields=[F("x", "int32", "0+", default=-1)]),
    ],
)


def test_tagged_fields_known_bytes() -> None:
    assert (
        _TaggedProbe(plain=1).encode(0) == b"\x00\x00\x00\x01\x00"
    )  # every tagged field at default
    msg = _TaggedProbe(plain=1, count=5, label="ab", ids=[7], point=_TaggedProbe.Point(x=2))
    expected = (
        b"\x00\x00\x00\x01"
        + b"\x04"  # four tagged fields, in tag order: tag, size, value
        + b"\x00\x08" + (5).to_bytes(8, "big")
        + b"\x01\x03\x03ab"
        + b"\x02\x05\x02\x00\x00\x00\x07"
        + b"\x03\x05\x00\x00\x00\x02\x00"
    )  # fmt: skip
    assert msg.encode(0) == expected
    assert _TaggedProbe.decode(expected, 0) == msg
    # tags out of order and unknown tags are read too
    reordered = (
        b"\x00\x00\x00\x01\x03"
        + b"\x01\x03\x03ab"
        + b"\x63\x01\xff"
        + b"\x00\x08"
        + (5).to_bytes(8, "big")
    )
    got = _TaggedProbe.decode(reordered, 0)
    assert (got.count, got.label, got.ids, got.point) == (5, "ab", [], _TaggedProbe.Point(x=-1))


def test_tagged_field_size_mismatch_is_decode_error() -> None:
    # tag 0 (int64) declared as 9 bytes: the value does not fill its declared size
    with pytest.raises(DecodeError):
        _TaggedProbe.decode(b"\x00\x00\x00\x01\x01\x00\x09" + bytes(9), 0)
    # declared size beyond the end
    with pytest.raises(DecodeError):
        _TaggedProbe.decode(b"\x00\x00\x00\x01\x01\x00\x09" + bytes(8), 0)
    # more tagged fields announced than bytes left
    with pytest.raises(DecodeError):
        _TaggedProbe.decode(b"\x00\x00\x00\x01\x7f", 0)


@pytest.mark.parametrize(
    ("field", "bad"),
    [
        ("count", "x"),
        ("label", 5),
        ("ids", 5),
        ("point", 5),  # a struct codec wraps its own field errors
    ],
)
def test_wrong_typed_tagged_value_is_encode_error(field: str, bad: Any) -> None:
    msg = _TaggedProbe(**{field: bad})
    with pytest.raises(EncodeError):
        msg.encode(0)


# -- spliced output (large bytes values written beside the encoding, not copied into it) ----------


@pytest.mark.parametrize("version", [3, 8, 9, 11])
def test_spliced_output_matches_plain_encoding(version: int) -> None:
    import kafkalite.protocol.messages  # noqa: F401  (registers every API)
    from kafkalite.protocol.schema import APIS

    R: Any = APIS[0].request
    big = memoryview(bytearray(b"\x07" * (p.SPLICE_MIN + 5)))
    other = b"\x09" * (p.SPLICE_MIN * 2)
    small = b"\x01\x02\x03"
    req = R(
        transactional_id=None,
        acks=1,
        timeout_ms=3000,
        topic_data=[
            R.TopicProduceData(
                name="t",
                partition_data=[
                    R.TopicProduceData.PartitionProduceData(index=0, records=big),
                    R.TopicProduceData.PartitionProduceData(index=1, records=small),
                    R.TopicProduceData.PartitionProduceData(index=2, records=other),
                ],
            )
        ],
    )
    out = p.SplicedOutput(4)
    req.encode_into(out, version)
    parts = out.parts()
    whole = b"\x00" * 4 + req.encode(version)
    assert out.getvalue() == whole and out.total_size == len(whole)
    assert b"".join(parts) == whole
    # the large values are the caller's own objects; the small one was copied into the bytearray
    assert any(part is big for part in parts) and any(part is other for part in parts)
    assert not any(part is small for part in parts)
    # prefix, big, the bytes between, other, then the tagged-field trailers of flexible versions
    assert len(parts) == (5 if version >= 9 else 4)


def test_spliced_output_without_splices_is_itself() -> None:
    out = p.SplicedOutput(4)
    p.BYTES_CODECS[(False, False)][1](out, b"small")
    assert not out.spliced and out.parts() == [out] and out.total_size == len(out) == 13
    assert out.getvalue() == b"\x00" * 4 + b"\x00\x00\x00\x05small"
