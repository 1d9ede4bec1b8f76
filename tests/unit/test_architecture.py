"""House rules from ARCHITECTURE.md that a machine can check: import direction and module docstrings.

Arrows only point down the package table; every module says what it owns in a docstring.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "kafkalite"

# package -> packages it may import (besides itself and the stdlib/third-party world)
ALLOWED: dict[str, set[str]] = {
    "protocol": set(),
    "records": {"protocol"},
    "storage": {"records", "protocol"},
    "security": {"protocol"},
    "coordinator": {"protocol", "records"},
    "cluster": {"storage", "security", "protocol", "records"},
    "broker": {"protocol", "records", "storage", "security", "coordinator", "cluster"},
    "web": {"protocol", "records", "storage", "security", "coordinator", "cluster", "broker"},
    "client": {"protocol", "records"},
    "spark": {"client", "protocol", "records"},
    "cli": {
        "protocol",
        "records",
        "storage",
        "security",
        "coordinator",
        "cluster",
        "broker",
        "client",
        "spark",
        "web",
        "testing",
        "local_cluster",
        "zkserver",
    },
}


def _modules() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py"))


def _package_of(path: Path) -> str | None:
    rel = path.relative_to(SRC).parts
    return rel[0] if len(rel) > 1 else None


def _kafkalite_imports(tree: ast.AST) -> list[str]:
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("kafkalite.")]
        elif (
            isinstance(node, ast.ImportFrom)
            and node.module
            and node.level == 0
            and node.module.startswith("kafkalite.")
        ):
            found.append(node.module)
    return found


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_imports_point_down_the_table(path: Path) -> None:
    pkg = _package_of(path)
    if pkg is None or pkg not in ALLOWED:
        return
    tree = ast.parse(path.read_text(), str(path))
    for mod in _kafkalite_imports(tree):
        target = mod.split(".")[1]
        assert target == pkg or target in ALLOWED[pkg], (
            f"{path.relative_to(SRC)} imports {mod}: {pkg} may import only {sorted(ALLOWED[pkg])}"
        )


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_every_module_has_a_docstring(path: Path) -> None:
    tree = ast.parse(path.read_text(), str(path))
    doc = ast.get_docstring(tree)
    assert doc and doc.strip(), (
        f"{path.relative_to(SRC)} has no module docstring saying what it owns"
    )
