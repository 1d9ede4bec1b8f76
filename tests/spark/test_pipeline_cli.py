"""`kafkalite pipeline` twice in a row against one running broker: each run gets its own topics and
checkpoints, both check out exact, and each writes its summary and its chart into its own run folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kafkalite.cli.main import main as cli

pytestmark = pytest.mark.spark


def test_pipeline_runs_twice_on_one_broker(
    spark: Any, broker: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["pipeline", "--bootstrap-server", broker.bootstrap_servers, "--work-dir", str(tmp_path)]
    args += ["--events", "150", "--minutes", "3", "--max-offsets-per-trigger", "500"]
    for _ in range(2):
        assert cli(args) == 0
    out = capsys.readouterr().out
    assert out.count("Parquet and topic match the expected aggregates") == 2
    runs = sorted(p for p in tmp_path.iterdir() if p.is_dir())
    assert len(runs) == 2
    for run in runs:
        svg = run / "page-views.svg"
        assert svg.exists() and "<polyline" in svg.read_text()
        assert str(run) in out
    assert "total" in out  # the summary table, not a page per window
    assert cli([*args, "--run-id", runs[0].name]) == 2  # a run id is not reused
    assert "already has results" in capsys.readouterr().err
