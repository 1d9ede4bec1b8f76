"""Partitioners: murmur2 and keyed partitions match the Java client (oracle: kafka-python's port), sticky and
round-robin behaviour for null keys."""

from __future__ import annotations

import random

import pytest

from kafkalite.client.partitioner import (
    CallablePartitioner,
    DefaultPartitioner,
    RoundRobinPartitioner,
    UniformStickyPartitioner,
    make_partitioner,
    murmur2,
    partition_for_key,
)

kp = pytest.importorskip("kafka.partitioner.default")

# Vectors from Apache Kafka's own unit test of Utils.murmur2 (signed 32-bit Java ints).
JAVA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize("key,expected", sorted(JAVA_VECTORS.items()))
def test_murmur2_java_vectors(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected


def _oracle_partition(key: bytes, n: int) -> int:
    return (kp.murmur2(bytearray(key)) & 0x7FFFFFFF) % n


def test_keyed_partition_table_matches_oracle() -> None:
    rng = random.Random(7)
    keys = [b"", b"a", b"ab", b"abc", b"abcd", b"key-1", b"\xff\x00\x80", "ünïcode".encode()]
    keys += [bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64))) for _ in range(500)]
    for key in keys:
        for n in (1, 2, 3, 6, 7, 12, 100):
            assert partition_for_key(key, n) == _oracle_partition(key, n), (key, n)


def test_default_partitioner_uses_all_partitions_for_keys() -> None:
    p = DefaultPartitioner()
    # a key keeps its partition even when that partition has no leader right now
    assert p.partition("t", b"foobar", [0, 1, 2, 3], [1]) == _oracle_partition(b"foobar", 4)


def test_sticky_null_keys_stay_until_new_batch() -> None:
    p = UniformStickyPartitioner()
    first = p.partition("t", None, [0, 1, 2, 3], [0, 1, 2, 3])
    assert all(p.partition("t", None, [0, 1, 2, 3], [0, 1, 2, 3]) == first for _ in range(50))
    p.on_new_batch("t", first)
    second = p.partition("t", None, [0, 1, 2, 3], [0, 1, 2, 3])
    assert second != first
    p.on_new_batch("t", first)  # a stale notification does not move it
    assert p.partition("t", None, [0, 1, 2, 3], [0, 1, 2, 3]) == second


def test_sticky_prefers_available_partitions() -> None:
    p = UniformStickyPartitioner()
    for _ in range(20):
        p.on_new_batch("t", p.partition("t", None, [0, 1, 2], [2]))
        assert p.partition("t", None, [0, 1, 2], [2]) == 2


def test_round_robin_cycles() -> None:
    p = RoundRobinPartitioner()
    got = [p.partition("t", b"same", [0, 1, 2], [0, 1, 2]) for _ in range(6)]
    assert sorted(got[:3]) == [0, 1, 2] and got[:3] == got[3:]


def test_callable_partitioners() -> None:
    p4 = make_partitioner(lambda topic, key, parts, avail: len(topic) % len(parts))
    assert isinstance(p4, CallablePartitioner)
    assert p4.partition("abcd", None, [0, 1, 2], [0]) == 1
    p3 = make_partitioner(lambda key, parts, avail: parts[-1])
    assert p3.partition("t", b"k", [0, 1, 2], [0]) == 2
    with pytest.raises(ValueError):
        make_partitioner("nope")
