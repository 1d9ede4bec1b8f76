"""The queue and txn workloads under network partitions (issue 36): 3 brokers and 3 ZooKeeper servers each
in a network namespace, RF=3, min.insync.replicas=2, the nemesis drawing faults at random (seeded) from
--kinds for --seconds (or a fixed --schedule), recording into the workloads' histories. Prints each
workload's anomaly table with its operation counts and the liveness per partition after each heal, and
whether every partition bit; exits 1 on any anomaly or a partition that did not bite. Needs root.

Usage: python bench/jepsen_partition_workloads.py [--seconds 600] [--seed 36] [--kinds a,b,...]
       [--schedule kind:hold,...] [--hold 3,10] [--recovery 30] [--out DIR]
       [--config key=value,...]   (broker and topic config, e.g. the broken
        unclean.leader.election.enable=true,min.insync.replicas=1)
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from kafkalite.jepsen.nemesis import ALL_KINDS, PARTITION_KINDS, Nemesis
from kafkalite.jepsen.netcluster import NetnsCluster
from kafkalite.jepsen.netns import unavailable_reason
from kafkalite.jepsen.partition_run import PartitionFaults, Step
from kafkalite.jepsen.process_run import run
from kafkalite.jepsen.workloads import Counts


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--seed", type=int, default=36)
    ap.add_argument("--kinds", default=",".join(ALL_KINDS))
    ap.add_argument("--schedule", default="", help="kind:hold,... instead of random faults")
    ap.add_argument("--hold", default="3,10", help="min,max seconds a random fault holds")
    ap.add_argument("--zk-session-ms", type=int, default=3000)
    ap.add_argument("--lag-ms", type=int, default=3000)
    ap.add_argument("--recovery", type=float, default=30, help="max wait for sends after a heal")
    ap.add_argument("--config", default="", help="extra broker and topic config: k=v,...")
    ap.add_argument("--out", type=Path, help="keep data, logs and histories here")
    a = ap.parse_args()
    reason = unavailable_reason()
    if reason:
        print(f"cannot run: {reason}", file=sys.stderr)
        return 2
    extra = dict(kv.split("=", 1) for kv in a.config.split(",") if kv)
    config = {
        "zookeeper.session.timeout.ms": a.zk_session_ms,
        "replica.lag.time.max.ms": a.lag_ms,
        "min.insync.replicas": 2,
        "transaction.state.log.min.isr": 2,
        "replica.fetch.backoff.ms": 200,
        **extra,
    }
    counts = Counts()
    lo, hi = (float(x) for x in a.hold.split(","))
    kinds = a.kinds.split(",")

    fixed: list[Step] = [
        (k, float(h)) for k, h in (x.split(":") for x in a.schedule.split(",") if x)
    ]

    def schedule(nemesis: Nemesis) -> list[Step]:
        if fixed:
            return fixed
        # every kind once in a random order, then again: more than the run can use (it stops them)
        return list(nemesis.random_schedule(int(a.seconds) + len(kinds), kinds, (lo, hi)))

    with tempfile.TemporaryDirectory(prefix="jepsen-pw-") as tmp:
        base = a.out or Path(tmp)
        cluster = NetnsCluster(base / "cluster", 3, 3, config=config, log=print)
        faults = PartitionFaults(
            cluster, schedule, partitions=counts.partitions, seed=a.seed, recovery=a.recovery
        )
        with cluster:
            out = run(
                cluster,
                0 if fixed else a.seconds,
                counts=counts,
                nemesis=faults,
                min_faults=len(fixed),  # a fixed schedule runs to its end
                recovery=10.0,
                out_dir=base / "histories",
                topic_config={k: v for k, v in extra.items() if "." in k},
            )
        left = cluster.net.leftovers()
    assert faults.nemesis is not None
    bites = [
        (f.kind, f.bit()) for f in faults.nemesis.faults if f.kind in PARTITION_KINDS and f.probes
    ]
    print(
        f"faults: {len(out.faults)}; partitions that bit: {sum(b for _, b in bites)}/{len(bites)}"
    )
    for kind, bit in bites:
        if not bit:
            print(f"  {kind} did not bite")
    print(f"final reads complete: {out.final_complete}; left behind: {left or 'nothing'}")
    ok = out.valid and all(b for _, b in bites) and not left
    print("VALID" if ok else "ANOMALIES FOUND (or a partition did not bite)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
