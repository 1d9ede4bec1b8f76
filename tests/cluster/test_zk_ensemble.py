"""A ZooKeeper ensemble on loopback (three servers: server.N lines, myid, quorum and election ports):
it elects a leader, serves writes, keeps serving with one server killed and stops without a quorum.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from kafkalite.zkserver import ZooKeeperEnsemble, ZooKeeperMissing, four_letter

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


def _modes(ensemble: ZooKeeperEnsemble) -> dict[int, str]:
    out = {}
    for i, s in ensemble.servers.items():
        srvr = four_letter(s.host, s.port, "srvr")
        out[i] = next((ln.split(": ")[1] for ln in srvr.splitlines() if ln.startswith("Mode")), "-")
    return out


def test_ensemble_keeps_serving_with_a_majority(tmp_path: Path) -> None:
    ensemble = ZooKeeperEnsemble(tmp_path, 3)
    try:
        ensemble.start()
    except ZooKeeperMissing as exc:
        pytest.skip(str(exc))
    try:
        deadline = time.monotonic() + 30  # start() returns once a majority serves; the third joins
        while sorted((modes := _modes(ensemble)).values()) != ["follower", "follower", "leader"]:
            assert time.monotonic() < deadline, modes
            time.sleep(0.1)
        zk = KazooClient(hosts=ensemble.connect_string, timeout=10)
        zk.start(timeout=15)
        zk.create("/ensemble", b"one")
        leader = next(i for i, m in modes.items() if m == "leader")
        ensemble.servers[leader].kill()
        deadline = time.monotonic() + 30
        while sorted(_modes(ensemble).values()) != ["-", "follower", "leader"]:
            assert time.monotonic() < deadline, _modes(ensemble)
            time.sleep(0.1)
        zk.retry(zk.set, "/ensemble", b"two")  # the two left are a quorum
        assert zk.retry(zk.get, "/ensemble")[0] == b"two"
        zk.stop()
        zk.close()
        ensemble.servers[next(i for i in modes if i != leader)].kill()
        deadline = time.monotonic() + 30
        while any(s.serving for s in ensemble.servers.values()):  # one of three: no quorum
            assert time.monotonic() < deadline, _modes(ensemble)
            time.sleep(0.1)
    finally:
        ensemble.stop()
