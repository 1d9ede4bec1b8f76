"""Network partitions, Jepsen-style: 3 brokers and 3 ZooKeeper servers each in a network namespace of its
own, RF=3, min.insync.replicas=2, the queue workload on six partitions while a nemesis runs
every partition kind once by a fixed schedule (a leader cut from its followers, a zombie leader cut from
ZooKeeper, a majority/minority split of brokers and ZooKeeper together, a flapping bridge), then kills every
broker but the former zombie at once. That first and last step replay the stall of issue 36 (before the
fix in zk_broker's AlterPartition sender no partition took a write again after the last heal).

It checks that each partition bit (probes across the cut fail during it, succeed after the heal), that the
checker finds no anomaly in the queue workload's history, and liveness: after each heal every queue partition
takes acks=all writes again within zookeeper.session.timeout.ms + replica.lag.time.max.ms + 5 s (the
checker's longest stretch without an ok send, from the heal to the next fault or the workload's end).
Skips (saying why) without root, `ip` or `nft`. Longer runs: bench/jepsen_partitions.py (acked writer),
bench/jepsen_partition_workloads.py (queue and txn workloads with the checker).
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from kafkalite.jepsen.checker import liveness
from kafkalite.jepsen.netns import unavailable_reason

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

TOPIC = "jepsen"
PARTITIONS = 6
ZK_SESSION_MS = 3000
LAG_MS = 3000
BOUND_S = (ZK_SESSION_MS + LAG_MS) / 1000 + 5


def schedule(zombie: str) -> list[tuple[str, float, str | None]]:
    """The fixed schedule. Its first and last faults replay the stall of issue 36: `zombie`, a leader
    (not the controller), cut from ZooKeeper long enough to be declared dead and then to shrink its
    ISR (AlterPartition answered STALE_BROKER_EPOCH, so it asks ZooKeeper for the controller, which it
    cannot reach); at the end every other broker is killed at once, leaving it the only ISR member
    of every partition, and restarted: the zombie must grow the ISR again for acks=all to pass."""
    return [
        ("leader-zookeeper", 12.0, zombie),
        ("leader-followers", 4.0, None),
        ("majority-minority", 5.0, None),
        ("bridge-flap", 5.0, None),  # down/up cycles begun once the probes ran
        ("kill-others", 1.0, zombie),
    ]


def _skip_reason() -> str | None:
    reason = unavailable_reason()
    if reason is None and subprocess.run(["ip", "netns", "list"], capture_output=True).returncode:
        reason = "`ip netns` does not work here"
    return reason


@pytest.mark.skipif(_skip_reason() is not None, reason=str(_skip_reason()))
def test_partitions_lose_nothing_and_heal(tmp_path: Path) -> None:
    from kafkalite.jepsen.nemesis import PARTITION_KINDS, Nemesis
    from kafkalite.jepsen.netcluster import NetnsCluster
    from kafkalite.jepsen.partition_run import PartitionFaults, Step
    from kafkalite.jepsen.process_run import run
    from kafkalite.jepsen.workloads import Counts

    config = {
        "zookeeper.session.timeout.ms": ZK_SESSION_MS,
        "replica.lag.time.max.ms": LAG_MS,
        "min.insync.replicas": 2,
        "transaction.state.log.min.isr": 2,
        "replica.fetch.backoff.ms": 200,
    }
    counts = Counts(partitions=PARTITIONS)
    cluster = NetnsCluster(tmp_path, brokers=3, zookeepers=3, config=config, log=print)

    def fixed(nemesis: Nemesis) -> list[Step]:
        controller = cluster.controller()
        leaders = {cluster.leader(nemesis.topic, p) for p in range(PARTITIONS)}
        zombie = f"b{min(b for b in leaders if b is not None and b != controller)}"
        return list(schedule(zombie))

    faults = PartitionFaults(cluster, fixed, partitions=PARTITIONS, recovery=BOUND_S + 5)
    began = time.monotonic()
    with cluster:
        print(f"\n  cluster up in {time.monotonic() - began:.1f} s: {cluster.bootstrap_servers}")
        out = run(
            cluster,
            0,
            counts=counts,
            nemesis=faults,
            min_faults=len(schedule("")),
            recovery=3.0,
            # the txn workload is bench/jepsen_partition_workloads.py's: after kill-others, librdkafka's
            # send_offsets_to_transaction outlives its timeout (librdkafka #5456), ~40 s of the run
            with_txn=False,
            out_dir=tmp_path / "histories",
        )
    assert cluster.net.leftovers() == [], "namespaces or links left behind"
    assert (
        cluster.net.prefix
        not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    )

    # the nemesis bit: every probe across a cut failed while it held and connected after the heal
    assert faults.nemesis is not None
    kinds = {f.kind for f in faults.nemesis.faults}
    assert kinds == set(PARTITION_KINDS) - {"controller-isolated"} | {"kill-others"}
    for f in faults.nemesis.faults:
        if f.kind == "kill-others":
            continue
        print(f"  {f.kind}: {len(f.probes)} probes, bit: {f.bit()}")
        assert f.probes and f.bit(), [p for p in f.probes if p.during or not p.after]

    print(f"  liveness bound {BOUND_S:.0f} s; run {time.monotonic() - began:.0f} s")
    queue = out.reports["queue"]
    assert queue.op_counts[("send", "ok")] > 200
    assert out.final_complete == {"queue": True}
    for name, report in out.reports.items():
        assert report.valid, f"{name}:\n{out.tables[name]}"
    # liveness: after each heal every partition of the queue took an ok send within the bound
    for healed, per_key in liveness(out.histories["queue"].ops()):
        for key, gap in per_key.items():
            assert gap <= BOUND_S, f"{key} after the heal at {healed:.1f} s: {gap:.1f} s"
