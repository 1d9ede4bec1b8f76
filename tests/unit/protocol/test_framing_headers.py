"""Framing and header tests: FrameDecoder under every split and bad length, request/response headers v0-v2.

Header bytes are checked against hand-built layouts and against kafka-python's header classes as an oracle.
"""

from __future__ import annotations

import random
import struct

import pytest

import kafkalite.protocol.messages  # noqa: F401  (registers every API family that exists)
from kafkalite.protocol import primitives as p
from kafkalite.protocol.exceptions import DecodeError
from kafkalite.protocol.framing import DEFAULT_MAX_FRAME, FrameDecoder, FrameTooLarge, frame
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
from kafkalite.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from kafkalite.protocol.schema import APIS

# ---------------------------------------------------------------------------------------------------------
# FrameDecoder

PAYLOADS = [b"", b"a", b"\x00\x01\x02", bytes(range(256)) * 3, b"\xff" * 17, b"last"]
STREAM = b"".join(frame(x) for x in PAYLOADS)


def _feed_chunks(dec: FrameDecoder, chunks: list[bytes]) -> list[bytes]:
    out: list[bytes] = []
    for c in chunks:
        out.extend(dec.feed(c))
    return out


def test_frame_prefixes_big_endian_length() -> None:
    assert frame(b"abc") == b"\x00\x00\x00\x03abc"
    assert frame(b"") == b"\x00\x00\x00\x00"
    assert frame(bytearray(b"\x01" * 300))[:4] == struct.pack(">i", 300)


def test_coalesced_feed_yields_every_frame_in_order() -> None:
    dec = FrameDecoder()
    assert dec.feed(STREAM) == PAYLOADS
    assert dec.buffered == 0
    assert dec.pending_frame_size == -1


def test_split_at_every_byte_boundary() -> None:
    for cut in range(len(STREAM) + 1):
        dec = FrameDecoder()
        first = dec.feed(STREAM[:cut])
        second = dec.feed(STREAM[cut:])
        assert first + second == PAYLOADS, cut
        # nothing is emitted before its last byte arrived
        complete = 0
        end = 0
        for payload in PAYLOADS:
            end += 4 + len(payload)
            if end <= cut:
                complete += 1
        assert len(first) == complete, cut
        assert dec.buffered == 0


def test_split_twice_at_every_pair_of_boundaries_in_a_small_stream() -> None:
    stream = frame(b"xy") + frame(b"") + frame(b"hello")
    want = [b"xy", b"", b"hello"]
    for i in range(len(stream) + 1):
        for j in range(i, len(stream) + 1):
            dec = FrameDecoder()
            assert _feed_chunks(dec, [stream[:i], stream[i:j], stream[j:]]) == want, (i, j)


def test_byte_by_byte_feed() -> None:
    dec = FrameDecoder()
    got = _feed_chunks(dec, [STREAM[i : i + 1] for i in range(len(STREAM))])
    assert got == PAYLOADS


def test_random_chunking_and_input_types() -> None:
    rnd = random.Random(1234)
    for _ in range(200):
        dec = FrameDecoder()
        pos = 0
        got: list[bytes] = []
        while pos < len(STREAM):
            n = rnd.randint(0, 40)
            chunk = STREAM[pos : pos + n]
            kind = rnd.randrange(3)
            data: bytes | bytearray | memoryview = (
                chunk if kind == 0 else bytearray(chunk) if kind == 1 else memoryview(chunk)
            )
            got.extend(dec.feed(data))
            pos += n
        assert got == PAYLOADS
        assert all(type(f) is bytes for f in got)


def test_pending_frame_size_and_buffered_while_partial() -> None:
    dec = FrameDecoder()
    assert dec.feed(b"\x00\x00") == []
    assert dec.pending_frame_size == -1
    assert dec.buffered == 2
    assert dec.feed(b"\x00\x05ab") == []
    assert dec.pending_frame_size == 5
    assert dec.feed(b"cde") == [b"abcde"]
    assert dec.pending_frame_size == -1
    assert dec.buffered == 0


