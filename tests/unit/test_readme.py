"""The README's examples run as written, in order, on a fresh data dir: every shell block not marked for the
cluster or Spark tests (or skipped, with a reason) runs here, and its exit code and documented output are
checked. The cluster blocks run in tests/cluster/test_readme_cluster.py. See readme_runner for the markers.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from readme_runner import KNOWN_WORDS, Sandbox, readme_blocks, run_in_order


@pytest.fixture
def sandbox(tmp_path: Path) -> Iterator[Sandbox]:
    box = Sandbox(tmp_path / "checkout")
    try:
        yield box
    finally:
        box.close()


def test_every_shell_block_has_a_home() -> None:
    blocks = [b for b in readme_blocks() if b.shell]
    assert len(blocks) >= 7
    for b in blocks:
        unknown = set(b.words) - KNOWN_WORDS
        assert not unknown, f"{b}: unknown marker word(s) {unknown}"
        assert not b.skipped or b.skip_reason, f"{b}: a skipped block says why"
        assert ("background" in b.words) == (b.until is not None), f"{b}: background until 'TEXT'"
    rooms = {b.room for b in blocks if not b.skipped}
    assert {"single", "cluster"} <= rooms


def test_readme_single_node_blocks_run_in_order(sandbox: Sandbox) -> None:
    blocks = [b for b in readme_blocks() if b.shell and not b.skipped and b.room == "single"]
    assert blocks[0].until is not None  # the Quick start's broker comes first
    run_in_order(blocks, sandbox)
    # the consumer read both records the Quick start produced, with nothing but kafkalite installed
    assert (sandbox.base / "data").is_dir()
