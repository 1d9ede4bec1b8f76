"""Client benchmark: kafkalite's producer and consumer throughput beside confluent-kafka's (librdkafka),
against the same broker in the same run (kafkalite's broker in a subprocess, else Tansu), with ratios.

Usage: python bench/bench_client.py [--messages-100b N] [--messages-1k N] [--broker kafkalite|tansu]
       [--repeat N] [--producer-only]
Producer runs alternate N times (default 3); each round's ratio is taken on the same broker a moment
apart, and the median of the rounds' records/s and of their ratios is printed (this machine is noisy).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
import uuid
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer
from confluent_kafka import TopicPartition as CTopicPartition

from peers import kafkalite_broker, tansu_broker

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages-100b", type=int, default=300_000)
    ap.add_argument("--messages-1k", type=int, default=100_000)
    ap.add_argument("--broker", choices=["kafkalite", "tansu"], default="kafkalite")
    ap.add_argument("--repeat", type=int, default=3, help="producer rounds per side (median kept)")
    ap.add_argument("--producer-only", action="store_true", help="skip the consumer runs")
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
            kps, cps = [], []
            for _ in range(max(1, args.repeat)):
                t_kl = create_topic(bs)
                t_ck = create_topic(bs)
                kps.append(kl_produce(bs, t_kl, n, size))
                cps.append(ck_produce(bs, t_ck, n, size))
            ratios = [k / c for k, c in zip(kps, cps, strict=True)]
            print(
                f"{size} B producer rounds: kafkalite {[round(k) for k in kps]}, confluent "
                f"{[round(c) for c in cps]}, ratios {[round(r, 2) for r in ratios]} "
                f"(median {statistics.median(ratios):.2f})",
                flush=True,
            )
            kp, cp = statistics.median(kps), statistics.median(cps)
            if args.producer_only:
                kc = cc = float("nan")
            else:
                kc = kl_consume(bs, t_ck, n)
                cc = ck_consume(bs, t_ck, n)
            rows.append((size, n, kp, cp, kc, cc))
    finally:
        ctx.__exit__(None, None, None)
    print(
        f"{'size':>6} {'records':>8} | {'producer msg/s':>28} {'ratio':>6} | {'consumer msg/s':>28} {'ratio':>6}"
    )
    print(
        f"{'':>6} {'':>8} | {'kafkalite':>13} {'confluent':>14} {'':>6} | {'kafkalite':>13} {'confluent':>14}"
    )
    for size, n, kp, cp, kc, cc in rows:
        print(
            f"{size:>6} {n:>8} | {kp:>13,.0f} {cp:>14,.0f} {kp / cp:>6.2f} | {kc:>13,.0f} {cc:>14,.0f} {kc / cc:>6.2f}"
        )
        print(
            f"{'':>6} {'MB/s':>8} | {kp * size / 1e6:>13.1f} {cp * size / 1e6:>14.1f} {'':>6} | {kc * size / 1e6:>13.1f} {cc * size / 1e6:>14.1f}"
        )
    print("targets: producer >= 0.5x, consumer >= 0.5x confluent-kafka")


if __name__ == "__main__":
    main()
