"""ZooKeeperServer: a real ZooKeeper (Debian's `zookeeper` package) on a free loopback port with its own
data directory, for `kafkalite cluster up`, tests and benchmarks; stop, kill, pause and resume it.
ZooKeeperEnsemble: three (or N) such servers in a quorum (server.N lines, myid, quorum/election ports).

A missing Java or ZooKeeper jar is a ZooKeeperMissing error that names the package to install.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, NamedTuple

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


def four_letter(host: str, port: int, word: str, timeout: float = 1.0) -> str:
    """A four-letter command's answer ('' when the server does not answer)."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(word.encode())
            chunks = []
            while chunk := s.recv(4096):
                chunks.append(chunk)
            return b"".join(chunks).decode(errors="replace")
    except OSError:
        return ""


class QuorumPeer(NamedTuple):
    """One server line of an ensemble: server.<myid>=<host>:<quorum_port>:<election_port>."""

    myid: int
    host: str
    quorum_port: int
    election_port: int


class ZooKeeperServer:
    """One ZooKeeper process under `data_dir`: standalone, or with `myid` and `peers` one server of
    an ensemble. `host`: the address it listens on; `prefix`: an argv prefix for its command (e.g.
    `ip netns exec NS`, which execs, so signals still reach ZooKeeper itself)."""

    def __init__(
        self,
        data_dir: str | Path,
        port: int = 0,
        *,
        heap_mb: int = 128,
        host: str = "127.0.0.1",
        prefix: Sequence[str] = (),
        myid: int | None = None,
        peers: Sequence[QuorumPeer] = (),
    ) -> None:
        self.data_dir = Path(data_dir)
        self.port = port or _free_port()
        self.heap_mb = heap_mb
        self.host = host
        self.prefix = list(prefix)
        self.myid = myid
        self.peers = list(peers)
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def connect_string(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def serving(self) -> bool:
        """Whether it answers as standalone, leader or follower (an ensemble member without a
        quorum answers, but not as one of these)."""
        srvr = four_letter(self.host, self.port, "srvr")
        return any(f"Mode: {m}" in srvr for m in ("standalone", "leader", "follower"))

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
        quorum = "".join(
            f"server.{p.myid}={p.host}:{p.quorum_port}:{p.election_port}\n" for p in self.peers
        )
        if self.myid is not None:
            (self.data_dir / "data").mkdir(exist_ok=True)
            (self.data_dir / "data" / "myid").write_text(f"{self.myid}\n")
        cfg.write_text(
            "tickTime=200\n"  # sessions expire within 200 ms of their timeout
            "initLimit=10\n"
            "syncLimit=5\n"
            f"dataDir={self.data_dir / 'data'}\n"
            f"clientPort={self.port}\n"
            f"clientPortAddress={self.host}\n"
            "admin.enableServer=false\n"
            "4lw.commands.whitelist=ruok,srvr,stat\n"
            "maxSessionTimeout=60000\n"
            "minSessionTimeout=1000\n" + ("quorumListenOnAllIPs=false\n" + quorum if quorum else "")
            # an ensemble: elections and quorum on each server's own address
        )
        self._log = open(self.data_dir / "zookeeper.log", "ab")  # noqa: SIM115 (closed in stop)
        self.proc = subprocess.Popen(
            [
                *self.prefix,
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
        while not ruok(self.host, self.port):
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


class ZooKeeperEnsemble:
    """`size` ZooKeeper servers in one quorum (ids 1..size): on loopback with free ports by default,
    or on the given hosts (each with its argv prefix, e.g. its network namespace) with Kafka's usual
    2181/2888/3888. Started together; ready once a quorum serves."""

    def __init__(
        self,
        base_dir: str | Path,
        size: int = 3,
        *,
        hosts: Sequence[str] = (),
        prefixes: Sequence[Sequence[str]] = (),
        heap_mb: int = 96,
    ) -> None:
        base = Path(base_dir)
        peers = []
        ports = []
        for i in range(1, size + 1):
            if hosts:
                peers.append(QuorumPeer(i, hosts[i - 1], 2888, 3888))
                ports.append(2181)
            else:
                peers.append(QuorumPeer(i, "127.0.0.1", _free_port(), _free_port()))
                ports.append(_free_port())
        self.servers = {
            p.myid: ZooKeeperServer(
                base / f"zookeeper-{p.myid}",
                ports[p.myid - 1],
                heap_mb=heap_mb,
                host=p.host,
                prefix=prefixes[p.myid - 1] if prefixes else (),
                myid=p.myid,
                peers=peers,
            )
            for p in peers
        }

    @property
    def connect_string(self) -> str:
        return ",".join(s.connect_string for s in self.servers.values())

    def start(self, timeout: float = 60.0) -> ZooKeeperEnsemble:
        errors: list[BaseException] = []

        def one(s: ZooKeeperServer) -> None:
            try:
                s.start(timeout)
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=one, args=(s,)) for s in self.servers.values()]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            self.stop()
            raise errors[0]
        deadline = time.monotonic() + timeout
        while sum(s.serving for s in self.servers.values()) <= len(self.servers) // 2:
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"no ZooKeeper quorum within {timeout:.0f} s")
            time.sleep(0.1)
        return self

    def stop(self) -> None:
        for s in self.servers.values():
            s.stop()

    def __enter__(self) -> ZooKeeperEnsemble:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
