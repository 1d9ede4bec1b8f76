"""The long partition run (issue 36): 3 brokers and 3 ZooKeeper servers each in a network namespace, RF=3,
min.insync.replicas=2, an idempotent acks=all producer on --partitions partitions, while the nemesis draws
faults at random (seeded) from every kind for --seconds: the partition kinds, loss, netem (recorded as not
made where the kernel lacks sch_netem), SIGKILL / SIGSTOP of leader, controller and ZooKeeper.

After each heal it waits until every partition took a write again (up to --recovery s); at the end it checks
that every partition probe bit, that every acknowledged record is read back exactly once at its offset, and
liveness (first ack after each heal within zookeeper.session.timeout.ms + replica.lag.time.max.ms + 5 s);
prints the fault log, the per-heal table and a summary, and exits 1 if any check failed. Needs root.

Usage: python bench/jepsen_partitions.py [--seconds 600] [--seed 36] [--kinds leader-zookeeper,...]
       [--schedule kind:hold,kind:hold,...]   (a fixed schedule instead of random faults)
       [--history nemesis.jsonl]   (the fault log in jepsen.history's format)
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from kafkalite.jepsen.acks import (
    AckedWriter,
    exactly_once,
    read_all,
    recovery_after_heals,
    recovery_table,
)
from kafkalite.jepsen.history import History
from kafkalite.jepsen.nemesis import ALL_KINDS, Nemesis
from kafkalite.jepsen.netcluster import NetnsCluster
from kafkalite.jepsen.netns import unavailable_reason

TOPIC = "jepsen"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--seed", type=int, default=36)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--kinds", default=",".join(ALL_KINDS))
    ap.add_argument("--schedule", default="", help="kind:hold,... run instead of random faults")
    ap.add_argument("--hold", default="3,10", help="min,max seconds a random fault holds")
    ap.add_argument("--zk-session-ms", type=int, default=3000)
    ap.add_argument("--lag-ms", type=int, default=3000)
    ap.add_argument("--recovery", type=float, default=60, help="max wait for writes after a heal")
    ap.add_argument("--dir", help="keep data and logs here (default: a temp dir, removed)")
    ap.add_argument("--history", help="save the nemesis' start/stop ops here (JSON lines)")
    a = ap.parse_args()
    reason = unavailable_reason()
    if reason:
        print(f"cannot run: {reason}", file=sys.stderr)
        return 2
    bound = (a.zk_session_ms + a.lag_ms) / 1000 + 5
    base = Path(a.dir) if a.dir else Path(tempfile.mkdtemp(prefix="jepsen-"))
    config = {
        "zookeeper.session.timeout.ms": a.zk_session_ms,
        "replica.lag.time.max.ms": a.lag_ms,
        "min.insync.replicas": 2,
    }
    cluster = NetnsCluster(base, 3, 3, config=config, log=print)
    began = time.monotonic()
    with cluster:
        print(f"cluster up in {time.monotonic() - began:.1f} s; data and logs in {base}")
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        admin.create_topics([NewTopic(TOPIC, a.partitions, 3)])[TOPIC].result(30)
        writer = AckedWriter(cluster.bootstrap_servers, TOPIC, a.partitions)
        writer.start()
        while not writer.acked_since(0):
            time.sleep(0.1)
        history = History()  # the nemesis' ops; the writer keeps its own acks (see jepsen.acks)
        nemesis = Nemesis(cluster, TOPIC, a.partitions, seed=a.seed, on_event=history.nemesis)
        if a.schedule:
            schedule = [(k, float(h)) for k, h in (x.split(":") for x in a.schedule.split(","))]
            nemesis.run_schedule(schedule, writer.acked_since, a.recovery)
        else:
            lo, hi = (float(x) for x in a.hold.split(","))
            kinds = a.kinds.split(",")
            deadline = time.monotonic() + a.seconds
            # every kind once in a random order, then again: more than the run can use
            for step in nemesis.random_schedule(int(a.seconds) + len(kinds), kinds, (lo, hi)):
                if time.monotonic() >= deadline:
                    break
                nemesis.run_schedule([step], writer.acked_since, a.recovery)
        end = time.monotonic()
        writer.stop.set()
        writer.join(150)
        got = read_all(cluster.bootstrap_servers, TOPIC, a.partitions)
    left = cluster.net.leftovers()
    if a.history:
        history.save(a.history)
    if not a.dir:
        shutil.rmtree(base, ignore_errors=True)

    failures = []
    counts: dict[str, int] = {}
    for f in nemesis.faults:
        counts[f.kind] = counts.get(f.kind, 0) + 1
        if not f.bit():
            failures.append(f"{f.kind} at {f.started:.1f} s did not bite: {f.probes}")
    lost, duplicated, misplaced = exactly_once(writer.acked, got)
    recoveries = recovery_after_heals(writer.ack_times, nemesis.faults, nemesis.t0, end)
    print(recovery_table(recoveries))
    for r in recoveries:
        for p, first in r.first_ack.items():
            if first is None or first > bound:
                failures.append(
                    f"partition {p} took no write within {bound:.0f} s of {r.kind}'s heal"
                )
    if lost or duplicated or misplaced:
        failures.append("acknowledged records not read back exactly once at their offsets")
    if left:
        failures.append(f"left behind: {left}")
    notes = {f.kind: f.note for f in nemesis.faults if f.note}
    worst = max((g for r in recoveries for g in r.longest_gap.values()), default=0.0)
    print(f"faults: {counts}")
    for kind, note in notes.items():
        print(f"  {kind}: {note}")
    print(
        f"acknowledged {len(writer.acked)}, lost {len(lost)}, duplicated {len(duplicated)}, "
        f"misplaced {len(misplaced)}; not acknowledged {writer.failed} {writer.errors}"
    )
    print(f"longest stretch without an ack after a heal: {worst:.1f} s (bound {bound:.0f} s)")
    print(f"run {time.monotonic() - began:.0f} s: " + ("FAILED" if failures else "ok"))
    for f in failures:
        print(f"  {f}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
