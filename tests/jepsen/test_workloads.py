"""The queue and txn workloads against three brokers on loopback (RF=3, min.insync.replicas=2) while a
nemesis SIGKILLs and SIGSTOPs partition leaders; the checker must show 0 in every anomaly row.

The long run is bench/jepsen_workloads.py.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkalite.jepsen.process_run import run
from kafkalite.jepsen.workloads import Counts
from kafkalite.local_cluster import LocalCluster
from kafkalite.zkserver import ZooKeeperMissing, ZooKeeperServer

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

SECONDS = 12


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    zk = ZooKeeperServer(tmp_path / "zookeeper")
    try:
        zk.start()
    except ZooKeeperMissing as exc:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(str(exc))
    c = LocalCluster(
        tmp_path / "cluster",
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
    try:
        with c:
            yield c
            for b in c.brokers.values():  # nothing to keep: SIGKILL, not a controlled shutdown
                b.kill()
    finally:
        zk.stop()


def test_queue_and_txn_workloads_show_no_anomaly_under_kills_and_pauses(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    out = run(
        cluster,
        SECONDS,
        counts=Counts(),
        quiet=2.0,
        length=2.5,
        recovery=3.0,
        out_dir=tmp_path / "histories",
    )
    kinds = {f.split()[0] for f in out.faults}
    assert kinds == {"kill", "pause"}, out.faults
    for name, report in out.reports.items():
        assert report.op_counts[("send" if name == "queue" else "txn", "ok")] > 0, name
        assert report.valid, f"{name}:\n{out.tables[name]}"
    assert out.final_complete == {"queue": True, "txn": True}
