"""The dispatch table is built at startup from broker/apis: a handler module that cannot be imported, or
that defines no handler, fails the start loudly; cluster-only APIs stay out of a single-node broker.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kafkalite.broker.dispatch import DispatchTable

HANDLER = """
API_KEY = 3
CLUSTER_ONLY = {cluster_only}

async def handle(ctx, request):
    return None
"""


def _package(tmp_path: Path, name: str, modules: dict[str, str]) -> str:
    pkg = tmp_path / name
    pkg.mkdir()
    (pkg / "__init__.py").write_text('"""test handlers"""\n')
    for mod, text in modules.items():
        (pkg / f"{mod}.py").write_text(text)
    sys.path.insert(0, str(tmp_path))
    return name


@pytest.fixture(autouse=True)
def _restore_path():
    saved = list(sys.path)
    yield
    sys.path[:] = saved


def test_a_handler_module_that_fails_to_import_fails_discovery(tmp_path: Path) -> None:
    pkg = _package(tmp_path, "broken_apis", {"metadata": "import kafkalite.no_such_module\n"})
    with pytest.raises(ImportError):
        DispatchTable.discover(pkg)


def test_a_module_without_a_handler_fails_discovery(tmp_path: Path) -> None:
    pkg = _package(tmp_path, "idle_apis", {"helpers": '"""no handler here"""\nX = 1\n'})
    with pytest.raises(TypeError, match="defines no API"):
        DispatchTable.discover(pkg)


def test_cluster_only_handlers_are_offered_in_cluster_mode_only(tmp_path: Path) -> None:
    pkg = _package(tmp_path, "mode_apis", {"metadata": HANDLER.format(cluster_only=True)})
    assert DispatchTable.discover(pkg).get(3) is None
    assert DispatchTable.discover(pkg, cluster_mode=True).get(3) is not None


def test_the_real_table_loads_and_offers_offset_for_leader_epoch() -> None:
    table = DispatchTable.discover()
    assert table.get(23) is not None  # OffsetForLeaderEpoch
    assert table.get(0) is not None and table.get(1) is not None
