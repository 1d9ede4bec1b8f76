"""A writer process appending with flush.messages=1 is SIGKILLed at a random moment; everything it
reported as flushed is present after restart, and appends continue at the right offset."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from storage_helpers import batches, read_all

from kafkalite.records.batch import build_batch
from kafkalite.storage import LogConfig, LogManager

WRITER = Path(__file__).with_name("crash_writer.py")


def _run_and_kill(log_dir: Path, tag: str, rng: random.Random) -> list[tuple[int, str]]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.Popen(
        [sys.executable, str(WRITER), str(log_dir), tag],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert proc.stdout is not None
    # wait for the first report so the kill lands while appends are in flight
    first = proc.stdout.readline()
    deadline = time.monotonic() + rng.uniform(0.05, 0.6)
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL, err.decode()[-2000:]
    text = (first + out).decode()
    reported = []
    for line in text.split("\n")[:-1]:  # a torn last line (no newline) was never fully reported
        off, value = line.split(" ")
        reported.append((int(off), value))
    return reported


def _verify(log_dir: Path, reported: list[tuple[int, str]]) -> int:
    mgr = LogManager([log_dir], LogConfig(segment_bytes=16 * 1024, index_interval_bytes=512))
    mgr.startup()
    try:
        lg = mgr.get_log("crash", 0)
        assert lg is not None
        present = {r.offset: r.value for b in batches(read_all(lg)) for r in b.records}
        for off, value in reported:
            assert present.get(off) == value.encode(), f"flushed offset {off} lost"
            assert present.get(off + 1) == value.encode() + b"!"
        assert sorted(present) == list(range(len(present)))  # no holes, no garbage
        leo = lg.log_end_offset
        assert leo == len(present)
        assert lg.append(build_batch([(b"k", b"after")])).first_offset == leo
        return leo + 1
    finally:
        mgr.shutdown()


def _rounds(tmp_path: Path, rounds: int, seed: int) -> None:
    print(f"seed={seed}")  # shown on failure, to replay the same kill timings
    rng = random.Random(seed)
    log_dir = tmp_path / "data"
    total = 0
    for r in range(rounds):
        reported = _run_and_kill(log_dir, f"r{r}", rng)
        assert reported, "the writer reported nothing before being killed"
        assert min(o for o, _ in reported) >= total
        total = _verify(log_dir, reported)


def test_sigkill_keeps_every_flushed_append(tmp_path: Path) -> None:
    _rounds(tmp_path, rounds=3, seed=int(time.time()))


# each round starts a writer process (about a second); KAFKALITE_CRASH_ROUNDS=50 is a longer run
MANY_ROUNDS = int(os.environ.get("KAFKALITE_CRASH_ROUNDS", "10"))


@pytest.mark.slow
def test_sigkill_many_rounds(tmp_path: Path) -> None:
    _rounds(tmp_path, rounds=MANY_ROUNDS, seed=12345)
