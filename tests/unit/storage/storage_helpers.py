"""Shared helpers for the storage tests: building batches and reading a log back in full.

Batches come from kafkalite.records.batch (the builder under test elsewhere)."""

from __future__ import annotations

import random
from pathlib import Path

from kafkalite.records.batch import RecordBatch, build_batch, iter_batches
from kafkalite.records.header import compute_crc, iter_batch_headers
from kafkalite.storage import Log, LogConfig

_Rec = tuple[bytes | None, bytes, list[tuple[str, bytes | None]], int | None]


def make_batch(
    n: int = 1,
    value_size: int = 10,
    *,
    key: bytes | None = None,
    timestamp: int | None = 1_000,
    compression: int = 0,
    tag: int = 0,
) -> bytes:
    recs: list[_Rec] = []
    for i in range(n):
        value = (b"%d:%d:" % (tag, i)).ljust(value_size, b"x")[: max(value_size, 1)]
        recs.append((key, value, [], timestamp))
    return build_batch(recs, compression=compression)


def random_batch(rng: random.Random, *, max_records: int = 5, max_value: int = 300) -> bytes:
    n = rng.randint(1, max_records)
    ts = rng.randint(0, 10_000)
    recs: list[_Rec] = [
        (
            None if rng.random() < 0.3 else b"k%d" % rng.randint(0, 20),
            rng.randbytes(rng.randint(0, max_value)),
            [],
            ts + i,
        )
        for i in range(n)
    ]
    return build_batch(recs, compression=rng.choice([0, 0, 0, 1]))


def read_all(lg: Log, start: int | None = None, max_bytes: int = 1 << 20) -> bytes:
    """Every byte the log serves from `start` (default: log start) to its end, read forward."""
    off = lg.log_start_offset if start is None else start
    out = bytearray()
    for _ in range(100_000):
        if off >= lg.log_end_offset:
            break
        info = lg.read(off, max_bytes)
        if info.slice is None:
            break
        blob = info.slice.read_bytes()
        assert len(blob) == info.slice.length
        last = None
        for pos, h in iter_batch_headers(blob):
            assert compute_crc(blob, pos, h.size) == h.crc, "served a batch with a bad CRC"
            last = h
        assert last is not None
        out += blob
        off = last.next_offset
    return bytes(out)


def batches(blob: bytes) -> list[RecordBatch]:
    return list(iter_batches(blob))


def open_log(path: Path, **cfg: int | str | float) -> Log:
    return Log.open(path, LogConfig(**cfg))  # type: ignore[arg-type]


def crash(lg: Log) -> None:
    """Abandon a log as a crash would: close descriptors without flushing or sealing anything."""
    for s in lg.segments:
        s.close()
