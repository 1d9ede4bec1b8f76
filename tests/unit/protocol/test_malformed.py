"""Malformed input for the whole protocol layer: truncations, oversized and negative lengths, bad varints,
unknown APIs/versions, and a seeded fuzz of 100,000+ mutated frames that may only ever raise DecodeError.
"""

from __future__ import annotations

import random
import struct
import sys
import time
import traceback
import tracemalloc
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from strategies import INT_RANGES, message_cases, present_fields

import kafkalite.protocol.messages  # noqa: F401  (registers every API family that exists)
from kafkalite.protocol import primitives as p
from kafkalite.protocol.exceptions import DecodeError, EncodeError, UnsupportedVersionError
from kafkalite.protocol.framing import FrameDecoder, frame
from kafkalite.protocol.headers import (
    RequestHeader,
    decode_request_header,
    decode_response_header,
    encode_request_header,
    encode_response_header,
    peek_api,
    request_header_version,
    response_header_version,
)
from kafkalite.protocol.schema import (
    APIS,
    F,
    Message,
    Request,
    Struct,
    Versions,
    all_versions,
    data,
)

# ---------------------------------------------------------------------------------------------------------
# Seeded builders of valid messages (the fuzz must not depend on hypothesis' shrinking or database)


def _prim(t: str, rnd: random.Random) -> Any:
    if t in INT_RANGES:
        lo, hi = INT_RANGES[t]
        return rnd.choice((lo, hi, 0, -1 if lo < 0 else 1, rnd.randint(lo, hi)))
    if t == "bool":
        return rnd.random() < 0.5
    if t == "float64":
        return rnd.choice((0.0, -1.5, 1e300, rnd.random()))
    if t == "uuid":
        return uuid.UUID(int=rnd.getrandbits(128))
    if t == "string":
        return "".join(rnd.choice("abcXYZ09-._é€") for _ in range(rnd.randint(0, 8)))
    if t in ("bytes", "records"):
        return rnd.randbytes(rnd.randint(0, 24))
    raise ValueError(t)


def build(
    cls: type[Struct], version: int, rnd: random.Random, *, rich: bool = False, depth: int = 0
) -> Any:
    """A valid instance of `cls` at `version`; `rich` makes arrays non-empty and values mostly non-null."""
    schema = cls._schema
    kw: dict[str, Any] = {}
    present = set(present_fields(cls, version))
    for fdecl in schema.fields:
        if fdecl.name not in present:
            continue
        nullable = version in Versions.parse(fdecl.nullable)
        if nullable and rnd.random() < (0.05 if rich else 0.25):
            kw[fdecl.name] = None
            continue
        is_array = fdecl.type.startswith("[]")
        elem = fdecl.type[2:] if is_array else fdecl.type
        child = schema.children.get(fdecl.name)

        def one(child: type[Struct] | None = child, elem: str = elem) -> Any:
            if child is not None:
                return build(child, version, rnd, rich=rich, depth=depth + 1)
            return _prim(elem, rnd)

        if is_array:
            n = rnd.randint(1, 2) if rich else rnd.randint(0, 3 if depth == 0 else 2)
            kw[fdecl.name] = [one() for _ in range(n)]
        else:
            kw[fdecl.name] = one()
    return cls(**kw)


CASES = list(message_cases())
REQUEST_CASES = [c for c in CASES if issubclass(c[1], Request)]


def encode_request_frame(
    req: Any, version: int, correlation_id: int, client_id: str | None
) -> bytes:
    """Header + body of one request (without the 4-byte size prefix)."""
    cls = type(req)
    out = bytearray()
    hv = request_header_version(cls.API_KEY, version, cls.is_flexible(version))
    encode_request_header(out, RequestHeader(cls.API_KEY, version, correlation_id, client_id), hv)
    req.encode_into(out, version)
    return bytes(out)


