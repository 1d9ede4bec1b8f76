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


# (api key, min version, max version) of every API the broker handles in cluster mode, taken from the
# table before broker/apis was grouped into family subpackages: the move must not add, lose or
# narrow any of them
CLUSTER_TABLE = [
    (0, 0, 11), (1, 0, 18), (2, 0, 10), (3, 0, 12), (4, 0, 7), (5, 0, 4), (6, 0, 8), (7, 0, 3),
    (8, 0, 9), (9, 0, 9), (10, 0, 4), (11, 0, 9), (12, 0, 4), (13, 0, 5), (14, 0, 5), (15, 0, 5),
    (16, 0, 5), (17, 0, 1), (18, 0, 4), (19, 0, 7), (20, 0, 6), (21, 0, 2), (22, 0, 4), (23, 0, 4),
    (24, 0, 5), (25, 0, 3), (26, 0, 3), (27, 0, 1), (28, 0, 3), (29, 0, 3), (30, 0, 3), (31, 0, 3),
    (32, 0, 4), (33, 0, 2), (34, 0, 2), (35, 0, 4), (36, 0, 2), (37, 0, 3), (38, 0, 2), (39, 0, 2), (40, 0, 2), (41, 0, 2), (42, 0, 2), (43, 0, 2),
    (44, 0, 1), (45, 0, 0), (46, 0, 0), (47, 0, 0), (48, 0, 1), (49, 0, 1), (50, 0, 0), (51, 0, 0),
    (56, 0, 3), (60, 0, 1), (61, 0, 0), (65, 0, 0), (66, 0, 1), (68, 0, 1), (69, 0, 1), (75, 0, 0),
    (76, 0, 1), (77, 0, 1), (78, 0, 2), (79, 0, 2), (83, 0, 0), (84, 0, 0), (85, 0, 0), (86, 0, 0),
    (87, 0, 0), (90, 0, 1), (91, 0, 0), (92, 0, 0),
]  # fmt: skip
# the inter-broker APIs a single-node broker leaves out (CLUSTER_ONLY); ElectLeaders and the two
# reassignment APIs (43, 45, 46) are served on one node, as a one-broker Kafka serves them (issue 31)
CLUSTER_ONLY_KEYS = {4, 5, 6, 7, 56, 83, 84, 85, 86, 87}


def test_the_real_table_covers_the_same_api_keys_and_versions_as_before_the_family_move() -> None:
    assert DispatchTable.discover(cluster_mode=True).version_ranges() == CLUSTER_TABLE
    single = [r for r in CLUSTER_TABLE if r[0] not in CLUSTER_ONLY_KEYS]
    assert DispatchTable.discover().version_ranges() == single


def test_the_hot_apis_keep_their_hand_written_codecs() -> None:
    table = DispatchTable.discover()
    for key in (0, 1):  # Produce, Fetch
        entry = table.get(key)
        assert entry is not None
        assert entry.decode_request is not None and entry.encode_response is not None


def _tree(tmp_path: Path, name: str, files: dict[str, str]) -> str:
    """A handler package with subpackages: `files` maps a relative path ("data/produce.py") to text."""
    root = tmp_path / name
    for rel, text in {"__init__.py": '"""test handlers"""\n', **files}.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if not (path.parent / "__init__.py").exists():
            (path.parent / "__init__.py").write_text('"""a family"""\n')
        path.write_text(text)
    sys.path.insert(0, str(tmp_path))
    return name


def test_handlers_in_family_subpackages_are_found_and_helpers_are_skipped(tmp_path: Path) -> None:
    pkg = _tree(
        tmp_path,
        "family_apis",
        {
            "metadata/metadata.py": HANDLER.format(cluster_only=False),
            "metadata/_helpers.py": '"""no handler here"""\nX = 1\n',
            "_shared/anything.py": '"""no handler here"""\nX = 1\n',
        },
    )
    table = DispatchTable.discover(pkg)
    entry = table.get(3)
    assert entry is not None and entry.module.__name__ == "family_apis.metadata.metadata"
    assert len(table.entries) == 1


def test_one_api_key_in_two_families_fails_discovery(tmp_path: Path) -> None:
    handler = HANDLER.format(cluster_only=False)
    pkg = _tree(tmp_path, "twice_apis", {"a/metadata.py": handler, "b/metadata_again.py": handler})
    with pytest.raises(ValueError, match="handled by both"):
        DispatchTable.discover(pkg)


def test_a_nested_module_without_a_handler_fails_discovery(tmp_path: Path) -> None:
    pkg = _tree(tmp_path, "idle_nested_apis", {"groups/helpers.py": '"""no handler"""\nX = 1\n'})
    with pytest.raises(TypeError, match="defines no API"):
        DispatchTable.discover(pkg)


def test_a_family_subpackage_that_fails_to_import_fails_discovery(tmp_path: Path) -> None:
    pkg = _tree(
        tmp_path,
        "broken_family_apis",
        {"data/produce.py": HANDLER.format(cluster_only=False)},
    )
    (tmp_path / pkg / "data" / "__init__.py").write_text("import kafkalite.no_such_module\n")
    with pytest.raises(ImportError):
        DispatchTable.discover(pkg)


def test_a_nested_handler_module_that_fails_to_import_fails_discovery(tmp_path: Path) -> None:
    pkg = _tree(tmp_path, "broken_nested_apis", {"data/produce.py": "import kafkalite.no_such\n"})
    with pytest.raises(ImportError):
        DispatchTable.discover(pkg)
