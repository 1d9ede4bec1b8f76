"""Client benchmark: kafkalite's producer and consumer throughput beside confluent-kafka's (librdkafka),
against the same broker in the same run (kafkalite's broker in a subprocess, else Tansu), with ratios.

Usage: python bench/bench_client.py [--messages-100b N] [--messages-1k N] [--broker kafkalite|tansu]
       [--repeat N] [--producer-only] [--pure]
Producer and consumer runs alternate N times (default 3); each round's ratio is taken on the same broker
a moment apart, and the median of the rounds' records/s and of their ratios is printed (this machine is
noisy). Beside each figure: the client's and the broker's CPU seconds per GB of record payload (the
broker's only when it is a subprocess this run started). --pure runs kafkalite's client without its C
accelerator (KAFKALITE_NO_SPEEDUPS=1), to show what the pure-Python path reaches.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer
from confluent_kafka import TopicPartition as CTopicPartition

from peers import CpuMeter, kafkalite_broker, tansu_broker

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
if "--pure" in sys.argv:  # before kafkalite is imported: the accelerator is chosen at import
    os.environ["KAFKALITE_NO_SPEEDUPS"] = "1"

from kafkalite.client import KafkaAdminClient, KafkaConsumer, KafkaProducer, NewTopic  # noqa: E402

COMMON = {"acks": "1", "linger.ms": 5, "batch.size": 262144}


def broker(kind: str) -> contextlib.AbstractContextManager[str]:
    return kafkalite_broker() if kind == "kafkalite" else tansu_broker()


def create_topic(bs: str) -> str:
    name = f"bench-{uuid.uuid4().hex[:8]}"
    with KafkaAdminClient(bootstrap_servers=bs) as admin:
        admin.create_topics([NewTopic(name, 1, 1)])
    return name


def kl_produce(bs: str, topic: str, n: int, size: int) -> float:
    p = KafkaProducer(
        bootstrap_servers=bs,
        buffer_memory=256 << 20,
        **{k.replace(".", "_"): v for k, v in COMMON.items()},
    )
    p.partitions_for(topic)
    value = b"x" * size
    send = p.send
    t = time.perf_counter()
    for _ in range(n):
        send(topic, value)
    p.flush()
    dt = time.perf_counter() - t
    p.close()
    return n / dt


def ck_produce(bs: str, topic: str, n: int, size: int) -> float:
    p = Producer(
        {
            "bootstrap.servers": bs,
            **COMMON,
            "queue.buffering.max.messages": 2_000_000,
            "queue.buffering.max.kbytes": 2_000_000,
        }
    )
    p.list_topics(topic, timeout=10)
    value = b"x" * size
    produce = p.produce
    t = time.perf_counter()
    for i in range(n):
        produce(topic, value)
        if i % 10000 == 0:
            p.poll(0)
    p.flush(60)
    dt = time.perf_counter() - t
    return n / dt


def kl_consume(bs: str, topic: str, n: int) -> float:
    c = KafkaConsumer(
        bootstrap_servers=bs,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        max_poll_records=10000,
    )
    c.assign([(topic, 0)])
    got = 0
    t = time.perf_counter()
    deadline = time.monotonic() + 120
    while got < n and time.monotonic() < deadline:
        for recs in c.poll(1000).values():
            got += len(recs)
    dt = time.perf_counter() - t
    c.close()
    assert got >= n, f"kafkalite consumer got {got} of {n}"
    return n / dt


def ck_consume(bs: str, topic: str, n: int) -> float:
    c = Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": f"bench-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    c.assign([CTopicPartition(topic, 0, OFFSET_BEGINNING)])
    got = 0
    t = time.perf_counter()
    deadline = time.monotonic() + 120
    while got < n and time.monotonic() < deadline:
        for m in c.consume(10000, 1.0):
            if m.error() is None:
                got += 1
    dt = time.perf_counter() - t
    c.close()
    assert got >= n, f"confluent consumer got {got} of {n}"
    return n / dt


class Round:
    """One measured run: records/s, and client and broker CPU seconds per GB of payload."""

    def __init__(self, rate: float, n: int, size: int, meter: CpuMeter, wall: float) -> None:
        gb = n * size / 1e9
        self.rate = rate
        self.client_s_gb = meter.client * wall / gb
        self.broker_s_gb = meter.broker * wall / gb


def measured(bs: str, n: int, size: int, run: object, *args: object) -> Round:
    meter = CpuMeter(bs)
    t = time.perf_counter()
    with meter:
        rate = run(bs, *args)  # type: ignore[operator]
    return Round(rate, n, size, meter, time.perf_counter() - t)


def med(rounds: list[Round], attr: str) -> float:
    return statistics.median(getattr(r, attr) for r in rounds)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages-100b", type=int, default=300_000)
    ap.add_argument("--messages-1k", type=int, default=100_000)
    ap.add_argument("--broker", choices=["kafkalite", "tansu"], default="kafkalite")
    ap.add_argument("--repeat", type=int, default=3, help="producer rounds per side (median kept)")
    ap.add_argument("--producer-only", action="store_true", help="skip the consumer runs")
    ap.add_argument(
        "--pure", action="store_true", help="kafkalite's client without its C accelerator"
    )
    args = ap.parse_args()
    kind = args.broker
    try:
        ctx = broker(kind)
        bs = ctx.__enter__()
    except Exception as exc:
        print(f"kafkalite broker failed to start ({exc}); using Tansu")
        kind = "tansu"
        ctx = broker(kind)
        bs = ctx.__enter__()
    print(f"broker: {kind} at {bs}  (python {sys.version.split()[0]})")
    rows = []
    try:
        for size, n in ((100, args.messages_100b), (1024, args.messages_1k)):
            kps: list[Round] = []
            cps: list[Round] = []
            kcs: list[Round] = []
            ccs: list[Round] = []
            for _ in range(max(1, args.repeat)):
                t_kl = create_topic(bs)
                t_ck = create_topic(bs)
                kps.append(measured(bs, n, size, kl_produce, t_kl, n, size))
                cps.append(measured(bs, n, size, ck_produce, t_ck, n, size))
                if not args.producer_only:
                    kcs.append(measured(bs, n, size, kl_consume, t_ck, n))
                    ccs.append(measured(bs, n, size, ck_consume, t_ck, n))
            for what, ks, cs in (("producer", kps, cps), ("consumer", kcs, ccs)):
                if not ks:
                    continue
                ratios = [k.rate / c.rate for k, c in zip(ks, cs, strict=True)]
                print(
                    f"{size} B {what} rounds: kafkalite {[round(k.rate) for k in ks]}, confluent "
                    f"{[round(c.rate) for c in cs]}, ratios {[round(r, 2) for r in ratios]} "
                    f"(median {statistics.median(ratios):.2f})",
                    flush=True,
                )
            rows.append((size, n, kps, cps, kcs, ccs))
    finally:
        ctx.__exit__(None, None, None)
    accel = "pure Python (KAFKALITE_NO_SPEEDUPS=1)" if args.pure else "C accelerator"
    print(f"kafkalite client: {accel}; medians of {max(1, args.repeat)} rounds")
    print(
        f"{'size':>6} {'side':>9} | {'kafkalite':>11} {'confluent':>11} {'ratio':>6} | "
        f"{'client CPU s/GB kl/ck':>22} | {'broker CPU s/GB kl/ck':>22}"
    )
    for size, _n, kps, cps, kcs, ccs in rows:
        for what, ks, cs in (("produce", kps, cps), ("consume", kcs, ccs)):
            if not ks:
                continue
            kr, cr = med(ks, "rate"), med(cs, "rate")
            print(
                f"{size:>6} {what:>9} | {kr:>11,.0f} {cr:>11,.0f} {kr / cr:>6.2f} | "
                f"{med(ks, 'client_s_gb'):>10.1f} {med(cs, 'client_s_gb'):>11.1f} | "
                f"{med(ks, 'broker_s_gb'):>10.1f} {med(cs, 'broker_s_gb'):>11.1f}"
            )
    print("target (issue 32): the kafkalite producer >= 0.9x confluent-kafka at 100 B and 1 KiB")


if __name__ == "__main__":
    main()