def test_a_chunk_that_is_exactly_a_body_is_the_frame_itself() -> None:
    dec = FrameDecoder()
    body = bytes(range(200)) * 100
    assert dec.feed(struct.pack(">i", len(body))) == []
    assert dec.bytes_needed == len(body)
    [got] = dec.feed(body)
    assert got is body  # what a reader that read exactly the body handed over: not copied
    assert dec.bytes_needed == 4


def test_a_body_spread_over_many_chunks_is_joined_once_complete() -> None:
    dec = FrameDecoder()
    body = bytes(range(256)) * 40
    stream = frame(body) + frame(b"next")
    chunks = [stream[i : i + 1000] for i in range(0, len(stream), 1000)]
    got = []
    fed = 0
    for c in chunks:
        got += dec.feed(c)
        fed += len(c)
        if not got:
            assert dec.buffered == fed - 4  # all but the length prefix, kept until complete
    assert got == [body, b"next"] and dec.buffered == 0


@pytest.mark.parametrize("length", [-1, -2, -(2**31), -100])
def test_negative_length_is_a_decode_error(length: int) -> None:
    dec = FrameDecoder()
    with pytest.raises(DecodeError, match="negative"):
        dec.feed(struct.pack(">i", length) + b"xxxx")


def test_negative_length_after_a_good_frame_in_the_same_chunk() -> None:
    dec = FrameDecoder()
    with pytest.raises(DecodeError):
        dec.feed(frame(b"ok") + b"\xff\xff\xff\xfe")


def test_negative_length_split_across_feeds() -> None:
    dec = FrameDecoder()
    assert dec.feed(b"\x80\x00") == []
    with pytest.raises(DecodeError):
        dec.feed(b"\x00\x00")


def test_default_max_is_100_mib() -> None:
    assert DEFAULT_MAX_FRAME == 100 * 1024 * 1024
    assert FrameDecoder().max_frame_size == DEFAULT_MAX_FRAME


@pytest.mark.parametrize("declared", [2**31 - 1, 2**31 - 2**20, DEFAULT_MAX_FRAME + 1])
def test_length_over_the_default_max_fails_without_buffering(declared: int) -> None:
    dec = FrameDecoder()
    with pytest.raises(FrameTooLarge) as info:
        dec.feed(struct.pack(">i", declared) + b"only a few bytes")
    assert info.value.size == declared
    assert info.value.limit == DEFAULT_MAX_FRAME
    assert isinstance(info.value, DecodeError)
    # the decision is made from the 4 length bytes alone: nothing of the declared size was allocated
    assert dec.buffered < 64


def test_length_exactly_at_the_default_max_is_accepted_as_pending() -> None:
    dec = FrameDecoder()
    assert dec.feed(struct.pack(">i", DEFAULT_MAX_FRAME)) == []
    assert dec.pending_frame_size == DEFAULT_MAX_FRAME


def test_max_frame_size_is_configurable() -> None:
    dec = FrameDecoder(max_frame_size=16)
    assert dec.feed(frame(b"x" * 16)) == [b"x" * 16]
    with pytest.raises(FrameTooLarge) as info:
        dec.feed(frame(b"x" * 17))
    assert (info.value.size, info.value.limit) == (17, 16)
    zero = FrameDecoder(max_frame_size=0)
    assert zero.feed(frame(b"")) == [b""]
    with pytest.raises(FrameTooLarge):
        zero.feed(frame(b"a"))


def test_too_large_is_raised_as_soon_as_the_length_is_complete() -> None:
    dec = FrameDecoder(max_frame_size=1000)
    assert dec.feed(b"\x00\x00") == []
    with pytest.raises(FrameTooLarge):
        dec.feed(b"\x10\x00")  # 4096 > 1000, no body bytes sent yet


# ---------------------------------------------------------------------------------------------------------
# Header version rules


def test_request_header_version_rules() -> None:
    assert request_header_version(7, 0, False) == 0  # ControlledShutdown v0 has no client id
    assert request_header_version(7, 1, False) == 1
    assert request_header_version(0, 3, False) == 1
    assert request_header_version(0, 9, True) == 2
    assert request_header_version(18, 3, True) == 2  # ApiVersions requests do use v2 once flexible


