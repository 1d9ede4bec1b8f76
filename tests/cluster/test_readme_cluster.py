"""The README's cluster blocks, run as written and in order: `kafkalite cluster up` (its own ZooKeeper and
three brokers, on free ports standing in for 2181 and 9093-9095), a replicated topic, and a reassignment
that drains broker 3. The single-node blocks run in tests/unit/test_readme.py.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
from readme_runner import Sandbox, readme_blocks, run_in_order

pytestmark = pytest.mark.cluster


def test_readme_cluster_blocks_run_in_order(tmp_path: Path) -> None:
    if shutil.which("java") is None and os.environ.get("CI") != "true":
        pytest.skip("ZooKeeper needs java")
    blocks = [b for b in readme_blocks() if b.shell and not b.skipped and b.room == "cluster"]
    assert blocks and blocks[0].until is not None  # `cluster up` first, in the background
    box = Sandbox(tmp_path / "checkout")
    try:
        run_in_order(blocks, box)
    finally:
        box.close()
