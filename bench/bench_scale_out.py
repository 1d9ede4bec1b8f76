"""Scale-out on one host: `kafkalite cluster up --brokers N` as the way to use N cores of one machine.

Produce throughput of two confluent-kafka producer processes (one per partition, 1 KiB records,
acks=1) against one broker holding both partitions and against two brokers holding one each (the
same ZooKeeper-backed cluster code, RF=1), in the same run, alternating; the brokers' CPU seconds per
GB are printed beside the throughput. On a 2-core machine the clients share the cores with the
brokers, so the ratio shows what a second broker process buys when the broker is one of the limits.

Usage: python bench/bench_scale_out.py [--mb 256] [--rounds 3] [--value-size 1024]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kafkalite.local_cluster import LocalCluster
from peers import process_cpu_seconds

QUIET = {"log_level": 0}


def _producer(bs: str, topic: str, partition: int, n: int, size: int, ready: Any, go: Any) -> None:
    p = Producer({"bootstrap.servers": bs, "acks": "1", **QUIET})
    p.list_topics(topic, timeout=10)
    value = os.urandom(size)
    p.produce(topic, value, partition=partition)
    p.flush(30)
    ready.set()
    go.wait()
    for _ in range(n):
        while True:
            try:
                p.produce(topic, value, partition=partition)
                break
            except BufferError:
                p.poll(0.001)
    if p.flush(300):
        raise SystemExit("undelivered records")


def run(cluster: LocalCluster, topic: str, n: int, size: int) -> tuple[float, float]:
    """(MB/s of both producers together, the brokers' CPU seconds per GB)."""
    bs = cluster.bootstrap_servers
    ctx = mp.get_context("spawn")
    go = ctx.Event()
    procs, readies = [], []
    for part in (0, 1):
        ready = ctx.Event()
        proc = ctx.Process(target=_producer, args=(bs, topic, part, n, size, ready, go))
        proc.start()
        procs.append(proc)
        readies.append(ready)
    for ready in readies:
        ready.wait(60)
    pids = [b.proc.pid for b in cluster.brokers.values() if b.proc is not None]
    cpu0 = sum(process_cpu_seconds(pid) for pid in pids)
    t0 = time.perf_counter()
    go.set()
    for proc in procs:
        proc.join()
        if proc.exitcode != 0:
            raise SystemExit(f"producer failed ({proc.exitcode})")
    took = time.perf_counter() - t0
    cpu = sum(process_cpu_seconds(pid) for pid in pids) - cpu0
    gb = 2 * n * size / 1e9
    return gb * 1000 / took, cpu / gb


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=int, default=256, help="MB per run (both producers together)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--value-size", type=int, default=1024)
    a = ap.parse_args()
    n = a.mb * 1_000_000 // a.value_size // 2
    results: dict[int, list[tuple[float, float]]] = {1: [], 2: []}
    with (
        LocalCluster(tempfile.mkdtemp(prefix="bench-scale-1-"), 1) as one,
        LocalCluster(tempfile.mkdtemp(prefix="bench-scale-2-"), 2) as two,
    ):
        clusters = {1: one, 2: two}
        for cluster in clusters.values():
            admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, **QUIET})
            for r in range(a.rounds):
                # RF=1: the controller spreads the two partitions, one a broker when there are two
                topic = f"scale-{r}"
                for f in admin.create_topics(
                    [NewTopic(topic, 2, 1)], operation_timeout=30
                ).values():
                    f.result()
                leaders = {
                    p.leader for p in admin.list_topics(topic).topics[topic].partitions.values()
                }
                if len(leaders) != len(cluster.brokers):
                    raise SystemExit(
                        f"{topic}: partitions led by {sorted(leaders)}, expected one each"
                    )
        for r in range(a.rounds):
            for brokers in (1, 2) if r % 2 == 0 else (2, 1):
                results[brokers].append(run(clusters[brokers], f"scale-{r}", n, a.value_size))
                mbs, cpu = results[brokers][-1]
                print(f"  round {r + 1}: {brokers} broker(s) {mbs:7.1f} MB/s, {cpu:.2f} CPU-s/GB",
                      file=sys.stderr)  # fmt: skip
    (mb1, cpu1), (mb2, cpu2) = (
        (statistics.median(m for m, _ in results[k]), statistics.median(c for _, c in results[k]))
        for k in (1, 2)
    )
    print(
        f"scale-out on one host ({os.cpu_count()} cores): 2 producer processes x "
        f"{n:,} records of {a.value_size} B, acks=1, medians of {a.rounds} alternating rounds"
    )
    print(f"  1 broker,  2 partitions : {mb1:7.1f} MB/s, brokers' CPU {cpu1:.2f} s/GB")
    print(
        f"  2 brokers, 1 partition each : {mb2:7.1f} MB/s, brokers' CPU {cpu2:.2f} s/GB   "
        f"ratio {mb2 / mb1:.2f}x"
    )


if __name__ == "__main__":
    main()
