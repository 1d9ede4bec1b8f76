"""Metrics benchmark: what Prometheus metrics cost the broker — confluent-kafka produce and consume throughput
against one broker with the HTTP listener on and /metrics scraped every second, and one without it.

Both brokers are `kafkalite serve` subprocesses started once, with the same configuration except
`http.listeners`; the runs alternate between them (the order flips each repeat) and the medians over
--repeats are printed with their ratio (metrics / plain; the target is within 5%) and the broker's CPU
seconds per GB moved. Each produce run writes a fresh one-partition topic (acks=1, librdkafka defaults);
each consume run reads a topic pre-filled with the same records from offset 0 (bench_broker's tuned
consumer, so the client is less of a ceiling). The scraper is a thread of this process that GETs /metrics
every --scrape-interval seconds during the whole run, including the untimed filling.

Usage: python bench/bench_metrics.py [--messages N] [--size BYTES] [--repeats R] [--scrape-interval S]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator

from bench_broker import (
    CONSUMER_TUNED,
    LAST_CPU,
    consume_throughput,
    create_topic,
    fill_topic,
    produce_throughput,
)
from peers import BROKER_PIDS, free_port, kafkalite_broker, process_cpu_seconds


class Scraper:
    """GET /metrics every `interval` seconds in a thread; counts scrapes, bytes and the slowest one."""

    def __init__(self, url: str, interval: float) -> None:
        self.url = url
        self.interval = interval
        self.scrapes = 0
        self.bytes = 0
        self.slowest = 0.0
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="scraper", daemon=True)

    def __enter__(self) -> Scraper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            t0 = time.perf_counter()
            try:
                with urllib.request.urlopen(self.url + "/metrics", timeout=10) as resp:
                    self.bytes += len(resp.read())
            except OSError:
                self.failures += 1
                continue
            self.scrapes += 1
            self.slowest = max(self.slowest, time.perf_counter() - t0)


@contextlib.contextmanager
def brokers() -> Iterator[tuple[str, str, str]]:
    """(plain bootstrap, metrics bootstrap, metrics HTTP URL)."""
    http_port = free_port()
    with (
        kafkalite_broker() as plain,
        kafkalite_broker([f"http.listeners=http://127.0.0.1:{http_port}"]) as metered,
    ):
        url = f"http://127.0.0.1:{http_port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(url + "/metrics", timeout=5).read()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield plain, metered, url


def idle_cpu(bs: str, seconds: float) -> float:
    """CPU seconds the broker at `bs` used over `seconds` of wall time with no client traffic."""
    pid = BROKER_PIDS[bs]
    before = process_cpu_seconds(pid)
    time.sleep(seconds)
    return process_cpu_seconds(pid) - before


def bookkeeping_us() -> float:
    """Microseconds of BrokerStats.record_request, the per-request cost on the broker's hot path."""
    from kafkalite.broker.stats import BrokerStats

    stats = BrokerStats()
    n = 200_000
    t0 = time.perf_counter()
    for i in range(n):
        stats.record_request(0, i, i + 20_000, i + 150_000, 0, i + 150_000, i + 170_000)
    return (time.perf_counter() - t0) / n * 1e6


def s_per_gb(cpu_share: float, records_per_s: float, size: int) -> float:
    """Broker CPU seconds per GB of record payload, from its CPU share at a given throughput."""
    return cpu_share / (records_per_s * size / 1e9)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--scrape-interval", type=float, default=1.0)
    ap.add_argument("--idle-seconds", type=float, default=5.0)
    args = ap.parse_args()

    results: dict[tuple[str, str], list[tuple[float, float]]] = {}
    seq = 0
    with brokers() as (plain, metered, url):
        # idle: the plain broker alone, then the metrics broker while it is scraped
        idle = {"plain": idle_cpu(plain, args.idle_seconds)}
        with Scraper(url, args.scrape_interval) as idle_scraper:
            idle["metrics"] = idle_cpu(metered, args.idle_seconds)
        idle_scrapes = idle_scraper.scrapes
        with Scraper(url, args.scrape_interval) as scraper:
            sides = {"plain": plain, "metrics": metered}
            for rep in range(args.repeats):
                order = ["plain", "metrics"] if rep % 2 == 0 else ["metrics", "plain"]
                for side in order:
                    bs = sides[side]
                    seq += 1
                    topic = f"bench-metrics-p{seq}"
                    create_topic(bs, topic)
                    rate = produce_throughput(bs, topic, args.messages, args.size)
                    results.setdefault(("produce", side), []).append((rate, LAST_CPU["broker"]))
                    filled = f"bench-metrics-c{seq}"
                    fill_topic(bs, filled, args.messages, args.size)
                    rate = consume_throughput(bs, filled, args.messages, CONSUMER_TUNED)
                    results.setdefault(("consume", side), []).append((rate, LAST_CPU["broker"]))
                    print(
                        f"  repeat {rep + 1} {side:7s} produce {results['produce', side][-1][0]:>10,.0f}"
                        f" rec/s  consume {rate:>10,.0f} rec/s",
                        file=sys.stderr,
                    )
    print(
        f"kafkalite metrics cost: {args.messages:,} records of {args.size} B, medians of "
        f"{args.repeats}, /metrics every {args.scrape_interval:g} s "
        f"({scraper.scrapes} scrapes, {scraper.bytes / max(scraper.scrapes, 1) / 1024:.0f} KiB each, "
        f"slowest {scraper.slowest * 1000:.0f} ms, {scraper.failures} failed)"
    )
    print(
        f"{'workload':8s} {'plain rec/s':>12s} {'metrics rec/s':>14s} {'ratio':>6s}   "
        f"{'plain CPU s/GB':>14s} {'metrics CPU s/GB':>16s}"
    )
    for workload in ("produce", "consume"):
        row: dict[str, tuple[float, float]] = {}
        for side in ("plain", "metrics"):
            runs = results[workload, side]
            rate = statistics.median(r for r, _ in runs)
            cpu = statistics.median(s_per_gb(c, r, args.size) for r, c in runs)
            row[side] = (rate, cpu)
        ratio = row["metrics"][0] / row["plain"][0]
        print(
            f"{workload:8s} {row['plain'][0]:>12,.0f} {row['metrics'][0]:>14,.0f} {ratio:>6.3f}   "
            f"{row['plain'][1]:>14.1f} {row['metrics'][1]:>16.1f}"
        )
    per_scrape = (idle["metrics"] - idle["plain"]) / max(idle_scrapes, 1)
    print(
        f"idle broker CPU over {args.idle_seconds:g} s: plain {idle['plain'] * 1000:.0f} ms, "
        f"metrics {idle['metrics'] * 1000:.0f} ms (~{per_scrape * 1000:.1f} ms of broker CPU per "
        f"scrape); per-request bookkeeping {bookkeeping_us():.2f} us"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
