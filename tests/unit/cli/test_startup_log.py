"""`kafkalite serve` on a fresh data dir says in a few INFO lines what it loaded: at most 15 lines up to
"started", among them a typo'd property's "did you mean", the listener and the log recovery summary.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_fresh_start_is_at_most_15_lines_with_the_typo_warning(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    argv = ["serve", "--data-dir", str(tmp_path / "d"), "--listen", "127.0.0.1:0"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "kafkalite.cli.main", *argv, "--override", "num.partiton=3"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert proc.stdout is not None and proc.stderr is not None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    sel.register(proc.stderr, selectors.EVENT_READ)
    out: list[str] = []
    err: list[str] = []
    deadline = time.monotonic() + 60
    try:
        while not any(" started: " in ln for ln in err) or not out:
            assert time.monotonic() < deadline, "".join(err)
            assert proc.poll() is None, "".join(err)
            for key, _ in sel.select(timeout=1):
                line = key.fileobj.readline()  # type: ignore[union-attr]
                (out if key.fileobj is proc.stdout else err).append(line)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
    assert out[0].startswith("kafkalite broker 0 ready on 127.0.0.1:")
    logged = [ln for ln in err if ln.strip()]
    assert len(logged) <= 15, "".join(logged)
    text = "".join(logged)
    assert (
        "unknown config num.partiton is not read by kafkalite; did you mean num.partitions?" in text
    )
    assert "listening on 127.0.0.1:" in text and "loaded 0 logs" in text
    assert "transaction coordinator loaded 50 __transaction_state partition(s)" in text
    assert "loaded at coordinator epoch" not in text  # per partition: DEBUG only
