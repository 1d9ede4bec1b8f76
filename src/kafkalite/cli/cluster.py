"""`kafkalite cluster up`: a real ZooKeeper (or an ensemble) and N brokers on loopback with their data under one directory,
on fixed ports when free (ZooKeeper 2181, broker i on 9092 + i); prints the bootstrap servers and stops
everything on Ctrl-C (SIGTERM: controlled shutdowns first).
"""

from __future__ import annotations

import argparse
import signal
import socket
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kafkalite.cli.wire import CliError

FIRST_BROKER_PORT = 9093  # broker i listens on 9092 + i: beside a single node on 9092, not on it
ZOOKEEPER_PORT = 2181


def port_is_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def choose_ports(
    first: int, count: int, is_free: Callable[[int], bool], free_port: Callable[[], int]
) -> tuple[list[int], str | None]:
    """Ports first..first+count-1 when every one is free, else free ports for all (so the range is
    never half-used), with a line saying why. `first` 0 asks for free ports."""
    if first == 0:
        return [free_port() for _ in range(count)], None
    wanted = list(range(first, first + count))
    busy = [p for p in wanted if not is_free(p)]
    if not busy:
        return wanted, None
    ports = [free_port() for _ in range(count)]
    note = (
        f"port(s) {', '.join(map(str, busy))} in use: the brokers listen on free ports "
        f"{', '.join(map(str, ports))} instead of {first}-{first + count - 1}"
    )
    return ports, note


def _up(a: argparse.Namespace) -> int:
    from kafkalite.local_cluster import LocalCluster, free_port
    from kafkalite.zkserver import ZooKeeperMissing

    base = Path(a.dir) if a.dir else Path(tempfile.mkdtemp(prefix="kafkalite-cluster-"))
    config: dict[str, Any] = {}
    for item in a.override or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise CliError(f"--override {item!r} must look like key=value")
        config[key.strip()] = value.strip()
    if a.brokers < 1:
        raise CliError(f"--brokers {a.brokers}: a cluster needs at least one broker")
    ports, note = choose_ports(a.first_port, a.brokers, port_is_free, free_port)
    if note:
        print(note, flush=True)
    if a.zookeepers < 1:
        raise CliError("--zookeepers must be at least 1")
    zk_port = a.zookeeper_port
    if zk_port and not port_is_free(zk_port):
        print(f"port {zk_port} in use: ZooKeeper listens on a free port instead", flush=True)
        zk_port = 0
    cluster = LocalCluster(
        base,
        a.brokers,
        config=config,
        ports=ports,
        zookeeper_port=zk_port,
        zookeepers=a.zookeepers,
    )
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
        "--first-port",
        type=int,
        default=FIRST_BROKER_PORT,
        help=f"broker i listens on FIRST_PORT + i - 1 (default {FIRST_BROKER_PORT}: 9093, 9094, "
        "9095 for three); when one is in use, all take free ports, said at start; 0: free ports",
    )
    up.add_argument(
        "--zookeeper-port",
        type=int,
        default=ZOOKEEPER_PORT,
        help=f"ZooKeeper's client port (default {ZOOKEEPER_PORT}, a free one when in use; 0: free)",
    )
    up.add_argument(
        "--override", action="append", metavar="KEY=VALUE", help="a broker property (repeatable)"
    )
    up.set_defaults(func=_up)
