"""ZooKeeperServer: a real ZooKeeper (Debian's `zookeeper` package) on a free loopback port with its own
data directory, for `kafkalite cluster up`, tests and benchmarks; stop, kill, pause and resume it.

A missing Java or ZooKeeper jar is a ZooKeeperMissing error that names the package to install.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import IO

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"


class ZooKeeperMissing(RuntimeError):
    """Java or the ZooKeeper jar is not installed."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _classpath() -> str:
    """Debian's jar names its dependencies (logging, netty, jute...) in its manifest."""
    return str(ZOOKEEPER_JAR)


def ruok(host: str, port: int, timeout: float = 1.0) -> bool:
    """ZooKeeper's four-letter health check."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(b"ruok")
            return s.recv(16) == b"imok"
    except OSError:
        return False


class ZooKeeperServer:
    """One standalone ZooKeeper process under `data_dir`."""

    def __init__(self, data_dir: str | Path, port: int = 0, *, heap_mb: int = 128) -> None:
        self.data_dir = Path(data_dir)
        self.port = port or _free_port()
        self.heap_mb = heap_mb
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def connect_string(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, timeout: float = 30.0) -> ZooKeeperServer:
        java = shutil.which("java")
        if java is None or not ZOOKEEPER_JAR.exists():
            raise ZooKeeperMissing(
                "ZooKeeper is not installed: run `apt-get install zookeeper` (Debian's package "
                f"brings Java and {ZOOKEEPER_JAR})"
            )
        self.data_dir.mkdir(parents=True, exist_ok=True)
        cfg = self.data_dir / "zoo.cfg"
        cfg.write_text(
            "tickTime=200\n"  # sessions expire within 200 ms of their timeout
            "initLimit=10\n"
            "syncLimit=5\n"
            f"dataDir={self.data_dir / 'data'}\n"
            f"clientPort={self.port}\n"
            "clientPortAddress=127.0.0.1\n"
            "admin.enableServer=false\n"
            "4lw.commands.whitelist=ruok,srvr,stat\n"
            "maxSessionTimeout=60000\n"
            "minSessionTimeout=1000\n"
        )
        self._log = open(self.data_dir / "zookeeper.log", "ab")  # noqa: SIM115 (closed in stop)
        self.proc = subprocess.Popen(
            [
                java,
                f"-Xmx{self.heap_mb}m",
                "-XX:+UseSerialGC",
                "-Dzookeeper.log.dir=" + str(self.data_dir),
                "-cp",
                _classpath(),
                MAIN_CLASS,
                str(cfg),
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while not ruok("127.0.0.1", self.port):
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"ZooKeeper exited with {self.proc.returncode}; see "
                    f"{self.data_dir / 'zookeeper.log'}"
                )
            if time.monotonic() > deadline:
                self.kill()
                raise TimeoutError(
                    f"ZooKeeper did not answer on port {self.port} within {timeout:.0f} s"
                )
            time.sleep(0.1)
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.resume()
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._close()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._close()

    def pause(self) -> None:
        """SIGSTOP: ZooKeeper stops answering (an outage), its sessions are kept."""
        if self.running and self.proc is not None:
            os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        if self.running and self.proc is not None:
            os.kill(self.proc.pid, signal.SIGCONT)

    def _close(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> ZooKeeperServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
