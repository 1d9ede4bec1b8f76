"""Producer partitioners: Java-compatible murmur2 for keys, uniform sticky (KIP-480) for null keys,
round-robin, and adapters for custom callables `(topic, key_bytes, all_partitions, available) -> int`.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from kafkalite.records.speedups import murmur2 as _c_murmur2

_M = 0x5BD1E995
_SEED = 0x9747B28C


def py_murmur2(data: bytes) -> int:
    """Kafka's murmur2 (seed 0x9747b28c) as a signed 32-bit int, exactly as the Java client computes it."""
    length = len(data)
    h = (_SEED ^ length) & 0xFFFFFFFF
    n4 = length >> 2
    if n4:
        ints = memoryview(data)[: n4 * 4].cast("I") if _LITTLE else None
        for i in range(n4):
            k = ints[i] if ints is not None else int.from_bytes(data[i * 4 : i * 4 + 4], "little")
            k = (k * _M) & 0xFFFFFFFF
            k ^= k >> 24
            k = (k * _M) & 0xFFFFFFFF
            h = ((h * _M) & 0xFFFFFFFF) ^ k
    rest = length & 3
    base = n4 * 4
    if rest == 3:
        h ^= data[base + 2] << 16
    if rest >= 2:
        h ^= data[base + 1] << 8
    if rest >= 1:
        h ^= data[base]
        h = (h * _M) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * _M) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


_LITTLE = memoryview(b"\x01\x00\x00\x00").cast("I")[0] == 1
murmur2 = _c_murmur2 or py_murmur2  # the C accelerator's when built (byte-for-byte the same hash)


def to_positive(n: int) -> int:
    return n & 0x7FFFFFFF


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """Java's BuiltInPartitioner.partitionForKey: toPositive(murmur2(key)) % numPartitions."""
    return to_positive(murmur2(key)) % num_partitions


class Partitioner(Protocol):
    def partition(
        self, topic: str, key: bytes | None, partitions: Sequence[int], available: Sequence[int]
    ) -> int: ...

    def on_new_batch(self, topic: str, prev_partition: int) -> None: ...


class UniformStickyPartitioner:
    """Null keys stick to one partition until a new batch is started there (KIP-480), then move on."""

    def __init__(self) -> None:
        self._sticky: dict[str, int] = {}
        self._avoid: dict[str, int] = {}  # the partition whose batch just filled: not next
        self._lock = threading.Lock()

    def _next(self, topic: str, partitions: Sequence[int], available: Sequence[int]) -> int:
        choices = available or partitions
        old = self._sticky.get(topic, self._avoid.pop(topic, None))
        if len(choices) == 1:
            new = choices[0]
        else:
            new = random.choice(choices)
            while new == old:
                new = random.choice(choices)
        self._sticky[topic] = new
        return new

    def partition(
        self, topic: str, key: bytes | None, partitions: Sequence[int], available: Sequence[int]
    ) -> int:
        p = self._sticky.get(topic)
        if p is None or p not in partitions:
            with self._lock:
                p = self._next(topic, partitions, available)
        return p

    def on_new_batch(self, topic: str, prev_partition: int) -> None:
        with self._lock:
            if self._sticky.get(topic) == prev_partition:
                self._avoid[topic] = prev_partition
                self._sticky.pop(topic, None)


class DefaultPartitioner(UniformStickyPartitioner):
    """Keyed records: murmur2 of the serialized key modulo all partitions; null keys: uniform sticky."""

    def __init__(self, ignore_keys: bool = False) -> None:
        super().__init__()
        self.ignore_keys = ignore_keys

    def partition(
        self, topic: str, key: bytes | None, partitions: Sequence[int], available: Sequence[int]
    ) -> int:
        if key is not None and not self.ignore_keys:
            return partitions[partition_for_key(key, len(partitions))]
        return super().partition(topic, key, partitions, available)


class RoundRobinPartitioner:
    """Every record to the next available partition of its topic, keys ignored."""

    def __init__(self) -> None:
        self._counters: dict[str, int] = {}

    def partition(
        self, topic: str, key: bytes | None, partitions: Sequence[int], available: Sequence[int]
    ) -> int:
        n = self._counters.get(topic, random.randrange(1 << 16))
        self._counters[topic] = n + 1
        choices = available or partitions
        return choices[n % len(choices)]

    def on_new_batch(self, topic: str, prev_partition: int) -> None:
        pass


class CallablePartitioner:
    """Wrap `fn(topic, key, partitions, available) -> int` (or a 3-argument `fn(key, partitions, available)`)."""

    def __init__(self, fn: Callable[..., int]) -> None:
        import inspect

        self.fn = fn
        try:
            self.arity = len(inspect.signature(fn).parameters)
        except (TypeError, ValueError):
            self.arity = 4

    def partition(
        self, topic: str, key: bytes | None, partitions: Sequence[int], available: Sequence[int]
    ) -> int:
        if self.arity == 3:
            return int(self.fn(key, list(partitions), list(available)))
        return int(self.fn(topic, key, list(partitions), list(available)))

    def on_new_batch(self, topic: str, prev_partition: int) -> None:
        pass


def make_partitioner(spec: Any, ignore_keys: bool = False) -> Any:
    if spec is None or spec in ("default", "murmur2", "murmur2_random", "consistent_random"):
        return DefaultPartitioner(ignore_keys)
    if spec in ("uniform_sticky", "sticky", "uniform-sticky"):
        return UniformStickyPartitioner()
    if spec in ("round_robin", "roundrobin", "round-robin"):
        return RoundRobinPartitioner()
    if isinstance(spec, str):
        raise ValueError(f"unknown partitioner {spec!r}")
    if isinstance(spec, type):
        return spec()
    if hasattr(spec, "partition"):
        return spec
    if callable(spec):
        return CallablePartitioner(spec)
    raise ValueError(f"unknown partitioner {spec!r}")
