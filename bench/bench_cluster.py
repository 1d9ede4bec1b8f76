"""Replication benchmark on a 3-broker kafkalite cluster (real ZooKeeper, broker processes):

- produce throughput RF=3 acks=all against RF=1 acks=1 in the same run (target >= 0.5x), and the
  brokers' CPU seconds per replicated GB;
- failover: SIGKILL of a leader (and SIGTERM, a controlled shutdown) to the first successful
  acks=all produce on the new leader (targets: <= session timeout + 1 s; <= 1 s);
- catch-up of a follower restarted N MiB behind, against the single-node append rate measured in
  the same run (target >= 50%).

Usage: python bench/bench_cluster.py [--mb-produce 64] [--mb-behind 128] [--value-size 1024]
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kafkalite.local_cluster import LocalCluster
from peers import process_cpu_seconds

QUIET = {"log_level": 0}
SESSION_MS = 6000


def produce(bs: str, topic: str, n: int, value: bytes, acks: str) -> float:
    p = Producer(
        {
            "bootstrap.servers": bs,
            "acks": acks,
            "linger.ms": 10,
            "batch.size": 256 * 1024,
            "compression.type": "none",
            "enable.idempotence": acks == "all",
            **QUIET,
        }
    )
    errors = []
    started = time.perf_counter()
    for i in range(n):
        while True:
            try:
                p.produce(
                    topic, value, partition=i % 3, on_delivery=lambda e, m: e and errors.append(e)
                )
                break
            except BufferError:
                p.poll(0.005)
    p.flush(300)
    took = time.perf_counter() - started
    if errors:
        raise SystemExit(f"{len(errors)} produce errors, first: {errors[0]}")
    return took


def broker_cpu(cluster: LocalCluster) -> float:
    return sum(
        process_cpu_seconds(b.proc.pid) for b in cluster.brokers.values() if b.proc and b.running
    )


def first_ack_after(bs: str, topic: str, partition: int, started: float) -> float:
    p = Producer({"bootstrap.servers": bs, "acks": "all", "message.timeout.ms": 60000, **QUIET})
    done: list[float] = []
    while not done:
        p.produce(
            topic,
            b"probe",
            partition=partition,
            on_delivery=lambda e, m: e is None and done.append(time.monotonic()),
        )
        p.flush(60)
    return done[0] - started


def leader_of(admin: AdminClient, topic: str, partition: int) -> int:
    return int(admin.list_topics(topic, timeout=10).topics[topic].partitions[partition].leader)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb-produce", type=int, default=64)
    ap.add_argument("--mb-behind", type=int, default=128)
    ap.add_argument("--value-size", type=int, default=1024)
    a = ap.parse_args()
    value = os.urandom(a.value_size)
    n = a.mb_produce * 1024 * 1024 // a.value_size
    with LocalCluster(
        tempfile.mkdtemp(prefix="bench-cluster-"),
        3,
        config={
            "zookeeper.session.timeout.ms": SESSION_MS,
            "controlled.shutdown.retry.backoff.ms": 500,
        },
    ) as cluster:
        bs = cluster.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bs, **QUIET})
        for f in admin.create_topics(
            [NewTopic("rf1", 3, 1), NewTopic("rf3", 3, 3, config={"min.insync.replicas": "2"})],
            operation_timeout=30,
        ).values():
            f.result()
        mb = n * a.value_size / 1e6
        c0 = broker_cpu(cluster)
        t1 = produce(bs, "rf1", n, value, "1")
        cpu1 = broker_cpu(cluster) - c0
        c0 = broker_cpu(cluster)
        t3 = produce(bs, "rf3", n, value, "all")
        cpu3 = broker_cpu(cluster) - c0
        print(f"produce {n} x {a.value_size} B ({mb:.0f} MB), 3 partitions, confluent-kafka client")
        print(
            f"  RF=1 acks=1  : {mb / t1:7.1f} MB/s, brokers' CPU {cpu1 / (mb / 1000):6.1f} s per GB"
        )
        print(
            f"  RF=3 acks=all: {mb / t3:7.1f} MB/s, brokers' CPU {cpu3 / (3 * mb / 1000):6.1f} s "
            f"per replicated GB"
        )
        print(f"  ratio RF=3 acks=all / RF=1 acks=1: {t1 / t3:.2f}x (target >= 0.5x)")

        # failover after SIGKILL of a leader
        victim = leader_of(admin, "rf3", 0)
        started = time.monotonic()
        cluster.brokers[victim].kill()
        took = first_ack_after(bs, "rf3", 0, started)
        print(
            f"SIGKILL of leader {victim}: first acks=all produce after {took:.2f} s "
            f"(target <= {SESSION_MS / 1000 + 1:.0f} s)"
        )
        cluster.brokers[victim].start()
        time.sleep(3)
        # failover with a controlled shutdown (SIGTERM)
        victim = leader_of(admin, "rf3", 1)
        started = time.monotonic()
        proc = cluster.brokers[victim].proc
        assert proc is not None
        proc.send_signal(signal.SIGTERM)
        took = first_ack_after(bs, "rf3", 1, started)
        print(
            f"SIGTERM (controlled shutdown) of leader {victim}: first acks=all produce after {took:.2f} s (target <= 1 s)"
        )
        proc.wait(60)
        cluster.brokers[victim].start()

        # catch-up of a follower that was away while N MiB arrived
        behind = a.mb_behind * 1024 * 1024 // a.value_size
        lag_leader = leader_of(admin, "rf3", 2)
        follower = next(b for b in cluster.brokers if b != lag_leader)
        cluster.brokers[follower].kill()
        time.sleep(SESSION_MS / 1000 + 1)
        t_single = produce(bs, "rf1", behind, value, "1")
        produce(bs, "rf3", behind, value, "1")
        started = time.monotonic()
        cluster.brokers[follower].start()
        while True:
            md = admin.list_topics("rf3", timeout=10).topics["rf3"]
            if all(follower in p.isrs for p in md.partitions.values()):
                break
            time.sleep(0.1)
        took = time.monotonic() - started
        mbb = behind * a.value_size / 1e6
        print(
            f"follower {follower} restarted {mbb:.0f} MB behind: back in every ISR after {took:.1f} s "
            f"({mbb / took:.1f} MB/s; single-node append in the same run {mbb / t_single:.1f} MB/s; "
            f"ratio {t_single / took:.2f}x, target >= 0.5x; includes the broker's start-up)"
        )


if __name__ == "__main__":
    main()
