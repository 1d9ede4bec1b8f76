"""The queue and txn workloads under the network nemesis: a FaultDriver for process_run.run that drives a
jepsen.nemesis.Nemesis on a NetnsCluster (fixed or seeded random schedule) and records into the histories.

Used by bench/jepsen_partitions.py (--workloads) and tests/jepsen/test_unclean_partition.py.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from kafkalite.jepsen.history import History
from kafkalite.jepsen.nemesis import Nemesis
from kafkalite.jepsen.netcluster import NetnsCluster

Step = tuple[str, float] | tuple[str, float, str | None]


class PartitionFaults:
    """A FaultDriver: each step of `schedule` (kind, hold[, target]) in turn, then, after each heal, a
    wait until every partition of the first history took an ok send again (at most `recovery` s).
    `target`, given a Nemesis, may name the step's victim (e.g. "b2"); `self.nemesis` keeps the
    fault records and their probes for the caller to check."""

    def __init__(
        self,
        cluster: NetnsCluster,
        schedule: Sequence[Step] | Callable[[Nemesis], Sequence[Step]],
        *,
        partitions: int,
        seed: int = 36,
        recovery: float = 30.0,
        log: Callable[[str], Any] = print,
    ) -> None:
        self.cluster, self.schedule = cluster, schedule
        self.partitions, self.seed, self.recovery, self.log = partitions, seed, recovery, log
        self.nemesis: Nemesis | None = None

    def __call__(
        self,
        histories: Sequence[History],
        stop: threading.Event,
        done: list[str],
        topics: Sequence[str],
    ) -> None:
        def record(f: str, value: dict[str, Any]) -> None:
            for h in histories:
                h.nemesis(f, value)

        nemesis = Nemesis(
            self.cluster, topics[0], self.partitions, seed=self.seed, on_event=record, log=self.log
        )
        self.nemesis = nemesis
        steps = self.schedule(nemesis) if callable(self.schedule) else self.schedule
        for step in steps:
            if stop.is_set():
                return
            before = len(nemesis.faults)
            nemesis.run_schedule([step])
            if len(nemesis.faults) == before:
                continue  # not made (no leader to aim at just now): said in the log
            done.append(f"{step[0]} {nemesis.faults[-1].nodes}")
            deadline = time.monotonic() + self.recovery
            while not stop.is_set() and time.monotonic() < deadline:
                if sends_after_last_heal(histories[0], self.partitions):
                    break
                stop.wait(0.5)


def sends_after_last_heal(history: History, partitions: int) -> bool:
    """Whether, since the last nemesis "stop" in `history`, each of `partitions` keys took an ok send."""
    ops = history.ops()
    heals = [o.time for o in ops if o.process == "nemesis" and o.f == "stop"]
    healed = heals[-1] if heals else 0.0
    keys = {
        m[1]
        for o in ops
        if o.type == "ok" and o.time >= healed and o.process != "nemesis"
        for m in o.value or []
        if m and m[0] == "send"
    }
    return len(keys) >= partitions
