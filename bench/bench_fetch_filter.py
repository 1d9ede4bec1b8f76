"""Fetch-filter benchmark (issue 35): a kafkalite consumer reading one partition with the broker filtering,
against the same consumer fetching everything and filtering locally, at 1%, 10% and 100% selectivity.

Both run against the same kafkalite broker process in the same invocation, and against Tansu (the peer: it
ignores the filter tag, so the kafkalite client filters locally there). The topic holds --records records
of --size bytes, keys user-0 .. user-99, written by librdkafka (linger 100 ms, lz4 unless --compression).
Per run: records scanned per second (the partition's records / wall time from the first poll to the
consumer's position at the end), records matched (the same in every mode, checked), the broker's CPU
seconds per GB scanned (GB of key and value bytes in the partition), and the client's CPU share. Ratios
are filtered / client-side, same selectivity. The machine's load average is printed: on a shared VM the
figures move with it, so compare within one run.

Usage: python bench/bench_fetch_filter.py [--records N] [--size B] [--compression lz4|none] [--repeats R]
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalite.client import KafkaConsumer
from kafkalite.filters import compile_filter
from peers import CpuMeter, kafkalite_broker, tansu_binary, tansu_broker

SELECTIVITY = {
    "1%": "key = 'user-7'",
    "10%": "key IN (" + ", ".join(f"'user-{i}'" for i in range(0, 100, 10)) + ")",
    "100%": "key STARTSWITH 'user-'",
}


def fill(bs: str, topic: str, n: int, size: int, compression: str) -> int:
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    p = Producer(
        {
            "bootstrap.servers": bs,
            "linger.ms": 100,
            "batch.size": 1_000_000,
            "compression.type": compression,
            "acks": 1,
        }
    )
    value = b"x" * size
    for i in range(n):
        while True:
            try:
                p.produce(topic, value, key=b"user-%d" % (i % 100), partition=0)
                break
            except BufferError:
                p.poll(0.05)
    p.flush(120)
    return n * (size + 10)


def consume(
    bs: str, topic: str, expr: str, broker_side: bool, end: int
) -> tuple[float, int, CpuMeter]:
    """(seconds, records matched, CPU meter) reading the partition to `end`."""
    flt = compile_filter(expr)
    c = KafkaConsumer(
        bootstrap_servers=bs,
        auto_offset_reset="earliest",
        filter=expr if broker_side else None,
        fetch_max_wait_ms=100,
    )
    tp = (topic, 0)
    c.assign([tp])
    c.position(tp)  # metadata and the offset reset before the clock starts
    matched = 0
    match = flt.match
    meter = CpuMeter(bs)
    with meter:
        t0 = time.perf_counter()
        while c.position(tp) < end:
            for recs in c.poll(timeout_ms=500, max_records=100_000).values():
                if broker_side:
                    matched += len(recs)
                else:
                    matched += sum(
                        1 for r in recs if match(r.offset, r.timestamp, r.key, r.headers)
                    )
        took = time.perf_counter() - t0
    c.close()
    return took, matched, meter


def run(name: str, bs: str, args: argparse.Namespace, rows: list[list[str]]) -> dict[str, float]:
    topic = f"flt-{uuid.uuid4().hex[:8]}"
    nbytes = fill(bs, topic, args.records, args.size, args.compression)
    out: dict[str, float] = {}
    modes = [("broker", True), ("client", False)] if name == "kafkalite" else [("client", False)]
    for label, expr in SELECTIVITY.items():
        for mode, broker_side in modes:
            samples = []
            for _ in range(max(3, args.repeats)):
                took, matched, meter = consume(bs, topic, expr, broker_side, args.records)
                samples.append((took, matched, meter))
            # the median round by time (this machine is shared: no best-of)
            took, matched, meter = sorted(samples, key=lambda s: s[0])[len(samples) // 2]
            want = args.records * int(label.rstrip("%")) // 100
            assert matched == want, f"{name} {mode} {label}: matched {matched}, expected {want}"
            rate = args.records / took
            cpu_gb = meter.broker * took / (nbytes / 1e9)
            out[f"{label}/{mode}"] = rate
            out[f"{label}/{mode}/cpu"] = cpu_gb
            rows.append(
                [
                    name,
                    label,
                    "broker filter" if broker_side else "client-side",
                    f"{rate / 1e3:,.0f}k",
                    f"{matched:,}",
                    f"{cpu_gb:.2f}",
                    f"{meter.client:.2f}",
                ]
            )
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--compression", default="lz4")
    ap.add_argument("--repeats", type=int, default=3, help="rounds per mode (at least 3)")
    args = ap.parse_args()
    rows: list[list[str]] = []
    with kafkalite_broker() as bs:
        ours = run("kafkalite", bs, args, rows)
    peer: dict[str, float] = {}
    if tansu_binary() is not None:
        with tansu_broker() as bs:
            peer = run("tansu", bs, args, rows)
    head = ["broker", "select", "mode", "records/s", "matched", "broker CPU s/GB", "client cores"]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    for r in [head, *rows]:
        print("  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)))
    print()
    for label in SELECTIVITY:
        b, c = ours[f"{label}/broker"], ours[f"{label}/client"]
        cb, cc = ours[f"{label}/broker/cpu"], ours[f"{label}/client/cpu"]
        line = (
            f"{label:>5}: broker filter / client-side on kafkalite: {b / c:.2f}x records/s, "
            f"broker CPU/GB {cb:.2f} against {cc:.2f} s/GB"
        )
        if peer:
            line += f"; / Tansu client-side: {b / peer[f'{label}/client']:.2f}x records/s"
        print(line)
    print(
        f"({args.records:,} records of {args.size} B, {args.compression}; median of {max(3, args.repeats)})"
    )
    print(f"machine load: {Path('/proc/loadavg').read_text().split()[:3]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
