"""The long run of the queue and txn workloads (issue 36): three brokers on loopback, RF=3,
min.insync.replicas=2, a nemesis that SIGKILLs and SIGSTOPs partition leaders over and over; prints each
workload's anomaly table, operation counts and liveness after every heal; exits 1 on any anomaly.

Usage: python bench/jepsen_workloads.py [--seconds 600] [--quiet 5] [--length 5] [--recovery 10]
       [--out DIR] [--seed N]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from kafkalite.jepsen.process_run import run
from kafkalite.jepsen.workloads import Counts
from kafkalite.local_cluster import LocalCluster
from kafkalite.zkserver import ZooKeeperServer


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--quiet", type=float, default=5.0, help="seconds between faults")
    ap.add_argument("--length", type=float, default=5.0, help="seconds each fault lasts")
    ap.add_argument("--recovery", type=float, default=10.0, help="seconds of no fault at the end")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, help="keep the histories (JSON lines) and broker logs here")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="jepsen-workloads-") as tmp:
        base = args.out or Path(tmp)
        zk = ZooKeeperServer(base / "zookeeper")
        zk.start()
        try:
            cluster = LocalCluster(
                base / "cluster",
                3,
                zookeeper=zk,
                config={
                    "replica.lag.time.max.ms": 2000,
                    "zookeeper.session.timeout.ms": 6000,
                    "min.insync.replicas": 2,
                    "transaction.state.log.min.isr": 2,
                    "replica.fetch.backoff.ms": 200,
                },
            )
            with cluster:
                out = run(
                    cluster,
                    args.seconds,
                    counts=Counts(),
                    quiet=args.quiet,
                    length=args.length,
                    recovery=args.recovery,
                    seed=args.seed,
                    out_dir=base / "histories",
                )
        finally:
            zk.stop()
    print(f"faults: {len(out.faults)}; final reads complete: {out.final_complete}")
    print("VALID" if out.valid else "ANOMALIES FOUND")
    return 0 if out.valid else 1


if __name__ == "__main__":
    sys.exit(main())
