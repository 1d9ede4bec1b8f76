"""House rules from ARCHITECTURE.md that a machine can check: import direction, docstrings, cycles, size.

Arrows only point down the package table (top-level modules included); every module says what it owns in
a docstring; no import cycle inside a package but those listed; no module past 600 lines but those listed.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "kafkalite"

# package -> packages it may import (besides itself and the stdlib/third-party world)
ALLOWED: dict[str, set[str]] = {
    "protocol": set(),
    "records": {"protocol"},
    "storage": {"records", "protocol"},
    "security": {"protocol"},
    "schemas": {"protocol"},
    "filters": {"records", "protocol"},
    "coordinator": {"protocol", "records"},
    "cluster": {"storage", "security", "protocol", "records"},
    "broker": {
        "protocol",
        "records",
        "storage",
        "security",
        "schemas",
        "filters",
        "coordinator",
        "cluster",
    },
    "web": {
        "protocol",
        "records",
        "storage",
        "security",
        "schemas",
        "filters",
        "coordinator",
        "cluster",
        "broker",
    },
    "client": {"filters", "protocol", "records"},
    "spark": {"client", "filters", "schemas", "protocol", "records"},
    "cli": {
        "protocol",
        "records",
        "filters",
        "storage",
        "security",
        "schemas",
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
    # the fault benches drive clusters from outside, as a user would: processes, the wire, the CLI
    "jepsen": {"protocol", "records", "client", "cli", "local_cluster", "zkserver", "testing_tls"},
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


# -- the modules at the top of the package -------------------------------------------------------------
# test and run helpers above broker, beside the CLI (which may import them); __init__ offers Broker
TOP_LEVEL_ALLOWED: dict[str, set[str]] = {
    "zkserver": set(),
    "testing_tls": set(),
    # cli: wait_for_controller asks each broker with the CLI's blocking wire client (cli.wire)
    "local_cluster": {"zkserver", "protocol", "cli"},
    "testing": {
        "protocol",
        "records",
        "storage",
        "security",
        "coordinator",
        "cluster",
        "broker",
        "web",
        "local_cluster",
        "testing_tls",
        "zkserver",
    },
    "__init__": {"testing"},
}


@pytest.mark.parametrize("name", sorted(TOP_LEVEL_ALLOWED))
def test_top_level_modules_point_down(name: str) -> None:
    path = SRC / f"{name}.py"
    tree = ast.parse(path.read_text(), str(path))
    for mod in _kafkalite_imports(tree):
        target = mod.split(".")[1]
        assert target in TOP_LEVEL_ALLOWED[name], (
            f"{name}.py imports {mod}: it may import only {sorted(TOP_LEVEL_ALLOWED[name])}"
        )


def test_every_top_level_module_has_a_place() -> None:
    top = {p.stem for p in SRC.glob("*.py")}
    assert top == set(TOP_LEVEL_ALLOWED), (
        f"place in TOP_LEVEL_ALLOWED: {top ^ set(TOP_LEVEL_ALLOWED)}"
    )


# -- import cycles inside a package ------------------------------------------------------------------
# Module-level imports only (those under `if TYPE_CHECKING:` or inside a function run later or
# never). Each cycle allowed today, as the set of its modules, with why it is there; a new one fails.
# None today; an entry reads: frozenset({"kafkalite.x.a", "kafkalite.x.b"}): "why it must stay".
ALLOWED_CYCLES: dict[frozenset[str], str] = {}


def _module_name(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    return ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _executed(nodes: list[ast.AST]) -> Iterator[ast.AST]:
    """The statements that run when the module is imported (not function bodies, not TYPE_CHECKING)."""
    for node in nodes:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            yield from _executed(list(node.orelse))
            continue
        yield node
        yield from _executed(
            [c for c in ast.iter_child_nodes(node) if isinstance(c, (ast.stmt, ast.excepthandler))]
        )


def _import_graph() -> dict[str, set[str]]:
    """module -> the kafkalite modules it imports at module level."""
    paths = {_module_name(p): p for p in _modules()}
    graph: dict[str, set[str]] = {}
    for me, path in paths.items():
        package = me if path.name == "__init__.py" else me.rpartition(".")[0]
        out: set[str] = set()
        for node in _executed(list(ast.parse(path.read_text(), str(path)).body)):
            if isinstance(node, ast.Import):
                out.update(a.name for a in node.names if a.name in paths)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    mod = ".".join([*base, node.module] if node.module else base)
                else:
                    mod = node.module or ""
                for a in node.names:
                    sub = f"{mod}.{a.name}"
                    if sub in paths:
                        out.add(sub)
                    elif mod in paths:
                        out.add(mod)
        out.discard(me)
        graph[me] = out
    return graph


def _package_cycles() -> list[frozenset[str]]:
    """Strongly connected components (more than one module) of each package's own import graph."""
    graph = _import_graph()

    def pkg(m: str) -> str:
        return m.split(".")[1] if m.count(".") else ""

    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if pkg(w) != pkg(v) or not pkg(v):
                continue
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc: set[str] = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                scc.add(w)
                if w == v:
                    break
            if len(scc) > 1:
                found.append(frozenset(scc))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return found


def test_no_import_cycle_inside_a_package_but_those_allowed() -> None:
    cycles = _package_cycles()
    new = [sorted(c) for c in cycles if c not in ALLOWED_CYCLES]
    assert not new, f"import cycles inside a package (break them, or allow with a reason): {new}"
    gone = [sorted(c) for c in ALLOWED_CYCLES if c not in cycles]
    assert not gone, f"these allowed cycles are gone: remove them from ALLOWED_CYCLES: {gone}"


# -- rooms stay small --------------------------------------------------------------------------------
MAX_LINES = 600
# modules allowed past MAX_LINES while they wait for their split (none left; this list only shrinks)
TOO_LONG_FOR_NOW: frozenset[str] = frozenset()


def test_no_module_past_600_lines_but_those_listed() -> None:
    long = {
        str(p.relative_to(SRC)): n
        for p in _modules()
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    new = {m: n for m, n in long.items() if m not in TOO_LONG_FOR_NOW}
    assert not new, f"modules past {MAX_LINES} lines: split them along a seam they have: {new}"
    done = sorted(TOO_LONG_FOR_NOW - set(long))
    assert not done, f"now within {MAX_LINES} lines: remove from TOO_LONG_FOR_NOW: {done}"
