"""Compression codecs: Kafka framings (xerial snappy, LZ4 frame, KIP-57 legacy checksum), interop with
kafka-python's codecs, bounded decompression, and only CompressionError on garbage."""

from __future__ import annotations

import os
import struct
import tracemalloc

import cramjam
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.protocol.exceptions import DecodeError
from kafkalite.records.compression import (
    XERIAL_MAGIC,
    Compression,
    CompressionError,
    DecompressionLimitExceeded,
    UnsupportedCompressionError,
    compress,
    decompress,
    xxh32,
)

kcodec = pytest.importorskip("kafka.codec")

CODECS = [Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD]
PAYLOADS = {
    "empty": b"",
    "tiny": b"x",
    "text": b"the quick brown fox jumps over the lazy dog " * 300,
    "random": os.urandom(70_000),  # incompressible, crosses the 32 KiB / 64 KiB block sizes
    "mixed": (os.urandom(40) + b"a" * 200) * 2000,
}

KAFKA_PYTHON = {
    Compression.GZIP: (kcodec.gzip_encode, kcodec.gzip_decode),
    Compression.SNAPPY: (kcodec.snappy_encode, kcodec.snappy_decode),
    Compression.LZ4: (kcodec.lz4_encode, kcodec.lz4_decode),
    Compression.ZSTD: (kcodec.zstd_encode, kcodec.zstd_decode),
}


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
@pytest.mark.parametrize("name", list(PAYLOADS))
def test_round_trip_and_kafka_python_interop(codec: Compression, name: str) -> None:
    data = PAYLOADS[name]
    ours = compress(codec, data)
    assert decompress(codec, ours) == data
    encode, decode = KAFKA_PYTHON[codec]
    assert decode(ours) == data, "kafka-python cannot read our framing"
    if data or codec != Compression.SNAPPY:
        assert decompress(codec, encode(data)) == data, "we cannot read kafka-python's framing"


def test_compression_names() -> None:
    assert Compression.from_name("LZ4") is Compression.LZ4
    assert Compression.from_name("zstd") == 4
    with pytest.raises(ValueError):
        Compression.from_name("brotli")


def test_none_codec_is_identity_and_bounded() -> None:
    assert decompress(Compression.NONE, b"abc") == b"abc"
    assert compress(Compression.NONE, bytearray(b"abc")) == b"abc"
    with pytest.raises(DecompressionLimitExceeded):
        decompress(Compression.NONE, b"abcd", max_size=3)


def test_snappy_writes_xerial_and_reads_raw_and_xerial() -> None:
    data = PAYLOADS["mixed"]
    framed = compress(Compression.SNAPPY, data)
    assert framed.startswith(XERIAL_MAGIC)
    assert struct.unpack_from(">ii", framed, 8) == (1, 1)
    # librdkafka sends raw snappy blocks
    raw = bytes(cramjam.snappy.compress_raw(data))
    assert decompress(Compression.SNAPPY, raw) == data
    assert kcodec.snappy_decode(framed) == data
    # xerial writers may repeat the stream header; the reader skips it
    again = framed + framed[:16] + framed[16:]
    assert decompress(Compression.SNAPPY, again) == data + data
    # the version fields are ignored (some writers get their byte order wrong)
    swapped = framed[:8] + struct.pack("<ii", 1, 1) + framed[16:]
    assert decompress(Compression.SNAPPY, swapped) == data
    assert (
        kcodec.snappy_encode(data, xerial_compatible=False) == raw
        or decompress(Compression.SNAPPY, kcodec.snappy_encode(data, xerial_compatible=False))
        == data
    )


