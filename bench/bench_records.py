"""Records benchmark: RecordBatch v2 build and decode throughput per codec, 100 B and 1 KiB records.

Prints records/s and MB/s (key + value bytes) beside kafka-python's builder and reader on the same bytes.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Callable

from kafkalite.records.batch import RecordBatchBuilder, iter_batches
from kafkalite.records.compression import Compression
from kafkalite.records.header import crc_valid, parse_batch_header

T0 = 1_700_000_000_000


def make_records(n: int, value_size: int, seed: int = 7) -> list[tuple[bytes, bytes]]:
    """Keys of 8-12 bytes; values of text-like bytes (compressible, not trivially)."""
    rnd = random.Random(seed)
    words = [
        bytes(rnd.choices(b"abcdefghijklmnopqrstuvwxyz", k=rnd.randint(2, 9))) for _ in range(500)
    ]
    out = []
    for i in range(n):
        value = bytearray()
        while len(value) < value_size:
            value += rnd.choice(words) + b" "
        out.append((b"key-%d" % i, bytes(value[:value_size])))
    return out


def chunks(records: list[tuple[bytes, bytes]], batch_bytes: int) -> list[list[tuple[bytes, bytes]]]:
    per = max(1, batch_bytes // (len(records[0][0]) + len(records[0][1]) + 8))
    return [records[i : i + per] for i in range(0, len(records), per)]


def build_ours(groups: list[list[tuple[bytes, bytes]]], codec: int) -> bytes:
    out = []
    offset = 0
    for group in groups:
        b = RecordBatchBuilder(compression=codec, base_offset=offset)
        for i, (key, value) in enumerate(group):
            b.append(key, value, (), T0 + i)
        out.append(b.build())
        offset += len(group)
    return b"".join(out)


def build_theirs(groups: list[list[tuple[bytes, bytes]]], codec: int) -> bytes:
    from kafka.record.default_records import DefaultRecordBatchBuilder

    out = []
    for group in groups:
        b = DefaultRecordBatchBuilder(
            magic=2,
            compression_type=codec,
            is_transactional=False,
            producer_id=-1,
            producer_epoch=-1,
            base_sequence=-1,
            batch_size=1 << 30,
        )
        for i, (key, value) in enumerate(group):
            b.append(i, T0 + i, key, value, [])
        out.append(bytes(b.build()))
    return b"".join(out)


def decode_ours(blob: bytes) -> int:
    n = 0
    for batch in iter_batches(blob):
        for r in batch.records:
            if r.value is not None:
                n += 1
    return n


def decode_theirs(blob: bytes) -> int:
    from kafka.record.memory_records import MemoryRecords

    n = 0
    for batch in MemoryRecords(blob):
        for r in batch:
            if r.value is not None:
                n += 1
    return n


def best_seconds(fn: Callable[[], object], repeat: int, min_time: float) -> float:
    """Median per-call time over `repeat` (at least 3) runs of at least `min_time` seconds each."""
    rounds: list[float] = []
    for _ in range(max(3, repeat)):
        calls = 0
        start = time.perf_counter()
        while True:
            fn()
            calls += 1
            elapsed = time.perf_counter() - start
            if elapsed >= min_time:
                break
        rounds.append(elapsed / calls)
    return statistics.median(rounds)


def header_view_us(repeat: int) -> float:
    groups = chunks(make_records(16, 1000), 1 << 30)
    blob = build_ours(groups, 0)
    n = 20_000
    rounds: list[float] = []
    for _ in range(max(3, repeat)):
        start = time.perf_counter()
        for _ in range(n):
            h = parse_batch_header(blob, 0)
            crc_valid(blob, 0, h)
        rounds.append((time.perf_counter() - start) / n)
    return statistics.median(rounds) * 1e6


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--records", type=int, default=20_000, help="records per measurement (100 B)")
    ap.add_argument("--batch-bytes", type=int, default=16384, help="records per batch, in bytes")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--min-time", type=float, default=0.3)
    ap.add_argument("--codecs", default="none,gzip,snappy,lz4,zstd")
    ap.add_argument("--sizes", default="100,1024")
    ap.add_argument("--no-peer", action="store_true", help="skip kafka-python")
    args = ap.parse_args(argv)

    peer = not args.no_peer
    if peer:
        try:
            import kafka.record.default_records  # noqa: F401
        except ImportError:
            print("kafka-python not installed: measuring kafkalite only", file=sys.stderr)
            peer = False

    print(
        f"python {sys.version.split()[0]}; batches of ~{args.batch_bytes} B; median of "
        f"{max(3, args.repeat)} rounds; one thread, so CPU s/GB = 1000 / (MB/s) of key + value bytes"
    )
    print(f"header view + CRC-32C of a 16 KiB batch: {header_view_us(args.repeat):.2f} us")
    cols = "size  codec   | build rec/s    MB/s  kp rec/s  ratio | decode rec/s    MB/s  kp rec/s  ratio"
    print(cols)
    print("-" * len(cols))
    for size in (int(s) for s in args.sizes.split(",")):
        n = max(100, args.records * 100 // size)
        records = make_records(n, size)
        payload = sum(len(k) + len(v) for k, v in records)
        groups = chunks(records, args.batch_bytes)
        for name in args.codecs.split(","):
            codec = Compression.from_name(name)
            blob = build_ours(groups, codec)
            assert decode_ours(blob) == n
            t_build = best_seconds(
                lambda g=groups, c=codec: build_ours(g, c), args.repeat, args.min_time
            )
            t_decode = best_seconds(lambda b=blob: decode_ours(b), args.repeat, args.min_time)
            row = f"{size:>4}  {name:<6}  | {n / t_build:>11,.0f} {payload / t_build / 1e6:>7.1f}"
            if peer:
                t_kb = best_seconds(
                    lambda g=groups, c=codec: build_theirs(g, c), args.repeat, args.min_time
                )
                assert decode_theirs(blob) == n
                t_kd = best_seconds(lambda b=blob: decode_theirs(b), args.repeat, args.min_time)
                row += f" {n / t_kb:>9,.0f} {t_kb / t_build:>5.2f}x"
            else:
                row += f" {'-':>9} {'-':>6}"
            row += f" | {n / t_decode:>12,.0f} {payload / t_decode / 1e6:>7.1f}"
            if peer:
                row += f" {n / t_kd:>9,.0f} {t_kd / t_decode:>5.2f}x"
            print(row, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
