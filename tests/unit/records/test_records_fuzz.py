"""Seeded mutation fuzzing of every records entry point: batches of every codec and legacy message sets.

Anything malformed must surface as DecodeError (or a subclass), never as another exception type.
"""

from __future__ import annotations

import os
import random

import pytest

from kafkalite.protocol.exceptions import DecodeError
from kafkalite.records.batch import RecordBatchBuilder, iter_batches
from kafkalite.records.legacy import LegacyMessageSetBuilder, downconvert, upconvert_to_v2


def _seeds(rnd: random.Random) -> list[bytes]:
    seeds = []
    for codec in range(5):
        b = RecordBatchBuilder(compression=codec, base_offset=5, producer_id=1, producer_epoch=0)
        for i in range(5):
            value = bytes(rnd.randrange(256) for _ in range(rnd.randrange(40)))
            b.append(
                b"k%d" % i if i % 2 else None, value, [("h", b"v")] if i == 2 else (), 1000 + i
            )
        seeds.append(b.build())
    for magic in (0, 1):
        for codec in range(4):
            lb = LegacyMessageSetBuilder(magic, codec)
            for i in range(3):
                lb.append(b"k", b"value%d" % i, 1000 + i)
            seeds.append(lb.build())
    return seeds


def _mutate(rnd: random.Random, blob: bytearray) -> bytes:
    for _ in range(rnd.randint(1, 8)):
        i = rnd.randrange(len(blob))
        op = rnd.random()
        if op < 0.6:
            blob[i] = rnd.randrange(256)
        elif op < 0.8:
            blob[i] ^= 1 << rnd.randrange(8)
        elif op < 0.9:
            del blob[i : i + rnd.randint(1, 10)]
        else:
            blob[i:i] = bytes(rnd.randrange(256) for _ in range(rnd.randint(1, 5)))
        if not blob:
            blob = bytearray(b"\x00")
    return bytes(blob)


def _fuzz(iterations: int, seed: int) -> int:
    rnd = random.Random(seed)
    seeds = _seeds(rnd)
    decoded = 0
    for _ in range(iterations):
        blob = bytearray(rnd.choice(seeds))
        if rnd.random() < 0.3:
            blob += rnd.choice(seeds)
        data = _mutate(rnd, blob)
        try:
            for batch in iter_batches(
                data, verify_crc=rnd.random() < 0.2, max_decompressed_size=1 << 20
            ):
                decoded += len(batch.records)
        except DecodeError:
            pass
        try:
            upconvert_to_v2(data, verify_crc=False, max_decompressed_size=1 << 20)
        except DecodeError:
            pass
        try:
            downconvert(data, rnd.randrange(2), max_decompressed_size=1 << 20)
        except DecodeError:
            pass
    return decoded


def test_mutation_fuzz_quick() -> None:
    assert _fuzz(1500, seed=1) > 0  # some mutants still decode (outside the CRC-checked bytes)


# the suite's deep run: 25,000 seeded mutants; KAFKALITE_FUZZ_MUTANTS=100000 (or more) is the long run
MANY_MUTANTS = int(os.environ.get("KAFKALITE_FUZZ_MUTANTS", "25000"))


@pytest.mark.slow
def test_mutation_fuzz_many() -> None:
    assert _fuzz(MANY_MUTANTS, seed=2) > 0