def test_response_header_version_rules_for_every_registered_api() -> None:
    for key, api in APIS.items():
        for v in range(api.response.VALID_VERSIONS.low, api.response.VALID_VERSIONS.high + 1):
            flexible = api.response.is_flexible(v)
            want = 0 if key == 18 else (1 if flexible else 0)
            assert response_header_version(key, flexible) == want, (api.name, v)


def test_api_versions_response_header_is_always_v0() -> None:
    assert response_header_version(18, True) == 0
    assert response_header_version(18, False) == 0
    for v in range(
        ApiVersionsResponse.VALID_VERSIONS.low, ApiVersionsResponse.VALID_VERSIONS.high + 1
    ):
        resp = ApiVersionsResponse(
            error_code=0,
            api_keys=[ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=4)],
        )
        out = bytearray()
        encode_response_header(
            out, 99, response_header_version(18, ApiVersionsResponse.is_flexible(v))
        )
        resp.encode_into(out, v)
        # a v0 header is only the correlation id: no tagged-field byte, even for flexible v3+
        assert out[:4] == b"\x00\x00\x00\x63"
        corr, pos = decode_response_header(out, 0)
        assert (corr, pos) == (99, 4)
        assert ApiVersionsResponse.decode(out, v, pos) == resp


def test_api_versions_response_header_matches_kafka_python() -> None:
    kp = pytest.importorskip("kafka.protocol.metadata")
    k_resp_cls = getattr(kp, "ApiVersionsResponse", None)
    if k_resp_cls is None:  # pragma: no cover - layout of kafka-python
        pytest.skip("kafka-python has no ApiVersionsResponse in kafka.protocol.metadata")
    for v in (3, 4):
        k = k_resp_cls(error_code=0, api_keys=[], throttle_time_ms=0, version=v)
        k.with_header(correlation_id=7)
        theirs = k.encode(header=True)  # version comes from the constructor
        corr, pos = decode_response_header(theirs, response_header_version(18, True))
        assert corr == 7
        assert pos == 4
        got = ApiVersionsResponse.decode(theirs, v, pos)
        assert got.error_code == 0 and got.api_keys == []
        # and the reverse: our v0 header + body is what kafka-python parses
        out = bytearray()
        encode_response_header(out, 7, response_header_version(18, True))
        ApiVersionsResponse(error_code=0, api_keys=[]).encode_into(out, v)
        assert bytes(out) == theirs


# ---------------------------------------------------------------------------------------------------------
# Request headers


def _hdr(client_id: str | None = "kafkalite") -> RequestHeader:
    return RequestHeader(api_key=3, api_version=12, correlation_id=0x01020304, client_id=client_id)


def test_request_header_v0_layout() -> None:
    out = bytearray()
    encode_request_header(out, _hdr(), 0)
    assert bytes(out) == b"\x00\x03\x00\x0c\x01\x02\x03\x04"
    h, pos = decode_request_header(bytes(out) + b"body", 0)
    assert pos == 8
    assert (h.api_key, h.api_version, h.correlation_id, h.client_id) == (3, 12, 0x01020304, None)


@pytest.mark.parametrize("client_id", ["kafkalite", "", None, "ünïcode-id"])
def test_request_header_v1_layout(client_id: str | None) -> None:
    out = bytearray()
    encode_request_header(out, _hdr(client_id), 1)
    want = bytearray(b"\x00\x03\x00\x0c\x01\x02\x03\x04")
    p.write_nullable_string(want, client_id)  # int16 length, -1 for null
    assert out == want
    h, pos = decode_request_header(bytes(out), 1)
    assert pos == len(out)
    assert h == _hdr(client_id)


@pytest.mark.parametrize("client_id", ["kafkalite", "", None])
def test_request_header_v2_client_id_is_not_compact_and_ends_with_tags(
    client_id: str | None,
) -> None:
    out = bytearray()
    encode_request_header(out, _hdr(client_id), 2)
    want = bytearray(b"\x00\x03\x00\x0c\x01\x02\x03\x04")
    p.write_nullable_string(want, client_id)
    want.append(0)  # empty tagged-field section
    assert out == want
    h, pos = decode_request_header(bytes(out) + b"\x07body", 2)
    assert pos == len(out)
    assert h == _hdr(client_id)


