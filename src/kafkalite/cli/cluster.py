"""`kafkalite cluster up`: a real ZooKeeper (or an ensemble) and N brokers on loopback with their data under one directory;
prints the bootstrap servers and stops everything on Ctrl-C (SIGTERM: controlled shutdowns first).
"""

from __future__ import annotations

import argparse
import signal
import tempfile
import threading
from pathlib import Path
from typing import Any

from kafkalite.cli.wire import CliError


def _up(a: argparse.Namespace) -> int:
    from kafkalite.local_cluster import LocalCluster
    from kafkalite.zkserver import ZooKeeperMissing

    base = Path(a.dir) if a.dir else Path(tempfile.mkdtemp(prefix="kafkalite-cluster-"))
    config: dict[str, Any] = {}
    for item in a.override or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise CliError(f"--override {item!r} must look like key=value")
        config[key.strip()] = value.strip()
    if a.zookeepers < 1:
        raise CliError("--zookeepers must be at least 1")
    cluster = LocalCluster(base, a.brokers, config=config, zookeepers=a.zookeepers)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        cluster.start()
    except ZooKeeperMissing as exc:
        raise CliError(str(exc)) from None
    except (RuntimeError, TimeoutError) as exc:
        cluster.stop()
        raise CliError(str(exc)) from None
    print(f"ZooKeeper: {cluster.zookeeper_connect}", flush=True)
    for b in cluster.brokers.values():
        print(f"broker {b.broker_id}: {b.bootstrap} (data in {b.data_dir}, log {b.log_path})")
    print(f"bootstrap servers: {cluster.bootstrap_servers}", flush=True)
    print("Ctrl-C stops the cluster.", flush=True)
    reported: set[int] = set()
    try:
        while not stop.wait(0.5):
            for b in cluster.brokers.values():
                # a broker that dies is reported, not avenged: the cluster goes on without it
                if not b.running and b.broker_id not in reported:
                    reported.add(b.broker_id)
                    print(f"broker {b.broker_id} exited; see {b.log_path}", flush=True)
                elif b.running:
                    reported.discard(b.broker_id)
    finally:
        print("stopping: controlled shutdown of each broker, then ZooKeeper", flush=True)
        cluster.stop()
    return 0


def add_parser(sub: Any) -> None:
    c = sub.add_parser("cluster", help="run a local ZooKeeper-mode cluster")
    csub = c.add_subparsers(dest="cluster_command", required=True)
    up = csub.add_parser("up", help="start ZooKeeper and N brokers; Ctrl-C stops them")
    up.add_argument("--brokers", type=int, default=3, help="number of brokers (default 3)")
    up.add_argument(
        "--zookeepers",
        type=int,
        default=1,
        help="ZooKeeper servers: 1 standalone (default), 3 or more an ensemble with a quorum",
    )
    up.add_argument("--dir", help="base directory for data and logs (default: a new temp dir)")
    up.add_argument(
        "--override", action="append", metavar="KEY=VALUE", help="a broker property (repeatable)"
    )
    up.set_defaults(func=_up)
