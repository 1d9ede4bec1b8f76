"""Moving a partition between brokers, with and without a replication throttle (KIP-73), in one run.

Three brokers (LocalCluster with its own ZooKeeper): partitions 0 and 1 of `bench-move` are filled with
--size bytes each on broker 1; partition 0 moves to broker 3 unthrottled, then partition 1 moves to
broker 3 with leader/follower.replication.throttled.rate = --throttle (set the way
kafka-reassign-partitions --throttle sets them). All along, a producer (acks=all, linger 0) writes
--rate records/s of 1 KiB to `bench-load` (replicas 3 and 1, both in the move); its latency is
measured without a move (half before the moves, half after) and during each move. Printed: move times
and their ratio, the producer's p50/p99 per phase and their ratios to the quiet phase, and the brokers'
CPU seconds per phase.

Usage: python bench/bench_reassign.py [--size 1073741824] [--throttle 20000000] [--rate 500]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from kafka import KafkaAdminClient
from kafka import TopicPartition as KpTopicPartition

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kafkalite.cluster.replication_quota import move_throttled_replicas
from kafkalite.local_cluster import LocalCluster
from peers import process_cpu_seconds

QUIET = {"log_level": 0}
MOVE = "bench-move"
LOAD = "bench-load"
SOURCE, LOAD_LEADER, TARGET = 1, 2, 3


class SteadyProducer(threading.Thread):
    """`rate` records/s to LOAD, each timed from produce() to its acknowledgement, by phase."""

    def __init__(self, bootstrap: str, rate: int) -> None:
        super().__init__(name="steady-producer", daemon=True)
        self.rate = rate
        self.phase = "warm-up"
        self.latencies: dict[str, list[float]] = {}
        self.failed = 0
        self.stop = threading.Event()
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "linger.ms": 0,
                "socket.nagle.disable": True,
                **QUIET,
            }
        )

    def run(self) -> None:
        value = b"l" * 1024
        start = time.perf_counter()
        sent = 0
        while not self.stop.is_set():
            due = int((time.perf_counter() - start) * self.rate) + 1
            while sent < due:
                phase, t0 = self.phase, time.perf_counter()

                def done(err: Any, _msg: Any, phase: str = phase, t0: float = t0) -> None:
                    if err is not None:
                        self.failed += 1
                        return
                    lat = (time.perf_counter() - t0) * 1000
                    self.latencies.setdefault(phase, []).append(lat)

                try:
                    self.producer.produce(LOAD, value, partition=0, on_delivery=done)
                except BufferError:
                    break
                sent += 1
            self.producer.poll(0)
            time.sleep(0.0005)
        self.producer.flush(60)

    def percentiles(self, phase: str) -> tuple[float, float, int]:
        lats = sorted(self.latencies.get(phase, []))
        if not lats:
            return float("nan"), float("nan"), 0
        return lats[len(lats) // 2], lats[min(len(lats) - 1, int(len(lats) * 0.99))], len(lats)


def _configs(
    admin: AdminClient, kind: ConfigResource.Type, name: str, **values: str | None
) -> None:
    entries = [
        ConfigEntry(
            k.replace("_", "."),
            v or "",
            incremental_operation=AlterConfigOpType.SET
            if v is not None
            else AlterConfigOpType.DELETE,
        )
        for k, v in values.items()
    ]
    res = ConfigResource(kind, name, incremental_configs=entries)
    admin.incremental_alter_configs([res])[res].result(30)


def fill(bootstrap: str, size: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 20, **QUIET})
    value = os.urandom(64_000)
    for partition in (0, 1):
        for _ in range(max(1, size // len(value))):
            while True:
                try:
                    p.produce(MOVE, value, partition=partition)
                    break
                except BufferError:
                    p.poll(0.01)
    if p.flush(600):
        raise SystemExit("fill: undelivered records")


def move(kadmin: KafkaAdminClient, partition: int, target: list[int]) -> float:
    """Seconds from AlterPartitionReassignments to the move listed as done."""
    tp = KpTopicPartition(MOVE, partition)
    t0 = time.perf_counter()
    result = kadmin.alter_partition_reassignments({tp: target})
    if result != {tp: None}:
        raise SystemExit(f"reassignment of {tp} refused: {result}")
    while kadmin.list_partition_reassignments():
        time.sleep(0.1)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=int, default=1 << 30, help="bytes in each moving partition")
    ap.add_argument("--throttle", type=int, default=20_000_000, help="replication bytes/s")
    ap.add_argument("--rate", type=int, default=500, help="steady producer records/s (1 KiB)")
    ap.add_argument("--quiet-seconds", type=float, default=10.0)
    a = ap.parse_args()

    base = tempfile.mkdtemp(prefix="bench-reassign-")
    try:
        measure(a, base)
    finally:
        shutil.rmtree(base, ignore_errors=True)  # twice --size of logs, copied: gigabytes


def measure(a: argparse.Namespace, base: str) -> None:
    with LocalCluster(base, 3) as cluster:
        bs = cluster.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bs, **QUIET})
        topics = [
            NewTopic(MOVE, 2, replication_factor=-1, replica_assignment=[[SOURCE], [SOURCE]]),
            NewTopic(LOAD, 1, replication_factor=-1, replica_assignment=[[TARGET, SOURCE]]),
        ]
        for f in admin.create_topics(topics, operation_timeout=30).values():
            f.result()
        t0 = time.perf_counter()
        fill(bs, a.size)
        print(
            f"filled 2 x {a.size / 1e6:.0f} MB in {time.perf_counter() - t0:.1f} s", file=sys.stderr
        )
        kadmin = KafkaAdminClient(bootstrap_servers=bs, request_timeout_ms=60_000)
        pids = {b.broker_id: b.proc.pid for b in cluster.brokers.values() if b.proc is not None}

        def cpu() -> float:
            return sum(process_cpu_seconds(pid) for pid in pids.values())

        load = SteadyProducer(bs, a.rate)
        load.start()
        time.sleep(3.0)  # connections and metadata settle
        phases: dict[str, tuple[float, float]] = {}  # name -> (seconds, broker CPU seconds)

        # the quiet phase is split: half before the moves, half after (the machine may drift)
        load.phase = "no move"
        c0 = cpu()
        time.sleep(a.quiet_seconds / 2)
        quiet_cpu = cpu() - c0

        load.phase = "unthrottled move"
        c0 = cpu()
        took = move(kadmin, 0, [TARGET])
        phases["unthrottled move"] = (took, cpu() - c0)
        print(f"unthrottled move: {took:.1f} s", file=sys.stderr)

        leader, follower = move_throttled_replicas({1: ([SOURCE], [TARGET])})
        _configs(
            admin,
            ConfigResource.Type.TOPIC,
            MOVE,
            leader_replication_throttled_replicas=leader,
            follower_replication_throttled_replicas=follower,
        )
        for broker in (SOURCE, TARGET):
            rate = str(a.throttle)
            _configs(
                admin,
                ConfigResource.Type.BROKER,
                str(broker),
                leader_replication_throttled_rate=rate,
                follower_replication_throttled_rate=rate,
            )
        load.phase = "throttled move"
        c0 = cpu()
        took = move(kadmin, 1, [TARGET])
        phases["throttled move"] = (took, cpu() - c0)
        print(f"throttled move: {took:.1f} s", file=sys.stderr)
        load.phase = "after"
        for broker in (SOURCE, TARGET):  # as kafka-reassign-partitions --verify does
            _configs(
                admin,
                ConfigResource.Type.BROKER,
                str(broker),
                leader_replication_throttled_rate=None,
                follower_replication_throttled_rate=None,
            )
        time.sleep(1.0)
        load.phase = "no move"
        c0 = cpu()
        time.sleep(a.quiet_seconds / 2)
        phases = {"no move": (a.quiet_seconds, quiet_cpu + cpu() - c0), **phases}
        load.stop.set()
        load.join(90)
        kadmin.close()

    mb = a.size / 1e6
    print(
        f"reassignment of a {mb:.0f} MB partition from broker {SOURCE} to {TARGET} "
        f"({os.cpu_count()} cores, 3 brokers), producer {a.rate} x 1 KiB/s acks=all to "
        f"replicas {TARGET},{SOURCE}; throttle {a.throttle / 1e6:.1f} MB/s"
    )
    p50q, p99q, _ = load.percentiles("no move")
    for name, (secs, cpu_s) in phases.items():
        p50, p99, n = load.percentiles(name)
        speed = f"{mb / secs:7.1f} MB/s" if name != "no move" else " " * 12
        print(
            f"  {name:<17} {secs:6.1f} s {speed}  producer p50 {p50:7.2f} ms  p99 {p99:7.2f} ms "
            f"({p99 / p99q:5.2f}x quiet, {n} records)  brokers' CPU {cpu_s:6.1f} s"
        )
    (t_free, _), (t_thr, _) = phases["unthrottled move"], phases["throttled move"]
    p50_free, p99_free, _ = load.percentiles("unthrottled move")
    p50_thr, p99_thr, _ = load.percentiles("throttled move")
    print(
        f"  ratios: move time throttled/unthrottled {t_thr / t_free:.2f}x; producer during the "
        f"move vs none: unthrottled p99 {p99_free / p99q:.2f}x p50 {p50_free / p50q:.2f}x, "
        f"throttled p99 {p99_thr / p99q:.2f}x p50 {p50_thr / p50q:.2f}x"
    )
    if load.failed:
        print(f"  {load.failed} steady records failed")


if __name__ == "__main__":
    main()