def test_request_header_v2_skips_unknown_tagged_fields() -> None:
    out = bytearray()
    encode_request_header(out, _hdr(), 1)
    out += b"\x02"  # two tagged fields
    out += b"\x00\x03abc"  # tag 0, 3 bytes
    out += b"\x05\x01\xff"  # tag 5, 1 byte
    h, pos = decode_request_header(bytes(out) + b"BODY", 2)
    assert h == _hdr()
    assert pos == len(out)


@pytest.mark.parametrize(
    "tail",
    [
        b"\x01\x00\x09abc",  # tagged field claims 9 bytes, 3 left
        b"\x02\x00\x00",  # second tagged field missing
        b"\x01\x80\x80\x80\x80\x80\x01\x00",  # tag varint of six bytes
        b"",  # tagged-field count missing
        b"\x85",  # truncated count varint
    ],
)
def test_request_header_v2_bad_tagged_section(tail: bytes) -> None:
    out = bytearray()
    encode_request_header(out, _hdr(), 1)
    with pytest.raises(DecodeError):
        decode_request_header(bytes(out) + tail, 2)


@pytest.mark.parametrize("hv", [0, 1, 2])
def test_truncated_request_header_at_every_byte(hv: int) -> None:
    out = bytearray()
    encode_request_header(out, _hdr("client-1"), hv)
    for n in range(len(out)):
        with pytest.raises(DecodeError):
            decode_request_header(bytes(out[:n]), hv)


@pytest.mark.parametrize("bad_len", [-2, -3, -32768])
def test_request_header_client_id_negative_length(bad_len: int) -> None:
    buf = b"\x00\x03\x00\x0c\x01\x02\x03\x04" + struct.pack(">h", bad_len) + b"xxxx"
    with pytest.raises(DecodeError):
        decode_request_header(buf, 1)


def test_request_header_client_id_longer_than_frame() -> None:
    buf = b"\x00\x03\x00\x0c\x01\x02\x03\x04" + struct.pack(">h", 32767) + b"abc"
    with pytest.raises(DecodeError):
        decode_request_header(buf, 1)


def test_request_header_client_id_invalid_utf8() -> None:
    buf = b"\x00\x03\x00\x0c\x01\x02\x03\x04\x00\x02\xc3\x28"
    with pytest.raises(DecodeError):
        decode_request_header(buf, 1)


def test_peek_api() -> None:
    assert peek_api(b"\x00\x12\x00\x03\xff\xff\xff\xfe") == (18, 3, -2)
    assert peek_api(b"\xff\xff\x7f\xff\x00\x00\x00\x01rest") == (-1, 32767, 1)
    for n in range(8):
        with pytest.raises(DecodeError):
            peek_api(b"\x00" * n)


@pytest.mark.parametrize("flexible", [False, True])
def test_request_header_matches_kafka_python(flexible: bool) -> None:
    api_header = pytest.importorskip("kafka.protocol.api_header")
    for client_id in ("kafka-python", "", None):
        k = api_header.RequestHeader(
            request_api_key=3,
            request_api_version=12,
            correlation_id=0x01020304,
            client_id=client_id,
        )
        theirs = k.encode(flexible=flexible)
        out = bytearray()
        encode_request_header(out, _hdr(client_id), 2 if flexible else 1)
        assert bytes(out) == theirs
        h, pos = decode_request_header(theirs, 2 if flexible else 1)
        assert h == _hdr(client_id) and pos == len(theirs)


