"""A run of the queue and txn workloads against a cluster under a nemesis (by default SIGKILL and SIGSTOP
of brokers, leaders first), with the final reads, the checker's reports and the printed tables.

Used by tests/jepsen/test_workloads.py and bench/jepsen_workloads.py; jepsen.partition_run passes
a network-partition nemesis and a NetnsCluster to the same `run`.
"""

from __future__ import annotations

import random
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka.admin import AdminClient

from kafkalite.jepsen.checker import Report, check, liveness, render
from kafkalite.jepsen.history import History
from kafkalite.jepsen.netcluster import NetnsCluster
from kafkalite.jepsen.txn_workload import start_txn
from kafkalite.jepsen.workloads import QUIET, Counts, Values, create_topics, final_read, start_queue
from kafkalite.local_cluster import LocalCluster

FAULTS = ("pause", "kill")

FaultDriver = Callable[[Sequence[History], threading.Event, list[str], Sequence[str]], None]
"""(histories, stop, done, topics): makes faults until `stop` is set or its schedule ends, records every
start and stop in each history, appends one line per healed fault to `done`; `topics` are the workloads'."""


@dataclass
class Outcome:
    """What a run found: per workload its history, report and table; the faults done."""

    histories: dict[str, History] = field(default_factory=dict)
    reports: dict[str, Report] = field(default_factory=dict)
    tables: dict[str, str] = field(default_factory=dict)
    faults: list[str] = field(default_factory=list)
    final_complete: dict[str, bool] = field(default_factory=dict)

    @property
    def valid(self) -> bool:
        return all(r.valid for r in self.reports.values()) and all(self.final_complete.values())


def _leader(bootstrap: str, topic: str, partition: int) -> int | None:
    try:
        md = AdminClient({"bootstrap.servers": bootstrap, **QUIET}).list_topics(topic, timeout=5)
        leader = int(md.topics[topic].partitions[partition].leader)
    except Exception:  # no metadata now: the nemesis picks at random
        return None
    return leader if leader > 0 else None


def _nemesis(
    cluster: LocalCluster | NetnsCluster,
    histories: Sequence[History],
    stop: threading.Event,
    faults: Sequence[str],
    quiet: float,
    length: float,
    rng: random.Random,
    done: list[str],
    topics: Sequence[str],
) -> None:
    """Quiet, fault, heal, in turn, until `stop`: the fault kinds round-robin, the victim the leader
    of a random workload partition (or a random broker); every start and stop recorded in each history."""
    n = 0
    while not stop.wait(quiet):
        kind = faults[n % len(faults)]
        topic = topics[n % len(topics)]
        victim = _leader(cluster.bootstrap_servers, topic, rng.randrange(4)) or rng.choice(
            sorted(cluster.brokers)
        )
        broker = cluster.brokers[victim]
        desc = {"fault": kind, "broker": victim}
        for h in histories:
            h.nemesis("start", desc)
        if kind == "kill":
            broker.kill()
        else:
            broker.pause()
        stop.wait(length)
        if kind == "kill":
            broker.start()
        else:
            broker.resume()
        for h in histories:
            h.nemesis("stop", desc)
        done.append(f"{kind} broker {victim}")
        n += 1


def process_faults(
    cluster: LocalCluster | NetnsCluster,
    faults: Sequence[str] = FAULTS,
    quiet: float = 3.0,
    length: float = 3.0,
    seed: int = 0,
) -> FaultDriver:
    """SIGSTOP / SIGKILL of leaders in turn, `quiet` seconds apart, each held `length` seconds."""

    def drive(
        histories: Sequence[History],
        stop: threading.Event,
        done: list[str],
        topics: Sequence[str],
    ) -> None:
        _nemesis(cluster, histories, stop, faults, quiet, length, random.Random(seed), done, topics)

    return drive


