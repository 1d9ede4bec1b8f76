"""A Partition's storage Log is private: outside storage, code reads the offsets it needs through the
Partition (log start, log end, HW, LSO, size, ...) and appends / reads through the ReplicaManager."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[3] / "src" / "kafkalite"
PACKAGES = ("broker", "web", "cli", "client", "coordinator", "spark", "cluster")
ALLOWED: set[str] = set()


def test_no_code_outside_storage_reaches_a_partitions_log() -> None:
    reached = []
    for pkg in PACKAGES:
        for path in sorted((SRC / pkg).rglob("*.py")):
            rel = path.relative_to(SRC).as_posix()
            if rel in ALLOWED:
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Attribute) and node.attr == "log":
                    reached.append(f"{rel}:{node.lineno} {ast.unparse(node)}")
    assert reached == []
