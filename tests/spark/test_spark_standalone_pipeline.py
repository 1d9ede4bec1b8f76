"""`kafkalite pipeline --master spark://…` on a standalone master with two workers (the session's, see
conftest.py), one of them SIGKILLed (worker, executor and Python workers) while a micro-batch runs: the
outputs must still be exact. The fixture starts a new worker in its place afterwards."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from spark_support import consume_all, consume_committed
from standalone_support import batch_ids, kill_group, parquet_aggregates

import kafkalite
from kafkalite.spark.pipeline import parse_topic_aggregates, window_aggregates

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(480)]

SRC = str(Path(kafkalite.__file__).resolve().parents[1])


def _tail(path: Path, lines: int = 40) -> str:
    return (
        "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""
    )


def test_pipeline_exact_after_a_worker_is_killed_mid_batch(broker, tmp_path, standalone):
    run_id = f"standalone-{os.getpid()}-{time.monotonic_ns() % 10**6}"
    work = tmp_path / "pipeline"
    ckpts = [work / run_id / "checkpoints" / q for q in ("parquet", "topic")]
    python_path = os.pathsep.join(filter(None, [SRC, os.environ.get("PYTHONPATH")]))
    cl = standalone
    cmd = [sys.executable, "-m", "kafkalite.cli.main", "pipeline", "--master", cl.url]
    cmd += ["--bootstrap-server", broker.bootstrap_servers, "--work-dir", str(work)]
    cmd += ["--run-id", run_id, "--events", "300", "--minutes", "4"]
    cmd += ["--max-offsets-per-trigger", "150"]  # two micro-batches per phase and query
    cmd += ["--conf", "spark.executor.memory=512m", "--conf", "spark.driver.memory=768m"]
    out, err = tmp_path / "pipeline.out", tmp_path / "pipeline.err"
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYTHONPATH": python_path}
    env["PYSPARK_PYTHON"] = env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    with open(out, "wb") as o, open(err, "wb") as e:
        proc = subprocess.Popen(cmd, env=env, stdout=o, stderr=e, start_new_session=True)
    killed: tuple[int, set[int], int] | None = None  # (worker, batches in flight, commits then)
    try:
        deadline = time.monotonic() + 420
        while proc.poll() is None:
            assert time.monotonic() < deadline, "the pipeline did not finish in time"
            if killed is None:
                committed = sum(len(batch_ids(c, "commits")) for c in ckpts)
                in_flight = {
                    b for c in ckpts for b in batch_ids(c, "offsets") - batch_ids(c, "commits")
                }
                victim = next((w for w in (0, 1) if cl.executors(w)), None)
                # once a batch is committed (the executors are warm and hold state and shuffle
                # files), a batch planned and not yet committed: its tasks are running now
                if committed >= 1 and in_flight and victim is not None:
                    cl.kill_worker(victim)
                    killed = (victim, in_flight, committed)
                    print(f"\nSIGKILL worker {victim} with batches {sorted(in_flight)} running")
            time.sleep(0.05)
    finally:
        kill_group(proc)
    stdout, stderr = out.read_text(errors="replace"), err.read_text(errors="replace")
    print(_tail(out))
    assert proc.returncode == 0, f"pipeline exit {proc.returncode}\n{stdout}\n{_tail(err)}"
    assert killed is not None, "the run ended before a worker could be killed mid-batch"
    assert cl.workers[killed[0]].poll() is not None
    assert cl.workers[1 - killed[0]].poll() is None  # the survivor did the rest
    # Spark saw the executor go and re-ran its tasks on the other one; the run went on past the kill
    assert "Lost executor" in stderr, _tail(err)
    assert sum(len(batch_ids(c, "commits")) for c in ckpts) > killed[2]
    assert "Parquet and topic match the expected aggregates" in stdout

    # independent of the pipeline's own check: expected from the input topic as the broker holds it,
    # the table through the file sink's log (pyarrow, no Spark), the topic with read_committed
    events = [json.loads(r.value) for r in consume_all(broker, f"clickstream-{run_id}")]
    assert len(events) == 2 * 300 + 1
    expected = window_aggregates([e for e in events if e["user"] != "user-flush"], 60)
    assert parquet_aggregates(work / run_id / "table") == expected
    sink = consume_committed(broker, f"clickstream-aggregates-{run_id}")
    assert parse_topic_aggregates([r.value for r in sink]) == expected


def test_pipeline_conf_must_be_key_value(tmp_path, capsys):
    from kafkalite.cli.main import main as cli

    args = ["pipeline", "--work-dir", str(tmp_path), "--conf", "spark.executor.memory"]
    assert cli(args) == 2
    assert "--conf takes KEY=VALUE" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())  # refused before a broker or a session was started
