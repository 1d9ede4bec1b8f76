"""`kafkalite pipeline`'s output place and chart note, without Spark: results never land in the current
directory, and a run without matplotlib says that only the SVG was written.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import pytest

from kafkalite.cli.chart import write_chart
from kafkalite.cli.main import build_parser
from kafkalite.cli.pipeline import chart_note


def test_default_work_dir_is_under_the_temp_dir_and_out_names_it() -> None:
    parser = build_parser()
    a = parser.parse_args(["pipeline"])
    assert Path(a.work_dir) == Path(tempfile.gettempdir()) / "kafkalite-pipeline"
    assert parser.parse_args(["pipeline", "--out", "/x"]).work_dir == "/x"
    assert parser.parse_args(["pipeline", "--work-dir", "/y"]).work_dir == "/y"


def test_without_matplotlib_the_note_says_svg_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    charts = write_chart(tmp_path / "page-views", "t", ["00:00", "00:01"], {"home": [1.0, 2.0]})
    assert charts == [tmp_path / "page-views.svg"] and charts[0].read_text().startswith("<svg")
    note = chart_note(charts)
    assert "SVG only: matplotlib is not installed" in note and str(charts[0]) in note
    with_png = [tmp_path / "page-views.svg", tmp_path / "page-views.png"]
    assert "SVG only" not in chart_note(with_png)
