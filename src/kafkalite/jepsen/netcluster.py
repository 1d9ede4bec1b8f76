"""NetnsCluster: a ZooKeeper ensemble and kafkalite brokers, each in a network namespace of its own
(jepsen.netns), clients in the root namespace; who leads what and who controls, read from ZooKeeper.

Node names: `zk1..zkN` and `b1..bN` (broker id i); ZooKeeper on 2181/2888/3888, brokers on 9092.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from kazoo.retry import KazooRetry

from kafkalite.jepsen.netns import Network
from kafkalite.local_cluster import BrokerProcess, LocalCluster
from kafkalite.zkserver import ZooKeeperEnsemble, ZooKeeperServer

BROKER_PORT = 9092
ZK_PORT = 2181
CHROOT = "/kafkalite"
_QUIET_KAZOO = logging.getLogger("kafkalite.jepsen.kazoo")
_QUIET_KAZOO.setLevel(logging.ERROR)


class NetnsCluster:
    """`brokers` brokers and `zookeepers` ZooKeeper servers on one Network; a context manager that
    removes everything (processes first, then the network) however it ends."""

    def __init__(
        self,
        base_dir: str | Path,
        brokers: int = 3,
        zookeepers: int = 3,
        *,
        config: Mapping[str, Any] | None = None,
        log: Callable[[str], Any] = lambda _: None,
    ) -> None:
        self.log = log
        self.base_dir = Path(base_dir)
        self.broker_ids = list(range(1, brokers + 1))
        self.zk_ids = list(range(1, zookeepers + 1))
        self.net = Network([f"zk{i}" for i in self.zk_ids] + [f"b{i}" for i in self.broker_ids])
        self.config = dict(config or {})
        self.zookeeper: ZooKeeperEnsemble | ZooKeeperServer | None = None
        self.brokers: dict[int, BrokerProcess] = {}
        self._zk_client: KazooClient | None = None

    # -- life cycle ---------------------------------------------------------------------------

    def start(self) -> NetnsCluster:
        self.net.create()
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self) -> None:
        net = self.net
        if len(self.zk_ids) > 1:
            self.zookeeper = ZooKeeperEnsemble(
                self.base_dir,
                len(self.zk_ids),
                hosts=[net.addresses[f"zk{i}"] for i in self.zk_ids],
                prefixes=[net.exec_prefix(f"zk{i}") for i in self.zk_ids],
            )
        else:
            self.zookeeper = ZooKeeperServer(
                self.base_dir / "zookeeper-1",
                ZK_PORT,
                host=net.addresses["zk1"],
                prefix=net.exec_prefix("zk1"),
            )
        began = time.monotonic()
        self.zookeeper.start()
        self.log(f"ZooKeeper up in {time.monotonic() - began:.1f} s")
        # LocalCluster's defaults (internal topics' RF, fast shutdowns) under the given config
        shape = LocalCluster(self.base_dir, len(self.broker_ids), config=self.config)
        shape.chroot = CHROOT
        shape.zookeeper = self.zookeeper
        props = shape.broker_props()
        shape.brokers = {}
        for i in self.broker_ids:
            b = BrokerProcess(
                i,
                self.base_dir / f"broker-{i}" / "data",
                BROKER_PORT,
                props,
                host=net.addresses[f"b{i}"],
                prefix=net.exec_prefix(f"b{i}"),
            )
            self.brokers[i] = b
            shape.brokers[i] = b
        errors: list[BaseException] = []

        def start(b: BrokerProcess) -> None:
            try:
                b.start()
            except BaseException as exc:  # raised below
                errors.append(exc)

        threads = [threading.Thread(target=start, args=(b,)) for b in self.brokers.values()]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        self.log(f"brokers up in {time.monotonic() - began:.1f} s")
        shape.wait_for_controller()

    def stop(self) -> None:
        if self._zk_client is not None:
            self._zk_client.stop()
            self._zk_client.close()
            self._zk_client = None
        self.net.heal()
        for b in self.brokers.values():
            b.kill()  # a controlled shutdown under faults only waits out timeouts
        if self.zookeeper is not None:
            if isinstance(self.zookeeper, ZooKeeperEnsemble):
                for s in self.zookeeper.servers.values():
                    s.kill()
            else:
                self.zookeeper.kill()
        self.net.close()

    def __enter__(self) -> NetnsCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- what clients and the nemesis need ----------------------------------------------------

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values())

    @property
    def zk_servers(self) -> dict[int, ZooKeeperServer]:
        if isinstance(self.zookeeper, ZooKeeperEnsemble):
            return dict(self.zookeeper.servers)
        return {1: self.zookeeper} if self.zookeeper is not None else {}

    def port_of(self, node: str) -> int:
        return ZK_PORT if node.startswith("zk") else BROKER_PORT

    def _zk(self) -> KazooClient:
        if self._zk_client is None:
            assert self.zookeeper is not None
            zk = KazooClient(
                hosts=self.zookeeper.connect_string + CHROOT,
                timeout=10,
                connection_retry=None,
                logger=_QUIET_KAZOO,  # its connection drops are the nemesis at work
            )
            zk.start(timeout=15)
            self._zk_client = zk
        return self._zk_client

    def _znode(self, path: str) -> Any:
        try:
            zk = self._zk()  # retried: a flapping bridge cuts this client off for a while
            return json.loads(KazooRetry(max_tries=-1, deadline=60)(zk.get, path)[0])
        except NoNodeError:
            return None

    def controller(self) -> int | None:
        """The controller's broker id as ZooKeeper names it (None: no controller)."""
        data = self._znode("/controller")
        return None if data is None else int(data["brokerid"])

    def partition_state(self, topic: str, partition: int) -> dict[str, Any] | None:
        """{"leader", "leader_epoch", "isr", ...} of a partition as ZooKeeper holds it."""
        state = self._znode(f"/brokers/topics/{topic}/partitions/{partition}/state")
        return state if isinstance(state, dict) else None

    def leader(self, topic: str, partition: int) -> int | None:
        state = self.partition_state(topic, partition)
        return None if state is None or state["leader"] < 0 else int(state["leader"])
