"""Schema Registry benchmark (issue 33): registry lookups by id per second over HTTP against the same
listener's trivial /schemas/types (the HTTP stack's ceiling, same run), and confluent-kafka produce
throughput into topics with value validation off, with id checks, and with full Avro payload checks.

One `kafkalite serve` subprocess with the HTTP listener; the produce runs alternate between the three
topics (the order rotates each repeat) and the medians over --repeats are printed with their ratio to
validation off (the target for id checks is >= 0.9) and the broker's CPU seconds per GB.

Usage: python bench/bench_schemas.py [--messages N] [--size BYTES] [--repeats R] [--seconds S]
       [--concurrency C]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import statistics
import time
import urllib.request

import aiohttp
import fastavro
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from peers import CpuMeter, free_port, kafkalite_broker

SCHEMA = {
    "type": "record",
    "name": "Click",
    "namespace": "bench",
    "fields": [
        {"name": "user", "type": "long"},
        {"name": "page", "type": "string"},
        {"name": "referrer", "type": ["null", "string"], "default": None},
        {"name": "ms", "type": "int"},
    ],
}
MODES = {
    "off": {},
    "id checks": {"confluent.value.schema.validation": "true"},
    "full Avro": {
        "confluent.value.schema.validation": "true",
        "kafkalite.schema.payload.validation": "true",
    },
}


def wait_http(http: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"{http}/schemas/types", timeout=5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def register(http: str, subject: str) -> int:
    req = urllib.request.Request(
        f"{http}/subjects/{subject}/versions",
        data=json.dumps({"schema": json.dumps(SCHEMA)}).encode(),
        headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
        method="POST",
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        return int(json.loads(resp.read())["id"])


def payloads(schema_id: int, size: int, n: int = 64) -> list[bytes]:
    parsed = fastavro.parse_schema(SCHEMA)
    out = []
    for i in range(n):
        buf = io.BytesIO()
        buf.write(b"\x00" + schema_id.to_bytes(4, "big"))
        page = f"/products/{i:05d}/details"
        page += "x" * max(0, size - 20 - len(page))  # (about `size` bytes in all)
        rec = {"user": i * 7919, "page": page, "referrer": None, "ms": i}
        fastavro.schemaless_writer(buf, parsed, rec)
        out.append(buf.getvalue())
    return out


def produce(bs: str, topic: str, values: list[bytes], count: int) -> tuple[float, float, int]:
    """(records/s, broker CPU seconds per GB, failures)."""
    p = Producer({"bootstrap.servers": bs, "acks": 1})
    failures = [0]

    def cb(err, _msg):  # type: ignore[no-untyped-def]
        if err is not None:
            failures[0] += 1

    p.list_topics(topic, timeout=10)
    nbytes = sum(len(values[i % len(values)]) for i in range(count))
    with CpuMeter(bs) as meter:
        t0 = time.perf_counter()
        for i in range(count):
            while True:
                try:
                    p.produce(topic, values[i % len(values)], partition=0, on_delivery=cb)
                    break
                except BufferError:
                    p.poll(0.001)
        p.flush(300)
        elapsed = time.perf_counter() - t0
    cpu_per_gb = meter.broker * elapsed / (nbytes / 1e9)
    return count / elapsed, cpu_per_gb, failures[0]


async def lookups(url: str, seconds: float, concurrency: int) -> float:
    """Requests answered per second, `concurrency` keep-alive requests in flight."""
    done = 0
    deadline = time.perf_counter() + seconds
    async with aiohttp.ClientSession() as session:

        async def worker() -> None:
            nonlocal done
            while time.perf_counter() < deadline:
                async with session.get(url) as resp:
                    await resp.read()
                    assert resp.status == 200, resp.status
                done += 1

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return done / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--size", type=int, default=32, help="about this many bytes per Avro value")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--concurrency", type=int, default=16)
    args = ap.parse_args()
    http_port = free_port()
    http = f"http://127.0.0.1:{http_port}"
    print(f"load average: {os.getloadavg()}")
    with kafkalite_broker([f"http.listeners={http}"]) as bs:
        wait_http(http)
        admin = AdminClient({"bootstrap.servers": bs})
        topics = {}
        for i, (mode, configs) in enumerate(MODES.items()):
            topic = f"clicks-{i}"
            admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic].result(30)
            topics[mode] = topic
        schema_id = 0
        for topic in topics.values():
            schema_id = register(http, f"{topic}-value")
        values = payloads(schema_id, args.size)
        print(f"record size: {len(values[0])} bytes, {args.messages} records per run")

        ceiling = asyncio.run(lookups(f"{http}/schemas/types", args.seconds, args.concurrency))
        by_id = asyncio.run(
            lookups(f"{http}/schemas/ids/{schema_id}", args.seconds, args.concurrency)
        )
        print(
            f"lookups by id: {by_id:,.0f}/s; /schemas/types (ceiling): {ceiling:,.0f}/s; "
            f"ratio {by_id / ceiling:.2f}"
        )

        results: dict[str, list[tuple[float, float]]] = {m: [] for m in MODES}
        order = list(MODES)
        for r in range(args.repeats):
            for mode in order[r % 3 :] + order[: r % 3]:
                rate, cpu, failed = produce(bs, topics[mode], values, args.messages)
                assert failed == 0, f"{failed} records refused in mode {mode}"
                results[mode].append((rate, cpu))
        base = statistics.median(r for r, _ in results["off"])
        print(f"{'validation':<12} {'records/s':>12} {'vs off':>7} {'broker CPU s/GB':>16}")
        for mode, runs in results.items():
            rate = statistics.median(r for r, _ in runs)
            cpu = statistics.median(c for _, c in runs)
            print(f"{mode:<12} {rate:>12,.0f} {rate / base:>7.2f} {cpu:>16.1f}")
    print(f"load average: {os.getloadavg()}")


if __name__ == "__main__":
    main()
