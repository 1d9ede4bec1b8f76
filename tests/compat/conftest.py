"""Fixtures for compatibility tests: a kafkalite broker on an ephemeral port that real clients talk to.

The in-process broker serves most tests; restart tests start `python -m kafkalite.cli.main serve` subprocesses.
Modules that set `ALSO_ON_CLUSTER = True` run every test a second time against a three-broker cluster
(a real ZooKeeper, broker processes, replication factor 3), marked `cluster` and `slow`; that cluster is
started once and shared by those modules (their tests use topics, groups and transactional ids of their own).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkalite.local_cluster import LocalCluster
from kafkalite.testing import Broker
from kafkalite.zkserver import ZooKeeperMissing

BIG = 8 * 1024 * 1024
# no wait the tests would sit out: a new group's first rebalance is not delayed 3 s (LocalCluster sets
# this too), timed-out transactions are looked for every 500 ms, not every 10 s
QUICK = {
    "group.initial.rebalance.delay.ms": 0,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 500,
}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "broker" in metafunc.fixturenames and getattr(metafunc.module, "ALSO_ON_CLUSTER", False):
        metafunc.parametrize(
            "broker",
            ["single", pytest.param("cluster", marks=[pytest.mark.cluster, pytest.mark.slow])],
            indirect=True,
            scope="module",
        )


@pytest.fixture(scope="module")
def broker(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    if getattr(request, "param", "single") == "cluster":
        yield request.getfixturevalue("shared_cluster")
        return
    with Broker(
        tmp_path_factory.mktemp("compat"),
        config=QUICK,
        message_max_bytes=BIG,
        num_partitions=1,
    ) as b:
        yield b


@pytest.fixture(scope="session")
def shared_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """Three brokers, RF=3 by default (topics auto-created by the tests get three replicas), for every
    ALSO_ON_CLUSTER module: a cluster start costs seconds, and no test stops or reconfigures a broker."""
    yield from _cluster(tmp_path_factory.mktemp("compat-cluster"))


def _cluster(base: Path) -> Iterator[LocalCluster]:
    cluster = LocalCluster(
        base,
        3,
        config={"message.max.bytes": BIG, "num.partitions": 1, **QUICK},
    )
    try:
        cluster.start()
    except ZooKeeperMissing as exc:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(str(exc))
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def topic() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"


@pytest.fixture(scope="session")
def kcat() -> str:
    path = shutil.which("kcat") or shutil.which("kafkacat")
    if path is None and shutil.which("apt-get") and os.geteuid() == 0:
        # fresh machines: the Debian package (apt-get update first, the lists may be empty)
        subprocess.run(["apt-get", "update", "-q"], capture_output=True, timeout=300)
        subprocess.run(["apt-get", "install", "-y", "-q", "kcat"], capture_output=True, timeout=300)
        path = shutil.which("kcat")
    if path is None:
        pytest.skip("kcat is not installed (apt-get install kcat)")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class BrokerProcess:
    """`kafkalite serve` in a subprocess, for signal and crash tests."""

    def __init__(self, data_dir: Path, port: int, *overrides: str) -> None:
        self.data_dir = data_dir
        self.port = port
        self.overrides = overrides
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = data_dir.parent / f"broker-{port}.log"

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30) -> BrokerProcess:
        args = [
            sys.executable,
            "-m",
            "kafkalite.cli.main",
            "serve",
            "--data-dir",
            str(self.data_dir),
            "--listen",
            f"127.0.0.1:{self.port}",
        ]
        for o in self.overrides:
            args += ["--override", o]
        log = open(self.log_path, "ab")  # noqa: SIM115
        self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"broker exited with {self.proc.returncode}: {self.log_path.read_text()[-2000:]}"
                )
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.05)
        raise TimeoutError("broker did not start listening")

    def stop(self, sig: int, timeout: float = 30) -> int:
        assert self.proc is not None
        self.proc.send_signal(sig)
        rc = self.proc.wait(timeout)
        self.proc = None
        return rc

    def kill_quietly(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


@pytest.fixture
def spawn_broker() -> Iterator[type[BrokerProcess]]:
    """The BrokerProcess class; processes it started are killed at teardown."""
    started: list[BrokerProcess] = []

    class Tracked(BrokerProcess):
        def start(self, timeout: float = 30) -> BrokerProcess:
            started.append(self)
            return super().start(timeout)

    yield Tracked
    for b in started:
        b.kill_quietly()


@pytest.fixture
def port() -> int:
    return free_port()