def test_lz4_frame_matches_kafkas_writer() -> None:
    data = PAYLOADS["random"]
    frame = compress(Compression.LZ4, data)
    assert frame[:4] == struct.pack("<I", 0x184D2204)
    flg, bd = frame[4], frame[5]
    assert flg == 0x60, "version 01, independent blocks, no checksums, no content size"
    assert bd == 0x40, "64 KiB blocks"
    assert frame[6] == (xxh32(frame[4:6]) >> 8) & 0xFF
    assert frame.endswith(b"\x00\x00\x00\x00")
    lz4_frame = pytest.importorskip("lz4.frame")
    assert lz4_frame.decompress(frame) == data


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"content_checksum": True, "block_checksum": True},
        {"store_size": True, "block_size": 6},  # content size field and 1 MiB blocks
        {"block_linked": True},
        {"block_linked": True, "content_checksum": True, "block_size": 7},
        {"compression_level": 12},
    ],
)
def test_lz4_reads_frames_from_other_writers(kwargs: dict[str, object]) -> None:
    lz4_frame = pytest.importorskip("lz4.frame")
    data = PAYLOADS["mixed"]
    if "block_size" in kwargs:
        kwargs = dict(
            kwargs,
            block_size={6: lz4_frame.BLOCKSIZE_MAX1MB, 7: lz4_frame.BLOCKSIZE_MAX4MB}[
                kwargs["block_size"]
            ],
        )  # type: ignore[index]
    frame = lz4_frame.compress(data, **kwargs)
    assert decompress(Compression.LZ4, frame) == data


def test_lz4_legacy_broken_header_checksum() -> None:
    """KIP-57: magic 0 messages carry a header checksum computed over magic + descriptor."""
    data = PAYLOADS["text"]
    broken = compress(Compression.LZ4, data, legacy_lz4=True)
    correct = compress(Compression.LZ4, data)
    assert broken[:6] == correct[:6] and broken[7:] == correct[7:]
    assert broken[6] == (xxh32(broken[:6]) >> 8) & 0xFF != correct[6]
    assert decompress(Compression.LZ4, broken, legacy_lz4=True) == data
    with pytest.raises(CompressionError, match="checksum"):
        decompress(Compression.LZ4, broken)
    pytest.importorskip("xxhash")  # kafka-python's old-kafka LZ4 helpers need it
    assert kcodec.lz4_decode_old_kafka(broken) == data
    assert decompress(Compression.LZ4, kcodec.lz4_encode_old_kafka(data), legacy_lz4=True) == data


def test_xxh32_known_vectors() -> None:
    assert xxh32(b"") == 0x02CC5D05
    assert xxh32(b"a") == 0x550D7456
    assert xxh32(b"abc") == 0x32D153FF
    assert xxh32(b"Nobody inspects the spammish repetition") == 0xE2293B2F


@given(st.binary(max_size=100), st.integers(0, 2**32 - 1))
@settings(max_examples=60, deadline=None)
def test_xxh32_matches_reference(data: bytes, seed: int) -> None:
    xxhash = pytest.importorskip("xxhash")
    assert xxh32(data, seed) == xxhash.xxh32(data, seed=seed).intdigest()


def test_unknown_codec() -> None:
    with pytest.raises(UnsupportedCompressionError):
        decompress(5, b"abc")
    with pytest.raises(DecodeError):
        decompress(7, b"")


# -- bombs -----------------------------------------------------------------------------------

LIMIT = 1 << 20
BOMB = b"\x00" * (48 << 20)


@pytest.fixture(scope="module")
def bombs() -> dict[int, bytes]:
    out = {c: compress(c, BOMB, level=1 if c == Compression.GZIP else None) for c in CODECS}
    out[-Compression.SNAPPY] = bytes(cramjam.snappy.compress_raw(BOMB))  # raw, as librdkafka
    lz4_frame = pytest.importorskip("lz4.frame")
    out[-Compression.LZ4] = lz4_frame.compress(
        BOMB, block_linked=True, block_size=lz4_frame.BLOCKSIZE_MAX4MB
    )
    return out