def decode_request_frame(frame_bytes: bytes) -> tuple[RequestHeader, Any]:
    """What a broker does with one frame: peek, look the API up, decode header and body."""
    key, ver, _ = peek_api(frame_bytes)
    api = APIS.get(key)
    if api is None:
        raise UnsupportedVersionError(key, ver, f"unknown api key {key}")
    if ver not in api.request.VALID_VERSIONS:
        raise UnsupportedVersionError(key, ver)
    hv = request_header_version(key, ver, api.request.is_flexible(ver))
    header, pos = decode_request_header(frame_bytes, hv)
    return header, api.request.decode(frame_bytes, ver, pos)


# ---------------------------------------------------------------------------------------------------------
# Truncation at every byte of a real message


@pytest.mark.parametrize(("cls", "version"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_every_strict_prefix_of_a_message_is_a_decode_error(
    cls: type[Message], version: int
) -> None:
    rnd = random.Random(f"{cls.__name__}-{version}")
    msg = build(cls, version, rnd, rich=True)
    body = msg.encode(version)
    assert cls.decode(body, version) == msg
    for n in range(len(body)):
        with pytest.raises(DecodeError):
            cls.decode(body[:n], version)
        with pytest.raises(DecodeError):  # a memoryview prefix behaves the same
            cls.decode(memoryview(body)[:n], version)


@pytest.mark.parametrize(
    ("cls", "version"), [c[1:] for c in REQUEST_CASES], ids=[c[0] for c in REQUEST_CASES]
)
def test_every_strict_prefix_of_a_request_frame_is_a_decode_error(
    cls: type[Message], version: int
) -> None:
    rnd = random.Random(f"frame-{cls.__name__}-{version}")
    msg = build(cls, version, rnd, rich=True)
    raw = encode_request_frame(msg, version, 42, "client-é")
    header, decoded = decode_request_frame(raw)
    assert decoded == msg
    assert (header.api_key, header.api_version, header.correlation_id) == (cls.API_KEY, version, 42)
    for n in range(len(raw)):
        with pytest.raises(DecodeError):
            decode_request_frame(raw[:n])


def test_trailing_garbage_after_a_body_is_a_decode_error() -> None:
    for _, cls, version in CASES:
        body = cls().encode(version)
        with pytest.raises(DecodeError, match="trailing"):
            cls.decode(body + b"\x00", version)


# ---------------------------------------------------------------------------------------------------------
# A probe struct with every kind of length, declared here so the bytes can be written by hand.
# v0 is classic (int16/int32 lengths), v1 flexible (unsigned-varint N+1 lengths, tagged fields).

Probe = data(
    "MalformedProbe",
    valid="0-1",
    flexible="1+",
    fields=[
        F("name", "string", "0+"),
        F("note", "string", "0+", nullable="0+"),
        F("blob", "bytes", "0+"),
        F("maybe_blob", "bytes", "0+", nullable="0+"),
        F("ids", "[]int32", "0+"),
        F("maybe_ids", "[]int64", "0+", nullable="0+"),
        F("items", "[]Item", "0+", fields=[F("flag", "bool", "0+"), F("label", "string", "0+")]),
        F("extra", "int32", "1+", tag=0, tagged="1+", default=-1),
        F("hint", "string", "1+", tag=3, tagged="1+"),
    ],
)

EMPTY_V0 = (
    b"\x00\x00"  # name ""
    + b"\xff\xff"  # note null
    + b"\x00\x00\x00\x00"  # blob b""
    + b"\xff\xff\xff\xff"  # maybe_blob null
    + b"\x00\x00\x00\x00"  # ids []
    + b"\xff\xff\xff\xff"  # maybe_ids null
    + b"\x00\x00\x00\x00"  # items []
)
EMPTY_V1 = b"\x01\x00\x01\x00\x01\x00\x01" + b"\x00"  # same values, compact, empty tag section
# byte offsets of each length field in EMPTY_V0 / EMPTY_V1
V0_OFFSETS = {
    "name": 0,
    "note": 2,
    "blob": 4,
    "maybe_blob": 8,
    "ids": 12,
    "maybe_ids": 16,
    "items": 20,
}
V0_WIDTH = {"name": 2, "note": 2}  # others are int32
V1_OFFSETS = {
    "name": 0,
    "note": 1,
    "blob": 2,
    "maybe_blob": 3,
    "ids": 4,
    "maybe_ids": 5,
    "items": 6,
}


def _v0_with(field: str, length: int, payload: bytes = b"") -> bytes:
    off = V0_OFFSETS[field]
    width = V0_WIDTH.get(field, 4)
    raw = struct.pack(">h" if width == 2 else ">i", length)
    return EMPTY_V0[:off] + raw + payload + EMPTY_V0[off + width :]


def _v1_with(field: str, length_varint: bytes, payload: bytes = b"") -> bytes:
    off = V1_OFFSETS[field]
    return EMPTY_V1[:off] + length_varint + payload + EMPTY_V1[off + 1 :]


def test_probe_baseline_decodes() -> None:
    v0 = Probe.decode(EMPTY_V0, 0)
    assert (v0.name, v0.note, v0.blob, v0.maybe_blob, v0.ids, v0.maybe_ids, v0.items) == (
        "",
        None,
        b"",
        None,
        [],
        None,
        [],
    )
    assert v0.encode(0) == EMPTY_V0
    v1 = Probe.decode(EMPTY_V1, 1)
    assert v1 == v0
    assert v1.encode(1) == EMPTY_V1
    full = Probe(
        name="n",
        note="x",
        blob=b"ab",
        maybe_blob=b"",
        ids=[1, -2],
        maybe_ids=[3],
        items=[Probe.Item(flag=True, label="l")],
        extra=7,
        hint="h",
    )
    assert Probe.decode(full.encode(1), 1) == full
    assert _v0_with("name", 3, b"abc") != EMPTY_V0
    assert Probe.decode(_v0_with("name", 3, b"abc"), 0).name == "abc"
    assert Probe.decode(_v1_with("blob", b"\x03", b"xy"), 1).blob == b"xy"


def _assert_small_allocation(
    fn: Callable[[], Any], limit: int = 1 << 20, match: str | None = None
) -> None:
    """Run fn (which must raise DecodeError) and check it never held more than `limit` bytes."""
    tracemalloc.start()
    try:
        with pytest.raises(DecodeError, match=match):
            fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < limit, f"decoding a tiny malformed buffer allocated {peak} bytes"


@pytest.mark.parametrize("field", ["blob", "maybe_blob", "ids", "maybe_ids", "items"])
@pytest.mark.parametrize("declared", [2**31 - 1, 2**30, 1000, 100_000])
def test_oversized_int32_length_is_rejected_without_allocating(field: str, declared: int) -> None:
    buf = _v0_with(field, declared, b"\x01" * 10)  # 10 bytes of payload, far fewer than declared
    _assert_small_allocation(lambda: Probe.decode(buf, 0), match="exceeds")


@pytest.mark.parametrize("field", ["name", "note"])
@pytest.mark.parametrize("declared", [32767, 100, 1000])
def test_oversized_string_length_is_rejected(field: str, declared: int) -> None:
    buf = _v0_with(field, declared, b"abcdefghij")
    _assert_small_allocation(lambda: Probe.decode(buf, 0), match="exceeds")


@pytest.mark.parametrize("field", list(V1_OFFSETS))
@pytest.mark.parametrize(
    "varint",
    [
        b"\xff\xff\xff\xff\x0f",  # 2**32 - 1 -> length 2**32 - 2
        b"\xfe\xff\xff\xff\x07",  # 2**31 - 1 -> length 2**31 - 2
        b"\x80\x80\x80\x80\x01",  # 2**28
        b"\x64",  # 99, more than the bytes left
    ],
)
def test_oversized_compact_length_is_rejected_without_allocating(field: str, varint: bytes) -> None:
    buf = _v1_with(field, varint, b"\x01" * 10)
    _assert_small_allocation(lambda: Probe.decode(buf, 1), match="exceeds")


def test_oversized_array_in_a_real_message() -> None:
    api = APIS[19]  # CreateTopics: topics array first
    for version in all_versions(api.request):
        if api.request.is_flexible(version):
            body = b"\xff\xff\xff\xff\x07" + bytes(10)
        else:
            body = struct.pack(">i", 2**31 - 1) + bytes(10)
        _assert_small_allocation(
            lambda body=body, version=version: api.request.decode(body, version), match="exceeds"
        )


@pytest.mark.parametrize("field", ["blob", "ids", "items", "name"])
@pytest.mark.parametrize("length", [-1, -2, -100, -(2**15)])
def test_negative_length_on_non_nullable_fields(field: str, length: int) -> None:
    with pytest.raises(DecodeError):
        Probe.decode(_v0_with(field, length), 0)


@pytest.mark.parametrize("field", ["note", "maybe_blob", "maybe_ids"])
@pytest.mark.parametrize("length", [-2, -3, -100, -(2**15)])
def test_negative_length_other_than_minus_one_on_nullable_fields(field: str, length: int) -> None:
    with pytest.raises(DecodeError):
        Probe.decode(_v0_with(field, length), 0)


@pytest.mark.parametrize("field", ["maybe_blob", "maybe_ids"])
def test_most_negative_int32_length(field: str) -> None:
    with pytest.raises(DecodeError):
        Probe.decode(_v0_with(field, -(2**31)), 0)


@pytest.mark.parametrize("field", ["name", "blob", "ids", "items"])
def test_compact_null_on_non_nullable_fields(field: str) -> None:
    # compact length 0 encodes -1 (null), which only nullable fields accept
    with pytest.raises(DecodeError):
        Probe.decode(_v1_with(field, b"\x00"), 1)


def test_compact_null_on_nullable_fields_is_none() -> None:
    got = Probe.decode(EMPTY_V1, 1)
    assert got.note is None and got.maybe_blob is None and got.maybe_ids is None


def test_invalid_utf8_string_is_a_decode_error() -> None:
    for bad in (b"\xc3\x28", b"\xff", b"\xed\xa0\x80", b"a\x80b"):
        with pytest.raises(DecodeError):
            Probe.decode(_v0_with("name", len(bad), bad), 0)
        with pytest.raises(DecodeError):
            Probe.decode(_v1_with("note", bytes([len(bad) + 1]), bad), 1)


# -- varints ----------------------------------------------------------------------------------------------

BAD_VARINTS = [
    b"\x80\x80\x80\x80\x80\x00",  # six bytes (5 continuation bytes)
    b"\xff\xff\xff\xff\xff\x01",
    b"\x80" * 10 + b"\x01",
    b"\xff" * 32,
]


@pytest.mark.parametrize("field", list(V1_OFFSETS))
@pytest.mark.parametrize("varint", BAD_VARINTS, ids=range(len(BAD_VARINTS)))
def test_overlong_varint_length_is_a_decode_error(field: str, varint: bytes) -> None:
    with pytest.raises(DecodeError):
        Probe.decode(_v1_with(field, varint), 1)


@pytest.mark.parametrize("field", list(V1_OFFSETS))
def test_truncated_varint_length_is_a_decode_error(field: str) -> None:
    off = V1_OFFSETS[field]
    with pytest.raises(DecodeError):
        Probe.decode(EMPTY_V1[:off] + b"\x80\x80", 1)


@pytest.mark.parametrize(
    "tags",
    [
        b"\x80\x80\x80\x80\x80\x01",  # tag count: overlong varint
        b"\xff\xff\xff\xff\x0f",  # tag count 2**32-1 with nothing left
        b"\x01\x80\x80\x80\x80\x80\x00\x00",  # tag number: overlong varint
        b"\x01\x00\xff\xff\xff\xff\x0f",  # tag 0 (extra) size 2**32-1
        b"\x01\x00\x05\x00\x00\x00\x01",  # tag 0 size 5, only 4 bytes left
        b"\x01\x00\x02\x00\x00",  # tag 0 (int32) declared 2 bytes
        b"\x01\x00\x06\x00\x00\x00\x01\x00\x00",  # tag 0 (int32) declared 6 bytes, uses 4
        b"\x01\x03\x03\x09ab",  # tag 3 (string) whose compact length runs past its size
        b"\x02\x09\x00",  # second unknown tag missing
        b"\x01\x09",  # unknown tag without a size
    ],
)
def test_bad_tagged_sections(tags: bytes) -> None:
    buf = EMPTY_V1[:-1] + tags
    _assert_small_allocation(lambda: Probe.decode(buf, 1))


def test_unknown_tags_are_skipped_and_known_ones_read() -> None:
    buf = EMPTY_V1[:-1] + b"\x03" + b"\x00\x04\x00\x00\x00\x2a" + b"\x02\x01\xee" + b"\x03\x02\x02z"
    got = Probe.decode(buf, 1)
    assert (got.extra, got.hint) == (42, "z")


def test_primitive_varint_readers() -> None:
    for bad in BAD_VARINTS:
        with pytest.raises(DecodeError):
            p.read_uvarint(bad, 0)
        with pytest.raises(DecodeError):
            p.read_varint(bad, 0)
    with pytest.raises(DecodeError):
        p.read_uvarlong(b"\x80" * 10 + b"\x01", 0)
    with pytest.raises(DecodeError):
        p.read_varlong(b"\xff" * 11, 0)
    for n in range(1, 5):
        with pytest.raises(DecodeError):
            p.read_uvarint(b"\x80" * n, 0)
    assert p.read_uvarint(b"\xff\xff\xff\xff\x0f", 0) == (2**32 - 1, 5)
    assert p.read_varlong(b"\xff" * 9 + b"\x01", 0) == (-(2**63), 10)


# ---------------------------------------------------------------------------------------------------------
# Unknown API keys and versions

UNKNOWN_KEYS = [k for k in (-1, 4, 5, 6, 7, 1000, 32767, -32768) if k not in APIS]


def test_decode_outside_valid_versions_is_a_decode_error() -> None:
    assert CASES
    for _, cls, version in CASES:
        if version != cls.VALID_VERSIONS.low:
            continue
        good = cls().encode(version)
        for bad in {cls.VALID_VERSIONS.low - 1, cls.VALID_VERSIONS.high + 1, -1, 32767, -32768}:
            if bad in cls.VALID_VERSIONS:
                continue
            with pytest.raises(DecodeError, match="no version"):
                cls.decode(good, bad)
            with pytest.raises(EncodeError):
                cls().encode(bad)


@pytest.mark.parametrize("key", UNKNOWN_KEYS)
def test_unknown_api_key_is_unsupported(key: int) -> None:
    raw = struct.pack(">hhi", key, 0, 1) + b"\x00\x00"
    with pytest.raises(UnsupportedVersionError) as info:
        decode_request_frame(raw)
    assert info.value.api_key == key


def test_unknown_version_of_a_known_key_is_unsupported_before_reading_the_body() -> None:
    for key, api in APIS.items():
        raw = struct.pack(">hhi", key, api.request.VALID_VERSIONS.high + 1, 5) + b"\xff" * 3
        with pytest.raises(UnsupportedVersionError):
            decode_request_frame(raw)


# ---------------------------------------------------------------------------------------------------------
# Fuzz: random and mutated frames through framing, header peek, header decode and body decode

FUZZ_FRAMES = 100_000
FUZZ_SEED = 0x6B61666B61  # "kafka"
INTERESTING_INT32 = [0, 1, -1, -2, 0x7FFFFFFF, -(2**31), 0x7FFF, 0xFFFF, 0x10000, 255, 256, 2**30]
INTERESTING_INT16 = [0, 1, -1, -2, 0x7FFF, -0x8000, 0xFF, 0x100]
INTERESTING_VARINT = [
    b"\x00",
    b"\x01",
    b"\x7f",
    b"\xff\xff\xff\xff\x0f",
    b"\xff\xff\xff\xff\x7f",
    b"\x80\x80\x80\x80\x80\x01",
    b"\x80\x80\x80\x80",
    b"\xfe\xff\xff\xff\x07",
]


def _mutate(data: bytes, body_start: int, rnd: random.Random) -> bytes:
    buf = bytearray(data)
    for _ in range(rnd.choice((1, 1, 1, 2, 2, 3, 5))):
        # mostly mutate the body so the header survives and the body decoder is exercised
        lo = body_start if rnd.random() < 0.85 and body_start < len(buf) else 0
        n = len(buf)
        op = rnd.randrange(9)
        if n == 0:
            buf += rnd.randbytes(rnd.randint(1, 8))
            continue
        i = rnd.randrange(lo, n) if lo < n else rnd.randrange(n)
        if op == 0:  # bit flip
            buf[i] ^= 1 << rnd.randrange(8)
        elif op == 1:  # byte replaced by an interesting value
            buf[i] = rnd.choice((0x00, 0xFF, 0x7F, 0x80, 0x01, 0xFE))
        elif op == 2:  # truncation
            del buf[rnd.randrange(lo, n + 1) if lo <= n else n :]
        elif op == 3:  # insertion
            buf[i:i] = rnd.randbytes(rnd.randint(1, 16))
        elif op == 4:  # deletion of a range
            del buf[i : i + rnd.randint(1, 8)]
        elif op == 5:  # int32 length tampering
            buf[i : i + 4] = struct.pack(
                ">i",
                rnd.choice(INTERESTING_INT32) if rnd.random() < 0.8 else -rnd.randint(2, 2**31),
            )
        elif op == 6:  # int16 length tampering
            v = rnd.choice(INTERESTING_INT16)
            buf[i : i + 2] = struct.pack(">h" if v < 0x8000 else ">H", v)
        elif op == 7:  # varint length tampering
            buf[i : i + 1] = rnd.choice(INTERESTING_VARINT)
        else:  # duplicate a slice
            j = rnd.randrange(i, min(n, i + 32) + 1)
            buf[i:i] = buf[i:j]
    return bytes(buf)


def _seed_frames(rnd: random.Random) -> list[tuple[bytes, int]]:
    seeds: list[tuple[bytes, int]] = []
    for _, cls, version in REQUEST_CASES:
        for rich in (False, True):
            req = build(cls, version, rnd, rich=rich)
            raw = encode_request_frame(req, version, rnd.randint(-(2**31), 2**31 - 1), "fuzz")
            hv = request_header_version(cls.API_KEY, version, cls.is_flexible(version))
            _, body_start = decode_request_header(raw, hv)
            seeds.append((raw, body_start))
    return seeds


class _Stats:
    def __init__(self) -> None:
        self.frames = 0
        self.decoded = 0
        self.decode_errors = 0
        self.unsupported = 0
        self.framing_errors = 0
        self.crashes: list[str] = []


def _run_one(raw_stream: bytes, stats: _Stats, reencode: bool) -> None:
    dec = FrameDecoder(max_frame_size=1 << 20)
    try:
        frames = dec.feed(raw_stream)
    except DecodeError:
        stats.framing_errors += 1
        return
    for f in frames:
        stats.frames += 1
        try:
            header, msg = decode_request_frame(f)
        except UnsupportedVersionError as exc:
            stats.unsupported += 1
            api = APIS.get(exc.api_key)
            if (
                api is not None
            ):  # a known key at an unknown version: the body decoder refuses it too
                try:
                    api.request.decode(f, exc.api_version, 8)
                    stats.crashes.append(f"input={f.hex()}\ndecoded at invalid version")
                except DecodeError:
                    pass
                except Exception:
                    stats.crashes.append(f"input={f.hex()}\n{traceback.format_exc()}")
            continue
        except DecodeError:
            stats.decode_errors += 1
            continue
        except Exception:
            stats.crashes.append(f"input={f.hex()}\n{traceback.format_exc()}")
            continue
        stats.decoded += 1
        if reencode:
            # whatever decodes must re-encode, and re-encoding is stable from then on
            try:
                once = msg.encode(header.api_version)
                again = type(msg).decode(once, header.api_version).encode(header.api_version)
                if again != once:
                    stats.crashes.append(f"input={f.hex()}\nre-encode not stable")
            except Exception:
                stats.crashes.append(f"input={f.hex()} (re-encode)\n{traceback.format_exc()}")


def test_fuzz_request_frames() -> None:
    assert REQUEST_CASES, "no request declared"
    rnd = random.Random(FUZZ_SEED)
    seeds = _seed_frames(rnd)
    keys = sorted(APIS)
    stats = _Stats()
    started = time.perf_counter()
    fed = 0
    while fed < FUZZ_FRAMES:
        fed += 1
        r = rnd.random()
        if r < 0.08:
            # a plausible header of a real API and version followed by random bytes
            key = rnd.choice(keys)
            api = APIS[key]
            ver = rnd.randint(api.request.VALID_VERSIONS.low, api.request.VALID_VERSIONS.high)
            hv = request_header_version(key, ver, api.request.is_flexible(ver))
            out = bytearray()
            encode_request_header(out, RequestHeader(key, ver, fed, "r"), hv)
            payload = bytes(out) + rnd.randbytes(rnd.randint(0, 48))
        elif r < 0.10:
            payload = rnd.randbytes(rnd.randint(0, 64))  # pure noise, any key
        else:
            raw, body_start = rnd.choice(seeds)
            payload = _mutate(raw, body_start, rnd)
        stream = frame(payload)
        if rnd.random() < 0.02:  # tamper with the frame size itself
            stream = struct.pack(">i", rnd.choice(INTERESTING_INT32)) + stream[4:]
        elif rnd.random() < 0.02:  # two frames in one read, the second one cut short
            stream = stream + stream[: rnd.randrange(len(stream))]
        _run_one(stream, stats, reencode=rnd.random() < 0.1)
    elapsed = time.perf_counter() - started
    print(
        f"\nfuzz: {fed} inputs, {stats.frames} frames, {stats.decoded} decoded, "
        f"{stats.decode_errors} DecodeError, {stats.unsupported} unsupported, "
        f"{stats.framing_errors} framing errors, {len(stats.crashes)} crashes, {elapsed:.1f}s",
        file=sys.stderr,
    )
    assert not stats.crashes, (
        f"{len(stats.crashes)} non-DecodeError failures; first:\n" + "\n".join(stats.crashes[:3])
    )
    assert fed >= 100_000
    # the mutations must really reach the body decoder, both ways
    assert stats.decoded > 1000 and stats.decode_errors > 10_000


def test_fuzz_response_bodies() -> None:
    rnd = random.Random(FUZZ_SEED + 1)
    responses = [c for c in CASES if not issubclass(c[1], Request)]
    seeds: list[tuple[type[Message], int, bytes, int]] = []
    for _, cls, version in responses:
        for rich in (False, True):
            out = bytearray()
            hv = response_header_version(cls.API_KEY, cls.is_flexible(version))
            encode_response_header(out, rnd.randint(0, 2**31 - 1), hv)
            start = len(out)
            build(cls, version, rnd, rich=rich).encode_into(out, version)
            seeds.append((cls, version, bytes(out), start))
    crashes: list[str] = []
    counts = [0, 0]
    for _ in range(20_000):
        cls, version, raw, start = rnd.choice(seeds)
        mutated = _mutate(raw, start, rnd)
        try:
            _, pos = decode_response_header(
                mutated, response_header_version(cls.API_KEY, cls.is_flexible(version))
            )
            cls.decode(mutated, version, pos)
            counts[0] += 1
        except DecodeError:
            counts[1] += 1
        except Exception:
            crashes.append(
                f"{cls.__name__} v{version} input={mutated.hex()}\n{traceback.format_exc()}"
            )
    assert not crashes, "\n".join(crashes[:3])
    assert counts[1] > 5000


def test_fuzz_frame_decoder_with_noise_in_random_chunks() -> None:
    rnd = random.Random(FUZZ_SEED + 2)
    for _ in range(2000):
        dec = FrameDecoder(max_frame_size=rnd.choice((0, 16, 4096, 1 << 20)))
        stream = rnd.randbytes(rnd.randint(0, 200))
        if rnd.random() < 0.5:
            stream = frame(rnd.randbytes(rnd.randint(0, 20))) + stream
        pos = 0
        total = 0
        try:
            while pos < len(stream):
                n = rnd.randint(1, 17)
                for f in dec.feed(stream[pos : pos + n]):
                    assert len(f) <= dec.max_frame_size
                    total += 4 + len(f)
                pos += n
        except DecodeError:
            continue
        assert total + dec.buffered == len(stream)


# every field shape the DSL knows, so the fuzz reaches codecs no registered API may use yet
EveryShape = data(
    "MalformedEveryShape",
    valid="0-2",
    flexible="2+",
    fields=[
        F("i8", "int8", "0+"),
        F("u16", "uint16", "0+"),
        F("f64", "float64", "0+"),
        F("id", "uuid", "0+"),
        F("flag", "bool", "0+"),
        F("raw", "records", "0+", nullable="0+"),
        F("names", "[]string", "0+"),
        F("maybe_names", "[]string", "1+", nullable="1+"),
        F("inner", "Inner", "0+", fields=[F("a", "int64", "0+"), F("b", "string", "0+")]),
        F(
            "maybe_inner",
            "MaybeInner",
            "1+",
            nullable="1+",
            fields=[F("c", "int32", "1+"), F("d", "[]int16", "1+")],
        ),
        F(
            "nested",
            "[]Outer",
            "0+",
            fields=[
                F("e", "int32", "0+"),
                F("deeper", "[]Deeper", "0+", fields=[F("g", "bytes", "0+", nullable="0+")]),
                F("late", "int64", "1+", default=-1),
            ],
        ),
        F("t_ints", "[]int32", "2+", tag=1, tagged="2+"),
        F(
            "t_struct",
            "TaggedStruct",
            "2+",
            tag=4,
            tagged="2+",
            nullable="2+",
            fields=[F("h", "string", "2+")],
        ),
    ],
)


def test_fuzz_every_field_shape() -> None:
    rnd = random.Random(FUZZ_SEED + 3)
    seeds = []
    for version in all_versions(EveryShape):
        for rich in (False, True, True):
            msg = build(EveryShape, version, rnd, rich=rich)
            body = msg.encode(version)
            assert EveryShape.decode(body, version).encode(version) == body
            for n in range(len(body)):
                with pytest.raises(DecodeError):
                    EveryShape.decode(body[:n], version)
            seeds.append((version, body))
    crashes: list[str] = []
    outcomes = [0, 0]
    for _ in range(20_000):
        version, body = rnd.choice(seeds)
        mutated = _mutate(body, 0, rnd)
        try:
            got = EveryShape.decode(mutated, version)
            got.encode(version)
            outcomes[0] += 1
        except DecodeError:
            outcomes[1] += 1
        except Exception:
            crashes.append(f"v{version} input={mutated.hex()}\n{traceback.format_exc()}")
    assert not crashes, "\n".join(crashes[:3])
    assert outcomes[0] > 100 and outcomes[1] > 5000
