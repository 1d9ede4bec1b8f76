"""Cluster tests: a real ZooKeeper (Debian's `zookeeper`) for the whole session, a fresh chroot per test.

In CI (CI=true) a missing ZooKeeper fails the run instead of skipping: the test script installs it.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from typing import Any

import pytest

from kafkalite.zkserver import ZooKeeperMissing, ZooKeeperServer

_chroots = itertools.count(1)


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: Any) -> Iterator[ZooKeeperServer]:
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper"))
    try:
        server.start()
    except ZooKeeperMissing as exc:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(str(exc))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def zk_connect(zookeeper: ZooKeeperServer) -> str:
    """A connect string with a chroot of its own, so tests never see each other's znodes."""
    return f"{zookeeper.connect_string}/t{os.getpid()}-{next(_chroots)}"
