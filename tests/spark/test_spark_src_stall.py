"""A broker stalled with SIGSTOP longer than kafkaConsumer.pollTimeoutMs: a range read fails with a
timeout (not data loss) within the poll timeout, and a streaming query's task failure leaves the
checkpoint where it was, so after the broker resumes every record is read; under both failOnDataLoss."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from kafkalite.client import KafkaAdminClient, KafkaProducer, NewTopic
from kafkalite.spark.kafkaio import FetchTimeoutError, read_range, read_range_columns
from kafkalite.spark.planning import OffsetRange

pytestmark = [pytest.mark.spark, pytest.mark.slow]

POLL_TIMEOUT_MS = 2000
RECORDS = 3000


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def stalled_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimpleNamespace]:
    """A `kafkalite serve` subprocess (so SIGSTOP stalls only the broker) with one loaded topic."""
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kafkalite.cli.main",
            "serve",
            "--data-dir",
            str(tmp_path_factory.mktemp("stall-broker")),
            "--listen",
            f"127.0.0.1:{port}",
            "--log-level",
            "warning",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    servers = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, "the broker exited during startup"
            try:
                with socket.create_connection(("127.0.0.1", port), 0.5):
                    break
            except OSError:
                assert time.monotonic() < deadline, "the broker did not start"
                time.sleep(0.1)
        with KafkaAdminClient(bootstrap_servers=servers) as admin:
            admin.create_topics([NewTopic("stall", 1, 1)])
        with KafkaProducer(bootstrap_servers=servers, linger_ms=5) as producer:
            for i in range(RECORDS):
                producer.send("stall", value=b"%d" % i)
            producer.flush(30)
        yield SimpleNamespace(proc=proc, bootstrap_servers=servers)
    finally:
        try:
            os.kill(proc.pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(15)


class _Stopped:
    """SIGSTOP the broker for the `with` block (SIGCONT on the way out, whatever happens)."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc

    def __enter__(self) -> None:
        os.kill(self.proc.pid, signal.SIGSTOP)

    def __exit__(self, *exc: object) -> None:
        os.kill(self.proc.pid, signal.SIGCONT)


@pytest.mark.parametrize("fail_on_data_loss", [True, False], ids=["fail", "skip"])
@pytest.mark.parametrize("path", ["columnar", "rows"])
def test_a_range_read_times_out_within_the_poll_timeout(stalled_broker, path, fail_on_data_loss):
    reader = read_range_columns if path == "columnar" else read_range
    client = {"bootstrap.servers": stalled_broker.bootstrap_servers}
    rng = OffsetRange("stall", 0, 0, RECORDS)
    with _Stopped(stalled_broker.proc):
        began = time.monotonic()
        with pytest.raises(FetchTimeoutError, match=r"Timed out after 2000 ms") as info:
            for _ in reader(
                client, rng, fail_on_data_loss=fail_on_data_loss, poll_timeout_ms=POLL_TIMEOUT_MS
            ):
                pass
        took = time.monotonic() - began
    assert "Data loss" not in str(info.value)
    assert POLL_TIMEOUT_MS / 1000 <= took < POLL_TIMEOUT_MS / 1000 + 1.5, took
    # the broker is back: the same range is read in full, nothing was skipped
    offsets = [
        o
        for chunk in reader(
            client, rng, fail_on_data_loss=fail_on_data_loss, poll_timeout_ms=POLL_TIMEOUT_MS
        )
        for o in (chunk.offsets if path == "columnar" else [r.offset for r in chunk])
    ]
    assert offsets == list(range(RECORDS))


def _batch_ids(ckpt: Path, kind: str) -> set[int]:
    d = ckpt / kind
    return {int(n) for n in os.listdir(d) if n.isdigit()} if d.is_dir() else set()


def _query(spark, servers, fail_on_data_loss, ckpt, trigger):
    df = (
        spark.readStream.format("kafkalite")
        .option("kafka.bootstrap.servers", servers)
        .option("subscribe", "stall")
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(RECORDS // 2))
        .option("failOnDataLoss", fail_on_data_loss)
        .option("kafkaConsumer.pollTimeoutMs", str(POLL_TIMEOUT_MS))
        .load()
    )
    return (
        df.writeStream.format("noop")
        .option("checkpointLocation", str(ckpt))
        .trigger(**trigger)
        .start()
    )


def test_a_stalled_broker_fails_the_task_and_the_checkpoint_keeps_the_records(
    spark, stalled_broker, tmp_path
):
    servers = stalled_broker.bootstrap_servers
    ckpt = tmp_path / "ckpt"
    first = _query(spark, servers, "true", ckpt, {"availableNow": True})
    assert first.awaitTermination(120) and first.exception() is None
    # un-commit batch 1: a restarted query re-runs it from the offset log (its start is batch 0's
    # end) straight away, so its task is the first thing to talk to the broker
    assert _batch_ids(ckpt, "offsets") == {0, 1} and _batch_ids(ckpt, "commits") == {0, 1}
    for name in ("1", ".1.crc"):
        (ckpt / "commits" / name).unlink(missing_ok=True)
    # failOnDataLoss=false is the setting that used to skip the unread rest of the range silently
    # (true mislabelled the timeout as data loss); the range-read test above covers both settings
    for fail in ("false",):
        run_ckpt = tmp_path / f"ckpt-{fail}"
        shutil.copytree(ckpt, run_ckpt)
        with _Stopped(stalled_broker.proc):
            query = _query(spark, servers, fail, run_ckpt, {"processingTime": "1 second"})
            try:
                with pytest.raises(Exception, match=r"Timed out after 2000 ms") as info:
                    assert not query.awaitTermination(60), "the query did not fail"
            finally:
                query.stop()
        assert "Data loss" not in str(info.value)
        assert _batch_ids(run_ckpt, "commits") == {0}, "the checkpoint moved past unread records"
        again = _query(spark, servers, fail, run_ckpt, {"availableNow": True})
        assert again.awaitTermination(120) and again.exception() is None
        assert sum(p["numInputRows"] for p in again.recentProgress) == RECORDS // 2
        assert _batch_ids(run_ckpt, "commits") == {0, 1}
