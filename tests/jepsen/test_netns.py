"""The namespace harness itself: a partition cuts exactly the pairs it names (both ways, by timeout, not
by refusal), a heal restores them, nothing routes out of the namespaces, and everything is removed after
a run that fails half-way. Skips (saying why) without root, `ip` or `nft`.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from kafkalite.jepsen.netns import Network, unavailable_reason

pytestmark = pytest.mark.skipif(unavailable_reason() is not None, reason=str(unavailable_reason()))

PORT = 9000
LISTEN = (
    "import socket\n"
    "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
    f"s.bind(('0.0.0.0', {PORT})); s.listen(64); print('up', flush=True)\n"
    "while True: s.accept()[0].close()\n"
)


def _ip(*args: str) -> str:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=True).stdout


def test_partition_cuts_named_pairs_and_heal_restores_them() -> None:
    with Network(["a", "b", "c"]) as net:
        procs = [
            subprocess.Popen(
                [*net.exec_prefix(n), sys.executable, "-c", LISTEN], stdout=subprocess.PIPE
            )
            for n in net.nodes
        ]
        try:
            for p in procs:
                assert p.stdout is not None and p.stdout.readline() == b"up\n"
            assert all(net.reaches(None, n, PORT) for n in net.nodes)  # clients reach every node
            net.partition(["a"], ["b"])
            began = time.monotonic()
            assert not net.reaches("a", "b", PORT, 0.5)
            assert time.monotonic() - began >= 0.45, "a cut link times out; it does not refuse"
            assert not net.reaches("b", "a", PORT, 0.5)
            assert net.reaches("a", "c", PORT) and net.reaches("c", "b", PORT)
            assert net.reaches(None, "a", PORT) and net.reaches(None, "b", PORT)
            net.heal()
            assert net.reaches("a", "b", PORT) and net.reaches("b", "a", PORT)
            # a process started with `ip netns exec` is the process itself: signals reach it
            assert net.namespaces["a"] in _ip("netns", "identify", str(procs[0].pid))
            # no way out: only the bridge's subnet is routed inside a namespace
            routes = _ip("-n", net.namespaces["a"], "route").strip().splitlines()
            assert len(routes) == 1 and routes[0].startswith(str(net.subnet)), routes
        finally:
            for p in procs:
                p.kill()
                p.wait()
    assert net.leftovers() == []


def test_everything_is_removed_after_a_failed_run() -> None:
    net = Network(["x", "y"])
    with pytest.raises(RuntimeError, match="half-way"), net:
        net.partition(["x"], ["y"])
        assert net.leftovers()
        raise RuntimeError("the run failed half-way")
    assert net.leftovers() == []
    assert net.prefix not in _ip("netns", "list")
    assert net.prefix not in _ip("link")
    assert str(net.subnet) not in _ip("route")
