"""LocalCluster: a real ZooKeeper and N kafkalite broker processes on loopback under one directory, for
`kafkalite cluster up`, the `kafkalite_cluster` pytest fixture, fault tests and benchmarks.

Brokers are separate processes so a test can SIGKILL, SIGSTOP and restart them like machines.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from kafkalite.zkserver import ZooKeeperEnsemble, ZooKeeperServer

_READY = re.compile(r"kafkalite broker (\d+) ready on ([^:\s]+):(\d+)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class BrokerProcess:
    """One broker process: started with `kafkalite serve`, its output kept in `<dir>/broker.log`."""

    def __init__(
        self,
        broker_id: int,
        data_dir: Path,
        port: int,
        props: Mapping[str, str],
        ssl_port: int | None = None,
        *,
        host: str = "127.0.0.1",
        prefix: Sequence[str] = (),
    ) -> None:
        """`host`: the address its listeners bind and advertise; `prefix`: an argv prefix for its
        command (e.g. `ip netns exec NS`, which execs: the pid stays the broker's own)."""
        self.broker_id = broker_id
        self.host = host
        self.prefix = list(prefix)
        self.data_dir = data_dir
        self.port = port
        # set: a second listener, SSL, on this port (its ssl.* settings come with the props)
        self.ssl_port = ssl_port
        self.props = dict(props)
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = data_dir.parent / f"broker-{broker_id}.log"
        self._log: IO[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def ssl_bootstrap(self) -> str:
        return f"{self.host}:{self.ssl_port}"

    @property
    def listeners(self) -> str:
        plain = f"PLAINTEXT://{self.host}:{self.port}"
        return plain if self.ssl_port is None else f"{plain},SSL://{self.host}:{self.ssl_port}"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, timeout: float = 60.0) -> None:
        if self.running:
            return
        self.data_dir.mkdir(parents=True, exist_ok=True)
        args = [
            *self.prefix,
            sys.executable,
            "-m",
            "kafkalite.cli.main",
            "serve",
            "--override",
            f"broker.id={self.broker_id}",
            "--override",
            f"listeners={self.listeners}",
        ]
        if "log.dirs" not in self.props:  # a broker given its own log.dirs (JBOD) keeps them
            args += ["--data-dir", str(self.data_dir)]
        for k, v in self.props.items():
            args += ["--override", f"{k}={v}"]
        self._log = open(self.log_path, "ab")  # noqa: SIM115 (closed in wait/kill)
        self.proc = subprocess.Popen(
            args,
            stdout=subprocess.PIPE,
            stderr=self._log,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        ready = threading.Event()
        out = self.proc.stdout
        assert out is not None
        log = self._log

        def pump() -> None:
            for line in iter(out.readline, b""):
                log.write(line)
                log.flush()
                if _READY.search(line.decode(errors="replace")):
                    ready.set()

        threading.Thread(target=pump, name=f"broker-{self.broker_id}-out", daemon=True).start()
        deadline = time.monotonic() + timeout
        while not ready.wait(0.1):
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"broker {self.broker_id} exited with {self.proc.returncode} during startup; "
                    f"see {self.log_path}"
                )
            if time.monotonic() > deadline:
                self.kill()
                raise TimeoutError(f"broker {self.broker_id} did not start; see {self.log_path}")

    def stop(self, timeout: float = 60.0) -> None:
        """SIGTERM (a controlled shutdown), then SIGKILL if it does not exit in time."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.resume()
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._close()

    def kill(self) -> None:
        """SIGKILL: a crash, noticed by the cluster through the ZooKeeper session."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._close()

    def pause(self) -> None:
        if self.running and self.proc is not None:
            self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self.running and self.proc is not None:
            self.proc.send_signal(signal.SIGCONT)

    def _close(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None


class LocalCluster:
    """ZooKeeper plus `brokers` kafkalite brokers (ids 1..N) under `base_dir`."""

    def __init__(
        self,
        base_dir: str | Path,
        brokers: int = 3,
        *,
        config: Mapping[str, Any] | None = None,
        zookeeper: ZooKeeperServer | ZooKeeperEnsemble | None = None,
        chroot: str = "/kafkalite",
        ssl_listener: bool = False,
        broker_config: Mapping[int, Mapping[str, Any]] | None = None,
        ports: list[int] | None = None,
        zookeeper_port: int = 0,
        zookeepers: int = 1,
    ) -> None:
        """`ssl_listener`: every broker also listens with SSL on a port of its own (pass the ssl.*
        settings, and inter.broker.listener.name=SSL for TLS between brokers, in `config`).
        `broker_config`: settings of one broker (by id) over `config`, e.g. its broker.rack.
        `ports`: broker i's PLAINTEXT port is ports[i - 1] (default: free ports); `zookeeper_port`:
        the client port of the ZooKeeper it starts (default a free one; an ensemble takes free ones).
        `zookeepers`: more than one starts an ensemble of that many (unless `zookeeper` is given)."""
        self.base_dir = Path(base_dir)
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self._own_zk = zookeeper is None
        self.zookeeper: ZooKeeperServer | ZooKeeperEnsemble = zookeeper or (
            ZooKeeperEnsemble(self.base_dir, zookeepers)
            if zookeepers > 1
            else ZooKeeperServer(self.base_dir / "zookeeper", zookeeper_port)
        )
        self.chroot = chroot
        self.config = {k: _prop(v) for k, v in (config or {}).items()}
        self.broker_config = {
            i: {k: _prop(v) for k, v in c.items()} for i, c in (broker_config or {}).items()
        }
        self.brokers: dict[int, BrokerProcess] = {}
        for i in range(1, brokers + 1):
            self.brokers[i] = BrokerProcess(
                i,
                self.base_dir / f"broker-{i}" / "data",
                ports[i - 1] if ports else free_port(),
                {},
                free_port() if ssl_listener else None,
            )

    @property
    def zookeeper_connect(self) -> str:
        return self.zookeeper.connect_string + self.chroot

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values())

    @property
    def ssl_bootstrap_servers(self) -> str:
        return ",".join(b.ssl_bootstrap for b in self.brokers.values() if b.ssl_port is not None)

    def broker_props(self) -> dict[str, str]:
        props = {
            "zookeeper.connect": self.zookeeper_connect,
            "zookeeper.session.timeout.ms": "6000",
            "default.replication.factor": str(min(3, len(self.brokers))),
            "offsets.topic.replication.factor": str(min(3, len(self.brokers))),
            "offsets.topic.num.partitions": "5",
            "transaction.state.log.replication.factor": str(min(3, len(self.brokers))),
            "transaction.state.log.num.partitions": "5",
            "share.coordinator.state.topic.replication.factor": str(min(3, len(self.brokers))),
            "share.coordinator.state.topic.num.partitions": "5",
            "group.initial.rebalance.delay.ms": "0",
            # the last broker to stop has nowhere to move leadership: do not wait 3 x 5 s for that
            "controlled.shutdown.retry.backoff.ms": "200",
        }
        props.update(self.config)
        return props

    def start(self) -> LocalCluster:
        if self._own_zk:
            self.zookeeper.start()
        props = self.broker_props()
        threads = []
        errors: list[BaseException] = []
        for b in self.brokers.values():
            b.props = {**props, **self.broker_config.get(b.broker_id, {})}

            def run(b: BrokerProcess = b) -> None:
                try:
                    b.start()
                except BaseException as exc:  # reported below
                    errors.append(exc)

            t = threading.Thread(target=run)
            t.start()
            threads.append(t)
        for t in threads:
            t.join()
        if errors:
            self.stop()
            raise errors[0]
        try:
            self.wait_for_controller()
        except BaseException:
            self.stop()
            raise
        return self

    def wait_for_controller(self, timeout: float = 60.0) -> None:
        """Until every broker's Metadata names a controller and every broker: an admin client that
        asks before the election gets no controller and may wait minutes before it asks again."""
        from kafkalite.cli.wire import CliError, WireClient
        from kafkalite.protocol.messages.metadata import MetadataRequest

        deadline = time.monotonic() + timeout
        pending = {b.broker_id: b for b in self.brokers.values() if b.running}
        while pending:
            for broker_id, b in list(pending.items()):
                try:
                    with WireClient(b.bootstrap, timeout=5) as c:
                        resp = c.send(MetadataRequest(topics=[]), version=1)
                except (CliError, OSError):
                    continue
                if resp.controller_id >= 0 and len(resp.brokers) == len(self.brokers):
                    del pending[broker_id]
            if not pending:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"brokers {sorted(pending)} know no controller after {timeout:.0f} s"
                )
            time.sleep(0.05)

    def stop(self) -> None:
        for b in self.brokers.values():
            b.stop()
        if self._own_zk:
            self.zookeeper.stop()

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _prop(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)
