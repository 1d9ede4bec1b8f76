"""A Spark standalone cluster for tests (a master and N workers from pyspark's own `bin/spark-class`, each in
its own process group so a worker can be SIGKILLed with its executor), and readers that need no Spark.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import unquote, urlparse

from spark_support import SPARK_TEST_JAVA_OPTIONS

EXECUTOR_CLASS = "CoarseGrainedExecutorBackend"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def kill_group(proc: subprocess.Popen[bytes], timeout: float = 30) -> None:
    """SIGKILL the process group `proc` leads (started with start_new_session) and reap `proc`."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        pass


def descendants(pid: int) -> list[tuple[int, int, str]]:
    """(pid, parent pid, command line) of every live process below `pid`, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out: list[tuple[int, int, str]] = []
    todo = [(c, pid) for c in children.get(pid, [])]
    while todo:
        p, parent = todo.pop()
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        out.append((p, parent, cmd))
        todo.extend((c, p) for c in children.get(p, []))
    return out


@dataclass
class StandaloneCluster:
    """A running master and its workers; `url` is what `--master` takes."""

    url: str
    web_url: str
    master: subprocess.Popen[bytes]
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)
    # starts worker i (a new process each call) and returns it with the port of its web UI
    start_worker: Callable[[int], tuple[subprocess.Popen[bytes], int]] | None = None
    worker_web_ports: list[int] = field(default_factory=list)

    def _master_workers(self) -> list[dict[str, object]]:
        try:
            with urllib.request.urlopen(self.web_url + "/json/", timeout=2) as r:
                doc = json.load(r)
        except OSError:
            return []
        return list(doc.get("workers", []))

    def alive_workers(self) -> int:
        return sum(1 for w in self._master_workers() if w.get("state") == "ALIVE")

    def registered(self, worker: int) -> bool:
        """The master lists this worker process (found by its web UI port) as ALIVE."""
        suffix = f":{self.worker_web_ports[worker]}"
        return any(
            w.get("state") == "ALIVE" and str(w.get("webuiaddress", "")).endswith(suffix)
            for w in self._master_workers()
        )

    def restart_dead_workers(self, timeout: float = 90) -> list[int]:
        """Start a new process for every worker that has exited (a test killed it) and wait until the
        master has registered it; returns their indexes."""
        assert self.start_worker is not None
        dead = [i for i, proc in enumerate(self.workers) if proc.poll() is not None]
        for i in dead:
            self.workers[i], self.worker_web_ports[i] = self.start_worker(i)
        deadline = time.monotonic() + timeout
        while not all(self.registered(i) for i in dead):
            if time.monotonic() > deadline:
                raise TimeoutError(f"restarted workers {dead} did not register in {timeout} s")
            time.sleep(0.3)
        return dead

    def executors(self, worker: int) -> list[int]:
        """Pids of the executor JVMs this worker launched (there while an application runs)."""
        return [p for p, _, cmd in descendants(self.workers[worker].pid) if EXECUTOR_CLASS in cmd]

    def kill_worker(self, worker: int) -> None:
        """SIGKILL the worker JVM, its executor and the executor's Python workers: a lost machine."""
        kill_group(self.workers[worker])

    def stop(self) -> None:
        for proc in [*reversed(self.workers), self.master]:
            kill_group(proc)


@contextmanager
def standalone_cluster(
    work_dir: Path,
    *,
    workers: int = 2,
    cores: int = 1,
    memory: str = "1g",
    python_path: str | None = None,
    timeout: float = 90,
) -> Iterator[StandaloneCluster]:
    """Start a master and `workers` workers on 127.0.0.1, wait until all registered, and kill every
    process of them (process groups) on the way out, whatever happened. Executors inherit the workers'
    environment: `python_path` (PYTHONPATH) is how they find the kafkalite under test."""
    spark_class = str(spark_home() / "bin" / "spark-class")
    work_dir.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_DAEMON_MEMORY": "256m",
        "SPARK_DAEMON_JAVA_OPTS": SPARK_TEST_JAVA_OPTIONS,
        "SPARK_WORKER_DIR": str(work_dir / "worker"),
    }
    if python_path is not None:
        env["PYTHONPATH"] = python_path
    port, web_port = free_port(), free_port()

    def start(args: list[str], log: str) -> subprocess.Popen[bytes]:
        with open(work_dir / log, "wb") as out:
            return subprocess.Popen(
                [spark_class, *args],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: killpg takes its children too
            )

    master = start(
        [
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--webui-port",
            str(web_port),
        ],
        "master.log",
    )
    cluster = StandaloneCluster(f"spark://127.0.0.1:{port}", f"http://127.0.0.1:{web_port}", master)
    starts: dict[int, int] = {}

    def start_worker(i: int) -> tuple[subprocess.Popen[bytes], int]:
        ui_port = free_port()
        starts[i] = starts.get(i, 0) + 1
        args = ["org.apache.spark.deploy.worker.Worker", cluster.url, "--host", "127.0.0.1"]
        args += ["--cores", str(cores), "--memory", memory, "--webui-port", str(ui_port)]
        suffix = "" if starts[i] == 1 else f"-{starts[i]}"
        return start(args, f"worker-{i}{suffix}.log"), ui_port

    cluster.start_worker = start_worker
    try:
        for i in range(workers):
            proc, ui_port = start_worker(i)
            cluster.workers.append(proc)
            cluster.worker_web_ports.append(ui_port)
        deadline = time.monotonic() + timeout
        while cluster.alive_workers() < workers:
            for proc in [master, *cluster.workers]:
                if proc.poll() is not None:
                    raise RuntimeError(f"a Spark daemon exited at startup (logs in {work_dir})")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{workers} workers did not register in {timeout} s")
            time.sleep(0.3)
        yield cluster
    finally:
        cluster.stop()