def _zstd_rle_bomb(total: int) -> bytes:
    """A hand-made zstd frame of RLE blocks: ~4 bytes of input per 128 KiB of output."""
    frame = bytearray(struct.pack("<I", 0xFD2FB528))
    frame.append(0x00)  # FHD: no content size, not single segment, no checksum
    frame.append(0x58)  # window descriptor: 2^(10 + 11) = 2 MiB
    block = 128 * 1024
    n = total // block
    for i in range(n):
        last = 1 if i == n - 1 else 0
        header = last | (1 << 1) | (block << 3)
        frame += header.to_bytes(3, "little") + b"\x00"
    return bytes(frame)


@pytest.mark.parametrize(
    "key", [1, 2, 3, 4, -2, -3], ids=["gzip", "snappy", "lz4", "zstd", "snappy-raw", "lz4-linked"]
)
def test_decompression_bomb_is_refused(bombs: dict[int, bytes], key: int) -> None:
    codec = abs(key)
    payload = bombs[key]
    assert len(payload) < len(BOMB) // 10
    tracemalloc.start()
    try:
        with pytest.raises(DecompressionLimitExceeded) as info:
            decompress(codec, payload, max_size=LIMIT)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert info.value.limit == LIMIT
    assert isinstance(info.value, DecodeError)
    assert peak < 8 * LIMIT, f"peak {peak} bytes while refusing a bomb"
    # the same payload is fine under a limit that fits it
    if key == 1:
        assert len(decompress(codec, payload, max_size=len(BOMB))) == len(BOMB)


def test_zstd_hand_made_gigabyte_bomb() -> None:
    bomb = _zstd_rle_bomb(1 << 30)
    assert len(bomb) < 64 * 1024
    with pytest.raises(DecompressionLimitExceeded):
        decompress(Compression.ZSTD, bomb, max_size=64 << 20)
    small = _zstd_rle_bomb(1 << 20)
    assert decompress(Compression.ZSTD, small, max_size=1 << 20) == b"\x00" * (1 << 20)


def test_limit_is_exact() -> None:
    data = os.urandom(5000)
    for codec in CODECS:
        blob = compress(codec, data)
        assert decompress(codec, blob, max_size=5000) == data
        with pytest.raises(DecompressionLimitExceeded):
            decompress(codec, blob, max_size=4999)


# -- garbage never escapes as another exception --------------------------------------------------


def _only_decode_errors(codec: int, blob: bytes) -> None:
    try:
        decompress(codec, blob, max_size=1 << 20)
    except DecodeError:
        pass


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_truncations_raise_decode_error(codec: Compression) -> None:
    blob = compress(codec, PAYLOADS["mixed"][:20_000])
    for cut in range(0, len(blob), max(1, len(blob) // 300)):
        try:
            out = decompress(codec, blob[:cut])
        except DecodeError:
            continue
        # a prefix may legitimately be a complete stream only if it yields a prefix of the data
        assert PAYLOADS["mixed"][:20_000].startswith(out)


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
@given(data=st.data())
@settings(max_examples=150, deadline=None)
def test_mutated_payloads_raise_only_decode_error(codec: Compression, data: st.DataObject) -> None:
    blob = bytearray(compress(codec, PAYLOADS["text"][: data.draw(st.integers(0, 3000))]))
    for _ in range(data.draw(st.integers(1, 4))):
        if not blob:
            break
        i = data.draw(st.integers(0, len(blob) - 1))
        blob[i] = data.draw(st.integers(0, 255))
    _only_decode_errors(codec, bytes(blob))


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
@given(blob=st.binary(max_size=300))
@settings(max_examples=150, deadline=None)
def test_random_bytes_raise_only_decode_error(codec: Compression, blob: bytes) -> None:
    _only_decode_errors(codec, blob)
    # random bytes behind a valid-looking header reach the block decoders
    prefix = {
        Compression.GZIP: b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff",
        Compression.SNAPPY: XERIAL_MAGIC + struct.pack(">ii", 1, 1),
        Compression.LZ4: compress(Compression.LZ4, b"")[:7],
        Compression.ZSTD: struct.pack("<I", 0xFD2FB528),
    }[codec]
    _only_decode_errors(codec, prefix + blob)
