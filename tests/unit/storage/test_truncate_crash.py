"""A process appending and truncating is SIGKILLed at random moments; each restart recovers a valid
log: contiguous batches, consistent indexes, an epoch cache inside the log, appends continue."""

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
from kafkalite.storage import Log, LogConfig

WRITER = Path(__file__).with_name("crash_truncate_writer.py")
CFG = LogConfig(segment_bytes=2048, index_interval_bytes=128)


def _check(lg: Log) -> None:
    offsets = [(b.base_offset, b.last_offset_delta) for b in batches(read_all(lg))]
    expected = lg.log_start_offset
    for base, delta in offsets:
        assert base == expected
        expected = base + delta + 1
    assert expected == lg.log_end_offset
    entries = lg.leader_epoch_cache.entries()
    assert all(start < lg.log_end_offset for _, start in entries)
    first_epochs = {b.base_offset: b.partition_leader_epoch for b in batches(read_all(lg))}
    for epoch, start in entries:
        assert first_epochs.get(start) == epoch
    for s in lg.segments:
        for off, pos in s.offset_index.entries():
            found = s.find_batch(off)
            assert found is not None and found[0] == pos


@pytest.mark.timeout(120)
def test_sigkill_during_truncation_recovers(tmp_path: Path) -> None:
    rng = random.Random(int(os.environ.get("KAFKALITE_CRASH_SEED", "7")))
    path = tmp_path / "t-0"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    for round_ in range(6):
        proc = subprocess.Popen(
            [sys.executable, str(WRITER), str(path), str(round_)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"ready\n", proc.stderr.read() if proc.stderr else ""
        time.sleep(rng.uniform(0.05, 0.4))
        proc.send_signal(signal.SIGKILL)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == -signal.SIGKILL, err.decode()[-2000:]
        lg = Log.open(path, CFG)
        _check(lg)
        leo = lg.log_end_offset
        lg.append_as_leader(bytearray(build_batch([(None, b"after")])), lg.latest_epoch + 1)
        assert lg.log_end_offset == leo + 1
        _check(lg)
        lg.close()
