"""Replication benchmark on a 3-broker kafkalite cluster (real ZooKeeper, broker processes):

- produce throughput RF=3 acks=all against RF=1 acks=1 in the same run (target >= 0.5x), and the
  brokers' CPU seconds per replicated GB;
- failover: SIGKILL of a leader (and SIGTERM, a controlled shutdown) to the first successful
  acks=all produce on the new leader (targets: <= session timeout + 1 s; <= 1 s);
- catch-up of a follower restarted N MiB behind, against the single-node append rate measured in
  the same run (target >= 50%), and the follower's CPU seconds per replicated GB while it catches up.

Usage: python bench/bench_cluster.py [--mb-produce 128] [--mb-behind 1024] [--value-size 1024]
       [--baseline REF]
--baseline REF runs the same benchmark again, in the same invocation, on this repository at git REF
(the last release), and prints its figures after this checkout's.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kafkalite.local_cluster import LocalCluster
from peers import baseline_checkout, process_cpu_seconds

QUIET = {"log_level": 0}
SESSION_MS = 6000


def produce(
    bs: str, topic: str, n: int, value: bytes, acks: str, idempotent: bool = False
) -> float:
    """Seconds to send `n` records once the producer is up: each producer first sends one record
    and waits for it, so the time excludes its start-up (an idempotent librdkafka producer waits
    about half a second before it asks for its producer id)."""
    p = Producer(
        {
            "bootstrap.servers": bs,
            "acks": acks,
            "linger.ms": 10,
            "batch.size": 256 * 1024,
            "compression.type": "none",
            "enable.idempotence": idempotent,
            "max.in.flight.requests.per.connection": 5,
            **QUIET,
        }
    )
    errors = []
    for part in range(3):
        p.produce(topic, value, partition=part, on_delivery=lambda e, m: e and errors.append(e))
    p.flush(60)
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
    # retries every 100 ms at most: librdkafka's default backoff grows to 1 s while the leader is
    # gone, which would measure the client's patience rather than the cluster's failover
    p = Producer(
        {
            "bootstrap.servers": bs,
            "acks": "all",
            "message.timeout.ms": 60000,
            "retry.backoff.ms": 50,
            "retry.backoff.max.ms": 100,
            **QUIET,
        }
    )
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


def wait_full_isr(admin: AdminClient, topic: str, timeout: float = 120.0) -> None:
    """Until every replica of every partition is back in its ISR (a restarted broker caught up)."""
    deadline = time.monotonic() + timeout
    while True:
        md = admin.list_topics(topic, timeout=10).topics[topic]
        if all(sorted(p.isrs) == sorted(p.replicas) for p in md.partitions.values()):
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"{topic}: replicas did not rejoin their ISRs in {timeout:.0f} s")
        time.sleep(0.2)


def leader_of(admin: AdminClient, topic: str, partition: int) -> int:
    return int(admin.list_topics(topic, timeout=10).topics[topic].partitions[partition].leader)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb-produce", type=int, default=128)
    ap.add_argument("--mb-behind", type=int, default=1024)
    ap.add_argument("--value-size", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--baseline", metavar="REF", help="also run at git REF, in this invocation")
    a = ap.parse_args()
    src = Path(sys.modules[LocalCluster.__module__].__file__ or "").resolve().parents[1]
    print(f"== kafkalite from {src}", flush=True)
    run(a)
    if a.baseline:
        argv = [x for x in sys.argv[1:] if x != "--baseline" and x != a.baseline]
        argv = [x for x in argv if not x.startswith("--baseline=")]
        with baseline_checkout(a.baseline) as src:
            print(f"== the baseline, {a.baseline}", flush=True)
            env = dict(os.environ, PYTHONPATH=str(src))
            subprocess.run([sys.executable, __file__, *argv], env=env, check=True)


def run(a: argparse.Namespace) -> None:
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
        # the machine is shared and noisy: alternate the three runs `rounds` times, report medians
        runs: dict[str, list[tuple[float, float]]] = {"rf1": [], "rf3": [], "rf3i": []}
        for _ in range(a.rounds):
            for name, topic, acks, idem in (
                ("rf1", "rf1", "1", False),
                ("rf3", "rf3", "all", False),
                ("rf3i", "rf3", "all", True),
            ):
                c0 = broker_cpu(cluster)
                took = produce(bs, topic, n, value, acks, idempotent=idem)
                runs[name].append((took, broker_cpu(cluster) - c0))
        (t1, cpu1), (t3, cpu3), (t3i, cpu3i) = (
            (statistics.median(t for t, _ in runs[k]), statistics.median(c for _, c in runs[k]))
            for k in ("rf1", "rf3", "rf3i")
        )
        print(
            f"produce {n} x {a.value_size} B ({mb:.0f} MB), 3 partitions, confluent-kafka client, "
            f"median of {a.rounds} alternating rounds"
        )
        print(
            f"  RF=1 acks=1               : {mb / t1:7.1f} MB/s, brokers' CPU "
            f"{cpu1 / (mb / 1000):5.1f} s per GB"
        )
        print(
            f"  RF=3 acks=all             : {mb / t3:7.1f} MB/s, brokers' CPU "
            f"{cpu3 / (3 * mb / 1000):5.1f} s per replicated GB   ratio {t1 / t3:.2f}x "
            "(target >= 0.5x)"
        )
        print(
            f"  RF=3 acks=all, idempotent : {mb / t3i:7.1f} MB/s, brokers' CPU "
            f"{cpu3i / (3 * mb / 1000):5.1f} s per replicated GB   ratio {t1 / t3i:.2f}x "
            "(librdkafka keeps one request in flight per partition when idempotent, so this is "
            "replication latency bound)"
        )

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
        wait_full_isr(admin, "rf3")
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
        wait_full_isr(admin, "rf3")

        # catch-up of a follower that was away while N MiB arrived, against the single-node append
        # rate of the same volume (RF=1, acks=1) measured first, in the same run
        behind = a.mb_behind * 1024 * 1024 // a.value_size
        t_single = produce(bs, "rf1", behind, value, "1")
        lag_leader = leader_of(admin, "rf3", 2)
        follower = next(b for b in cluster.brokers if b != lag_leader)
        cluster.brokers[follower].kill()
        time.sleep(SESSION_MS / 1000 + 1)
        produce(bs, "rf3", behind, value, "1")
        started = time.monotonic()
        cluster.brokers[follower].start()
        back = cluster.brokers[follower].proc
        assert back is not None
        cpu_started = process_cpu_seconds(back.pid)  # the follower is up: its catch-up begins
        wait_full_isr(admin, "rf3", timeout=600)
        took = time.monotonic() - started
        mbb = behind * a.value_size / 1e6
        follower_cpu = process_cpu_seconds(back.pid) - cpu_started
        print(
            f"follower {follower} restarted {mbb:.0f} MB behind: back in every ISR after {took:.1f} s "
            f"({mbb / took:.1f} MB/s; single-node append of the same volume in this run "
            f"{mbb / t_single:.1f} MB/s; ratio {t_single / took:.2f}x, target >= 0.5x; includes "
            "the broker's start-up)"
        )
        print(
            f"  the follower's CPU while catching up: {follower_cpu:.1f} s, "
            f"{follower_cpu / (mbb / 1000):.2f} s per replicated GB (from its start-up to the ISR)"
        )


if __name__ == "__main__":
    main()
