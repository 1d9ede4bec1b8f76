"""Fault tests of the exactly-once sink: SIGKILL a streaming query (child process) or a standalone cluster's
executor mid-batch, let it recover, and check with read_committed that each input record appears once.

The suite runs the short version: two SIGKILLs of the driver (three driver JVMs) over five micro-batches,
and five on the standalone cluster. KAFKALITE_SPARK_FAULT_ROUNDS=N (N >= 3) runs the long one: N kills of
the driver over ten micro-batches or more, the third killing a run that has just aborted the open
transactions of the one before, and ten micro-batches on the standalone cluster:

    KAFKALITE_SPARK_FAULT_ROUNDS=6 pytest tests/spark/test_exactly_once_faults.py
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from spark_support import consume_all, consume_committed, produce
from standalone_support import descendants

pytestmark = [pytest.mark.spark, pytest.mark.slow]

CHILD = Path(__file__).with_name("eos_query.py")


def _batch_ids(ckpt: Path, kind: str) -> set[int]:
    d = ckpt / kind
    if not d.is_dir():
        return set()
    return {int(n) for n in os.listdir(d) if n.isdigit()}


def _in_flight(ckpt: Path) -> bool:
    """A batch is planned (offsets log) and not yet committed (commit log)."""
    return bool(_batch_ids(ckpt, "offsets") - _batch_ids(ckpt, "commits"))


def _start(args: list[str]) -> subprocess.Popen[bytes]:
    # its own session: SIGKILL to the group takes the JVM and the Python workers down with the driver
    return subprocess.Popen([sys.executable, str(CHILD), *args], start_new_session=True)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(30)


def _open_transactions(admin, prefix: str) -> bool:
    """Some task of the query has written records in a transaction the driver has not committed yet."""
    try:
        listed = admin.list_transactions(states=["Ongoing"])
    except Exception:  # the broker answers; a hiccup just means "not now"
        return False
    return any(t.transactional_id.startswith(prefix) for t in listed)


def run_until_done(
    broker, args: list[str], ckpt: Path, kills: list[tuple[str, int, float]], timeout: float = 400
) -> tuple[int, int]:
    """Run the child and SIGKILL it as `kills` says, one per run, then restart it from the checkpoint
    until a run exits 0. A kill is (when, commits_first, max_delay): once this run has committed
    `commits_first` more batches and, for "txn", a transaction of the sink is open (rows written, not
    committed) or, for "batch", a batch is planned but not committed, wait up to max_delay s and kill.
    Returns (runs, kills done)."""
    from kafkalite.client import KafkaAdminClient

    deadline = time.monotonic() + timeout
    runs = killed = 0
    plan = list(kills)
    with KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers) as admin:
        while True:
            assert time.monotonic() < deadline, "the query did not finish in time"
            runs += 1
            committed_before = len(_batch_ids(ckpt, "commits"))
            proc = _start(args)
            target = plan.pop(0) if plan else None
            fire_at: float | None = None
            while proc.poll() is None:
                assert time.monotonic() < deadline, "the query did not finish in time"
                if target is not None and fire_at is None:
                    when, commits_first, delay = target
                    progressed = len(_batch_ids(ckpt, "commits")) - committed_before
                    ready = (
                        _open_transactions(admin, "kafkalite-spark-")
                        if when == "txn"
                        else (_in_flight(ckpt))
                    )
                    if progressed >= commits_first and ready:
                        fire_at = time.monotonic() + random.uniform(0, delay)
                if fire_at is not None and time.monotonic() >= fire_at:
                    _kill_group(proc)
                    killed += 1
                    print(
                        f"\nrun {runs}: SIGKILL ({target[0]}) with batch "
                        f"{max(_batch_ids(ckpt, 'offsets'), default=None)} planned, "
                        f"{max(_batch_ids(ckpt, 'commits'), default=None)} committed"
                    )
                    break
                time.sleep(0.02)
            else:
                if proc.returncode == 0:
                    return runs, killed
                print(f"\nrun {runs}: exited with {proc.returncode}; restarting")


def check_exactly_once(broker, sink: str, n: int) -> None:
    got = Counter(int(r.value) for r in consume_committed(broker, sink, timeout=60))
    raw = len(consume_all(broker, sink, timeout=60))
    lost = [i for i in range(n) if got[i] == 0]
    duplicated = {i: c for i, c in got.items() if c > 1}
    unexpected = [i for i in got if not 0 <= i < n]
    print(
        f"input {n}, acknowledged (read_committed) {sum(got.values())}, lost {len(lost)}, "
        f"duplicated {len(duplicated)}; {raw} records in the log (the rest were aborted attempts)"
    )
    assert not lost, f"lost: {lost[:20]}"
    assert not duplicated, f"duplicated: {dict(list(duplicated.items())[:20])}"
    assert not unexpected
    assert sum(got.values()) == n


# how many times the driver is SIGKILLed (the module docstring says what a longer run adds)
FAULT_ROUNDS = max(2, int(os.environ.get("KAFKALITE_SPARK_FAULT_ROUNDS", "2")))


def fault_plan(rounds: int) -> list[tuple[str, int, float]]:
    """The kills for `rounds` rounds: rows written but not committed (first batch); a random moment of a
    later batch; rows written but not committed again, right after a restart that had open transactions
    to abort; then, for longer runs, a random moment of a batch after one more commit and rows written
    but not committed, in turn."""
    plan = [("txn", 0, 0.05), ("batch", 2, 0.5), ("txn", 0, 0.1)]
    plan += [("batch", 1, 0.5) if i % 2 else ("txn", 0, 0.1) for i in range(rounds - len(plan))]
    return plan[:rounds]


@pytest.mark.timeout(300 + 120 * (FAULT_ROUNDS - 2))
def test_sigkill_and_restart_gives_each_record_once(broker, topic, tmp_path):
    # five micro-batches: the first killed, two committed, the fourth killed, the rest after a restart;
    # longer runs get ten and more (two more batches per round past the third)
    per_trigger = 200
    n = 1000 if FAULT_ROUNDS == 2 else per_trigger * max(10, 2 * FAULT_ROUNDS + 4)
    source, sink = topic + "-in", topic + "-out"
    broker.create_topic(source, 2)
    broker.create_topic(sink, 2)
    produce(broker, source, [{"value": b"%d" % i, "partition": i % 2} for i in range(n)])
    ckpt = tmp_path / "ckpt"
    args = [broker.bootstrap_servers, source, sink, str(ckpt), str(per_trigger)]
    kills = fault_plan(FAULT_ROUNDS)
    runs, killed = run_until_done(broker, args, ckpt, kills, timeout=400 + 60 * len(kills))
    print(f"{runs} runs, {killed} SIGKILLs")
    assert killed >= 2
    check_exactly_once(broker, sink, n)


def test_executor_killed_mid_batch_on_a_standalone_cluster(broker, topic, tmp_path, standalone):
    """SIGKILL an executor JVM of the session's standalone cluster (two workers, see conftest.py) while
    its tasks hold open transactions, then a Python worker the same way: Spark re-runs the lost tasks on
    another executor, whose init_transactions fences the old attempts; the driver (not restarted) commits
    only the new ones."""
    from kafkalite.client import KafkaAdminClient

    url = standalone.url
    # five micro-batches (ten in the long version): the two kills come in the first ones
    n, per_trigger = (1000 if FAULT_ROUNDS == 2 else 2000), 200
    source, sink = topic + "-in", topic + "-out"
    broker.create_topic(source, 2)
    broker.create_topic(sink, 2)
    produce(broker, source, [{"value": b"%d" % i, "partition": i % 2} for i in range(n)])
    ckpt = tmp_path / "ckpt"
    args = [broker.bootstrap_servers, source, sink, str(ckpt), str(per_trigger), url]
    proc = _start(args)
    targets = ["CoarseGrainedExecutorBackend", "pyspark"]
    kills: list[str] = []
    deadline = time.monotonic() + 400
    with KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers) as admin:
        while proc.poll() is None:
            assert time.monotonic() < deadline, "the query did not finish in time"
            if targets and _open_transactions(admin, "kafkalite-spark-"):
                procs = [p for w in standalone.workers for p in descendants(w.pid)]
                victims = [p for p, _, c in procs if targets[0] in c]
                if targets[0] == "pyspark":  # a Python worker: forked by pyspark.daemon
                    daemons = {p for p, _, c in procs if "pyspark.daemon" in c}
                    victims = [p for p, parent, _ in procs if parent in daemons]
                if victims:
                    pid = victims[-1]
                    os.kill(pid, signal.SIGKILL)
                    kills.append(targets.pop(0))
                    print(
                        f"\nSIGKILL {pid} ({kills[-1]}) with batch "
                        f"{max(_batch_ids(ckpt, 'offsets'), default=None)} planned"
                    )
                    time.sleep(1.0)
            time.sleep(0.02)
    try:
        assert proc.returncode == 0, f"the query failed (exit {proc.returncode})"
    finally:
        _kill_group(proc)
    print(f"killed: {kills}")
    assert kills and kills[0] == "CoarseGrainedExecutorBackend"
    check_exactly_once(broker, sink, n)
