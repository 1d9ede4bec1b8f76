"""Shared helpers of the consumer-group compat tests: a broker tuned for fast rebalances, producing
numbered messages, member subprocesses whose output is parsed, and bounded waiting.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

# quick rebalances: no initial delay; sessions at the broker's minimum
GROUP_BROKER_PROPS: dict[str, Any] = {
    "group_initial_rebalance_delay_ms": 0,
    "group_min_session_timeout_ms": 6000,
    "num_partitions": 1,
}


def wait_until(
    cond: Callable[[], bool],
    timeout: float,
    what: str,
    step: float = 0.05,
    detail: Callable[[], str] | None = None,
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(step)
    extra = f" ({detail()})" if detail is not None else ""
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}{extra}")


def produce_numbered(
    bootstrap: str, topic: str, start: int, count: int, partitions: int
) -> set[str]:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    values = set()
    for i in range(start, start + count):
        v = f"v{i}"
        p.produce(topic, value=v.encode(), key=str(i).encode(), partition=i % partitions)
        values.add(v)
    assert p.flush(30) == 0
    return values


class MemberProcess:
    """One `group_member_proc.py` subprocess; its stdout is parsed on a thread."""

    def __init__(
        self,
        lib: str,
        bootstrap: str,
        group: str,
        topic: str,
        strategy: str,
        instance: str | None = None,
    ):
        args = [
            sys.executable,
            str(HERE / "group_member_proc.py"),
            lib,
            bootstrap,
            group,
            topic,
            strategy,
        ]
        if instance:
            args.append(instance)
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        err_dir = os.environ.get("KL_MEMBER_STDERR_DIR")  # debugging aid: keep each member's stderr
        stderr: Any = subprocess.DEVNULL
        if err_dir:
            stderr = open(Path(err_dir) / f"member-{time.monotonic_ns()}.log", "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=stderr, env=env)
        self.assignment: list[int] = []
        self.assignments_seen: list[list[int]] = []
        self.values: list[str] = []
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.decode().strip()
            with self._lock:
                if line.startswith("A"):
                    parts = line[1:].strip()
                    self.assignment = [int(x) for x in parts.split(",")] if parts else []
                    self.assignments_seen.append(self.assignment)
                elif line.startswith("M "):
                    self.values.append(line.split(" ", 3)[3])

    def consumed(self) -> set[str]:
        with self._lock:
            return set(self.values)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def terminate(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()
