"""Group settle-time benchmark: how long a 10-member group takes to settle after an 11th member joins,
classic protocol with cooperative-sticky assignment against KIP-848 (`group.protocol=consumer`), both
with confluent-kafka against the same kafkalite broker in the same run.

Each round: a fresh group of 10 consumers (threads, one librdkafka handle each) on a 24-partition
topic is left to settle; then an 11th joins and the clock runs until every partition is held by
exactly one member, the newcomer holds at least one, and nothing changed for 0.5 s (the quiet time is
subtracted). Also reported: how many members gave partitions up on the way. Medians over --rounds.

Usage: python bench/bench_group_settle.py [--rounds R] [--partitions P] [--members M]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, libversion
from confluent_kafka.admin import AdminClient, NewTopic

from peers import free_port, stop, wait_port

ROOT = Path(__file__).resolve().parents[1]
QUIET_S = 0.5


class Member:
    def __init__(self, bootstrap: str, group: str, topic: str, protocol: str) -> None:
        self.owned: set[int] = set()
        self.revocations = 0
        self.last_change = time.monotonic()
        self.lock = threading.Lock()
        self.running = True
        conf: dict[str, object] = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": protocol,
        }
        if protocol == "classic":  # KIP-848 members take these from the broker
            conf["partition.assignment.strategy"] = "cooperative-sticky"
            conf["heartbeat.interval.ms"] = 500
        self.consumer = Consumer(conf)
        self.consumer.subscribe([topic], on_assign=self._assign, on_revoke=self._revoke)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _assign(self, _c: object, parts: list[object]) -> None:
        with self.lock:
            self.owned |= {p.partition for p in parts}  # type: ignore[attr-defined]
            self.last_change = time.monotonic()

    def _revoke(self, _c: object, parts: list[object]) -> None:
        with self.lock:
            gone = {p.partition for p in parts}  # type: ignore[attr-defined]
            if gone & self.owned:
                self.revocations += 1
            self.owned -= gone
            self.last_change = time.monotonic()

    def _run(self) -> None:
        while self.running:
            self.consumer.poll(0.05)
        self.consumer.close()

    def stop(self) -> None:
        self.running = False
        self.thread.join(30)


def settled(members: list[Member], partitions: int) -> bool:
    owners: dict[int, int] = {}
    for i, m in enumerate(members):
        with m.lock:
            for p in m.owned:
                if p in owners:
                    return False
                owners[p] = i
    if len(owners) != partitions or not members[-1].owned:
        return False
    return time.monotonic() - max(m.last_change for m in members) >= QUIET_S


def one_round(
    bootstrap: str, topic: str, protocol: str, n: int, partitions: int
) -> tuple[float, int]:
    group = f"settle-{protocol}-{uuid.uuid4().hex[:6]}"
    members = [Member(bootstrap, group, topic, protocol) for _ in range(n)]
    try:
        deadline = time.monotonic() + 120
        while not settled(members, partitions):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{protocol}: {n} members did not settle")
            time.sleep(0.02)
        revoked_before = sum(m.revocations for m in members)
        start = time.monotonic()
        members.append(Member(bootstrap, group, topic, protocol))
        while not settled(members, partitions):
            if time.monotonic() > deadline + 120:
                raise RuntimeError(f"{protocol}: the newcomer did not settle")
            time.sleep(0.02)
        took = time.monotonic() - start - QUIET_S
        return took, sum(m.revocations for m in members) - revoked_before
    finally:
        for m in members:
            m.running = False
        for m in members:
            m.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--partitions", type=int, default=24)
    ap.add_argument("--members", type=int, default=10)
    args = ap.parse_args()
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="bench-settle-") as d:
        env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
        proc = subprocess.Popen(
            [
                sys.executable, "-m", "kafkalite.cli.main", "serve", "--data-dir", d,
                "--listen", f"127.0.0.1:{port}", "--log-level", "warning",
                "--override", "group.initial.rebalance.delay.ms=0",
                "--override", "group.consumer.heartbeat.interval.ms=500",
                "--override", "group.consumer.min.heartbeat.interval.ms=500",
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            wait_port(port, proc)
            bootstrap = f"127.0.0.1:{port}"
            topic = f"settle-{uuid.uuid4().hex[:6]}"
            admin = AdminClient({"bootstrap.servers": bootstrap})
            admin.create_topics([NewTopic(topic, args.partitions, 1)])[topic].result(30)
            results: dict[str, list[tuple[float, int]]] = {"classic": [], "consumer": []}
            for r in range(args.rounds):
                for protocol in ("classic", "consumer") if r % 2 == 0 else ("consumer", "classic"):
                    took, revoked = one_round(
                        bootstrap, topic, protocol, args.members, args.partitions
                    )
                    results[protocol].append((took, revoked))
                    print(
                        f"round {r + 1} {protocol:8s} settled in {took:6.2f} s, "
                        f"{revoked} member(s) gave partitions up",
                        flush=True,
                    )
        finally:
            stop(proc)
    med = {p: statistics.median(t for t, _ in v) for p, v in results.items()}
    print(
        f"\n{args.members} members + 1 joining, {args.partitions} partitions, medians of "
        f"{args.rounds} (one kafkalite broker, librdkafka {libversion()[0]})"
    )
    print(f"classic cooperative-sticky  {med['classic']:6.2f} s")
    print(f"KIP-848 (consumer, uniform) {med['consumer']:6.2f} s")
    print(f"KIP-848 / classic           {med['consumer'] / med['classic']:6.2f}x")


if __name__ == "__main__":
    main()