def test_full_request_frame_roundtrip_through_decoder() -> None:
    req = ApiVersionsRequest(client_software_name="kafkalite", client_software_version="0.1")
    frames = []
    for v in range(
        ApiVersionsRequest.VALID_VERSIONS.low, ApiVersionsRequest.VALID_VERSIONS.high + 1
    ):
        out = bytearray()
        hv = request_header_version(18, v, ApiVersionsRequest.is_flexible(v))
        encode_request_header(out, RequestHeader(18, v, 1000 + v, "cid"), hv)
        body = ApiVersionsRequest(**(req.to_dict() if v >= 3 else {}))
        body.encode_into(out, v)
        frames.append((v, bytes(out), body))
    stream = b"".join(frame(f) for _, f, _ in frames)
    dec = FrameDecoder()
    got = _feed_chunks(dec, [stream[i : i + 7] for i in range(0, len(stream), 7)])
    assert len(got) == len(frames)
    for (v, raw, body), f in zip(frames, got):
        assert f == raw
        key, ver, corr = peek_api(f)
        assert (key, ver, corr) == (18, v, 1000 + v)
        h, pos = decode_request_header(
            f, request_header_version(key, ver, ApiVersionsRequest.is_flexible(ver))
        )
        assert h.client_id == "cid"
        assert ApiVersionsRequest.decode(f, ver, pos) == body


# ---------------------------------------------------------------------------------------------------------
# Response headers


def test_response_header_v0_and_v1_layout() -> None:
    out = bytearray()
    encode_response_header(out, -5, 0)
    assert bytes(out) == b"\xff\xff\xff\xfb"
    assert decode_response_header(out, 0) == (-5, 4)
    out = bytearray()
    encode_response_header(out, 77, 1)
    assert bytes(out) == b"\x00\x00\x00\x4d\x00"
    assert decode_response_header(out, 1) == (77, 5)


def test_response_header_v1_skips_tagged_fields_and_rejects_bad_ones() -> None:
    buf = b"\x00\x00\x00\x01\x01\x02\x02hi" + b"body"
    assert decode_response_header(buf, 1) == (1, 9)
    with pytest.raises(DecodeError):
        decode_response_header(b"\x00\x00\x00\x01\x01\x02\x09hi", 1)
    for n in range(5):
        with pytest.raises(DecodeError):
            decode_response_header(b"\x00\x00\x00\x01\x00"[:n], 1)


@pytest.mark.parametrize("flexible", [False, True])
def test_response_header_matches_kafka_python(flexible: bool) -> None:
    api_header = pytest.importorskip("kafka.protocol.api_header")
    theirs = api_header.ResponseHeader(correlation_id=123456).encode(flexible=flexible)
    out = bytearray()
    encode_response_header(out, 123456, 1 if flexible else 0)
    assert bytes(out) == theirs


# ---------------------------------------------------------------------------------------------------------
# FrameDecoder, buffered reading (get_buffer / buffer_updated, as asyncio.BufferedProtocol drives it)


def _recv_into(dec: FrameDecoder, stream: bytes, rnd: random.Random) -> list[bytes | bytearray]:
    """Play `stream` through get_buffer/buffer_updated with reads of random sizes, as a socket would."""
    out: list[bytes | bytearray] = []
    pos = 0
    while pos < len(stream):
        buf = dec.get_buffer()
        n = min(len(buf), len(stream) - pos, rnd.choice((1, 3, 7, 4096, 40_000, 1 << 20)))
        buf[:n] = stream[pos : pos + n]
        pos += n
        got = dec.buffer_updated(n)
        # the scratch buffer is reused by the next read: frames must not be views of it
        dec.get_buffer()[: min(n, 64)] = b"\xee" * min(n, 64)
        out.extend(got)
    return out