# -- reading outputs without Spark ------------------------------------------------------------------


def batch_ids(checkpoint: Path, kind: str) -> set[int]:
    """Micro-batch ids in a streaming checkpoint's `offsets` (planned) or `commits` (done) log."""
    d = checkpoint / kind
    if not d.is_dir():
        return set()
    return {int(n) for n in os.listdir(d) if n.isdigit()}


def committed_parquet_files(table: Path) -> list[Path]:
    """The data files Spark's streaming file sink committed, from its `_spark_metadata` log (files that
    a killed or retried task attempt left in the directory are not part of the table)."""
    added: dict[str, bool] = {}
    log = table / "_spark_metadata"
    entries = sorted(
        (p for p in log.iterdir() if p.name.split(".")[0].isdigit()),
        key=lambda p: int(p.name.split(".")[0]),
    )
    for entry in entries:
        lines = entry.read_text().splitlines()
        if not lines or lines[0] != "v1":
            raise ValueError(f"{entry}: not a v1 file sink log")
        for line in lines[1:]:
            doc = json.loads(line)
            added[doc["path"]] = doc.get("action", "add") == "add"
    return [Path(unquote(urlparse(p).path)) for p, keep in added.items() if keep]


def parquet_aggregates(table: Path) -> dict[tuple[datetime, str], tuple[int, int]]:
    """The pipeline's Parquet table read with pyarrow, through the sink's log; raises on duplicates."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out: dict[tuple[datetime, str], tuple[int, int]] = {}
    for path in committed_parquet_files(table):
        t = pq.read_table(path, columns=["window_start", "category", "views", "users"])
        starts = t.column("window_start").cast(pa.timestamp("us")).to_pylist()
        for start, category, views, users in zip(
            starts,
            t.column("category").to_pylist(),
            t.column("views").to_pylist(),
            t.column("users").to_pylist(),
            strict=True,
        ):
            key = (start.replace(tzinfo=UTC), category)
            if key in out:
                raise AssertionError(f"window {key} appears twice in the Parquet table")
            out[key] = (int(views), int(users))
    return out


# -- Spark Connect ---------------------------------------------------------------------------------


@contextmanager
def connect_server(
    work_dir: Path,
    *,
    master: str = "local[1]",
    python_path: str | None = None,
    timeout: float = 120,
) -> Iterator[str]:
    """A Spark Connect server from pyspark's own `sbin/start-connect-server.sh` (in the foreground:
    `--wait`; the wheel ships the spark-connect jar) on 127.0.0.1; yields its `sc://` URL and kills its
    process group on the way out. Its Python workers run the data sources clients register, so they
    need kafkalite importable (`python_path`)."""
    work_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    env["SPARK_LOG_DIR"] = env["SPARK_PID_DIR"] = str(work_dir)
    if python_path is not None:
        env["PYTHONPATH"] = python_path
    cmd = [str(spark_home() / "sbin" / "start-connect-server.sh"), "--wait"]
    cmd += ["--master", master, "--driver-memory", "512m"]
    for key, value in (
        ("spark.connect.grpc.binding.address", "127.0.0.1"),
        ("spark.connect.grpc.binding.port", str(port)),
        ("spark.ui.enabled", "false"),
        ("spark.sql.shuffle.partitions", "2"),
        ("spark.sql.session.timeZone", "UTC"),
        ("spark.driver.extraJavaOptions", SPARK_TEST_JAVA_OPTIONS),
    ):
        cmd += ["--conf", f"{key}={value}"]
    log = work_dir / "connect-server.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            cmd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"the Spark Connect server exited at startup (see {log})")
            try:
                with socket.create_connection(("127.0.0.1", port), 0.5):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"no Spark Connect server on {port} in {timeout} s"
                    ) from None
                time.sleep(0.3)
        yield f"sc://127.0.0.1:{port}"
    finally:
        kill_group(proc)