def run(
    cluster: LocalCluster | NetnsCluster,
    seconds: float,
    *,
    counts: Counts | None = None,
    faults: Sequence[str] = FAULTS,
    quiet: float = 3.0,
    length: float = 3.0,
    recovery: float = 5.0,
    seed: int = 0,
    out_dir: Path | None = None,
    log: Callable[[str], None] = print,
    nemesis: FaultDriver | None = None,
    min_faults: int | None = None,
    with_txn: bool = True,
    topic_config: dict[str, str] | None = None,
) -> Outcome:
    """Both workloads at once for `seconds` (and until `min_faults` faults, by default each fault kind
    once, were done, unless the nemesis ends first) with the nemesis, then `recovery` seconds with no
    fault, the final reads, the check; `with_txn` False runs the queue workload alone. `nemesis` defaults to process_faults(cluster, faults, quiet,
    length, seed). Histories go to `out_dir` (JSON lines) if given."""
    counts = counts or Counts()
    if nemesis is None:
        nemesis = process_faults(cluster, faults, quiet, length, seed)
        min_faults = len(faults) if min_faults is None else min_faults
    began = time.monotonic()

    def phase(what: str) -> None:
        log(f"[{time.monotonic() - began:6.1f}s] {what}")

    bs = cluster.bootstrap_servers
    queue_topic, source, sink = "jepsen-queue", "jepsen-txn-in", "jepsen-txn-out"
    topics = [queue_topic, source, sink] if with_txn else [queue_topic]
    create_topics(bs, topics, counts.partitions, config=topic_config)
    out = Outcome()
    queue, txn = History(), History()
    out.histories = {"queue": queue, "txn": txn} if with_txn else {"queue": queue}
    stop, nemesis_stop = threading.Event(), threading.Event()
    values = Values()
    threads = start_queue(bs, queue_topic, queue, stop, counts, values=values)
    if with_txn:
        threads += start_txn(bs, (source, sink), txn, stop, counts, values=values)
    driver = threading.Thread(
        target=nemesis,
        args=(list(out.histories.values()), nemesis_stop, out.faults, [queue_topic, source]),
        name="nemesis",
        daemon=True,
    )
    driver.start()
    phase("workloads started")
    # the run lasts `seconds` and at least until `min_faults` faults were done and healed (a broker
    # restart can take many seconds on a loaded machine), or until the nemesis' schedule ended
    deadline = time.monotonic() + seconds + 120 * max(1, min_faults or 0)
    while (
        time.monotonic() < deadline
        and driver.is_alive()
        and (time.monotonic() - began < seconds or len(out.faults) < (min_faults or 0))
    ):
        time.sleep(0.2)
    nemesis_stop.set()
    driver.join(timeout=120)
    phase("nemesis stopped")
    # the workloads go on for `recovery` seconds with every fault healed: liveness after the last heal
    time.sleep(recovery)
    stop.set()
    for t in threads:
        t.join(timeout=counts.op_timeout + 30)
    stuck = [t for t in threads if t.is_alive()]
    phase(
        "workers stopped"
        + (f"; still running: {', '.join(t.name for t in stuck)}" if stuck else "")
    )
    frames = sys._current_frames()
    for t in stuck:  # where a worker hangs is the finding: its stack, innermost call last
        frame = frames.get(t.ident or -1)
        if frame is not None:
            log(f"  {t.name} is in:\n" + "".join(traceback.format_stack(frame)[-4:]))
    for b in cluster.brokers.values():  # nothing left down: the final read sees every replica
        b.resume()
        if not b.running:
            b.start()
    out.final_complete["queue"] = final_read(bs, [queue_topic], queue)
    if with_txn:
        out.final_complete["txn"] = final_read(bs, [source, sink], txn)
        final_read(bs, [source, sink], txn, isolation="read_uncommitted")
    phase("final reads done")
    for name, h in out.histories.items():
        report = check(h.ops())
        out.reports[name] = report
        out.tables[name] = render(report, liveness(h.ops()))
        log(f"== {name} workload: {len(h)} ops, faults: {', '.join(out.faults) or 'none'}")
        log(out.tables[name])
        if out_dir is not None:
            out_dir.mkdir(parents=True, exist_ok=True)
            h.save(out_dir / f"{name}.jsonl")
    return out