@pytest.mark.parametrize("seed", range(30))
def test_buffered_reads_yield_every_frame_and_big_bodies_in_place(seed: int) -> None:
    from kafkalite.protocol.framing import DIRECT_BODY_MIN

    rnd = random.Random(seed)
    sizes = [rnd.choice((0, 1, 5, 100, DIRECT_BODY_MIN - 1, DIRECT_BODY_MIN, 70_000, 300_000))
             for _ in range(12)]  # fmt: skip
    payloads = [bytes(rnd.getrandbits(8) for _ in range(min(s, 64))) * (s // 64 + 1) for s in sizes]
    payloads = [p_[:s] for p_, s in zip(payloads, sizes, strict=True)]
    dec = FrameDecoder()
    got = _recv_into(dec, b"".join(frame(x) for x in payloads), rnd)
    assert [bytes(g) for g in got] == payloads
    for g in got:
        # big frames are bytearrays (produce stamps them in place); small ones immutable bytes
        assert type(g) is (bytearray if len(g) >= DIRECT_BODY_MIN else bytes)
    assert dec.buffered == 0 and dec.pending_frame_size == -1


def test_buffered_reads_check_the_declared_length_before_allocating() -> None:
    dec = FrameDecoder(max_frame_size=1 << 20)
    buf = dec.get_buffer()
    buf[:4] = struct.pack(">i", (1 << 20) + 1)
    with pytest.raises(FrameTooLarge):
        dec.buffer_updated(4)
    dec = FrameDecoder()
    buf = dec.get_buffer()
    buf[:4] = struct.pack(">i", -5)
    with pytest.raises(DecodeError):
        dec.buffer_updated(4)


def test_buffered_reads_grow_a_big_body_as_its_bytes_arrive() -> None:
    """A big frame's buffer is not sized by its announced length: it starts at up to
    BODY_FIRST_CAPACITY and at most doubles each time the bytes fill it (issue 36)."""
    from kafkalite.protocol.framing import BODY_FIRST_CAPACITY

    size = 5 * BODY_FIRST_CAPACITY + 3  # grows 1 -> 2 -> 4 -> 5 MiB + 3
    payload = bytes(range(256)) * (size // 256) + b"xyz"[: size % 256]
    assert len(payload) == size
    stream = frame(payload) + frame(b"after")
    dec = FrameDecoder()
    pos, got = 0, []
    while pos < len(stream):
        buf = dec.get_buffer()
        if dec.pending_frame_size > 0:
            # never more buffer than twice what arrived (or the first capacity)
            assert dec.capacity <= max(BODY_FIRST_CAPACITY, 2 * dec.buffered)
        n = min(len(buf), len(stream) - pos, 300_000)
        buf[:n] = stream[pos : pos + n]
        pos += n
        got.extend(dec.buffer_updated(n))
    assert got == [payload, b"after"]
    assert type(got[0]) is bytearray


def test_a_trickled_announced_frame_holds_what_arrived() -> None:
    from kafkalite.protocol.framing import BODY_FIRST_CAPACITY

    dec = FrameDecoder()
    buf = dec.get_buffer()
    buf[:4] = struct.pack(">i", 100 << 20)
    buf[4:1004] = b"a" * 1000
    assert dec.buffer_updated(1004) == []
    while dec.buffered < 3 << 20:  # 3 MiB of a 100 MiB frame arrive
        buf = dec.get_buffer()
        assert len(buf) <= 2 << 20
        n = min(len(buf), 1 << 20)
        buf[:n] = b"b" * n
        assert dec.buffer_updated(n) == []
        assert dec.capacity <= max(BODY_FIRST_CAPACITY, 2 * dec.buffered)
    assert dec.pending_frame_size == 100 << 20
    # a full buffer does not grow until bytes arrive (an event loop asks for a buffer before every
    # read, the ones that find nothing too)
    buf = dec.get_buffer()
    buf[:] = b"c" * len(buf)
    assert dec.buffer_updated(len(buf)) == []
    capacity = dec.capacity
    assert dec.buffered == capacity == 4 << 20
    assert len(dec.get_buffer()) <= 64 * 1024 and dec.capacity == capacity  # the scratch buffer
    assert dec.buffer_updated(0) == [] and dec.capacity == capacity


@pytest.mark.parametrize("seed", range(6))
def test_buffered_reads_across_a_grown_body_and_the_frames_after_it(seed: int) -> None:
    """A body just past its first capacity ends in a read through the scratch buffer that also
    holds the frames after it: every frame comes out whole and in order."""
    from kafkalite.protocol.framing import BODY_FIRST_CAPACITY

    rnd = random.Random(seed)
    sizes = [BODY_FIRST_CAPACITY + rnd.choice((1, 10, 5000)), 3, 20_000, 7,
             2 * BODY_FIRST_CAPACITY + rnd.choice((1, 70_000)), 0, 11]  # fmt: skip
    payloads = [bytes([i + 1]) * s for i, s in enumerate(sizes)]
    got = _recv_into(FrameDecoder(), b"".join(frame(x) for x in payloads), rnd)
    assert [bytes(g) for g in got] == payloads
