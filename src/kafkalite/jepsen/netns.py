"""Network: one Linux network namespace per node on a bridge of its own, addresses from 198.18.0.0/15
(RFC 2544), partitions as nftables input drops inside the namespaces, TCP probes from inside them.

Made by the test as root with `ip netns` / `ip link` / `nft`; no route leads out (traffic stays on this
machine); every name carries a pid-based prefix and everything is removed on close, atexit included.
"""

from __future__ import annotations

import atexit
import ctypes
import ipaddress
import os
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterable, Sequence

CLONE_NEWNET = 0x40000000
_TABLE = "kljepsen"
BENCH_RANGE = ipaddress.IPv4Network("198.18.0.0/15")


class NetnsUnavailable(RuntimeError):
    """Not root, or `ip` / `nft` missing: the harness cannot build its network."""


def unavailable_reason() -> str | None:
    """Why namespaces cannot be made here, or None when they can."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool, pkg in (("ip", "iproute2"), ("nft", "nftables")):
        if shutil.which(tool) is None:
            return f"`{tool}` is missing: apt-get install {pkg}"
    return None


def run(*args: str, ns: str | None = None, stdin: str | None = None, check: bool = True) -> str:
    """One command (inside namespace `ns` if given); a failure raises with its stderr."""
    argv = (["ip", "netns", "exec", ns] if ns else []) + list(args)
    p = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=30)
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {p.stderr.strip() or p.returncode}")
    return p.stdout


def _free_subnet() -> ipaddress.IPv4Network:
    """A /24 of the benchmarking range no interface here uses, starting from one the pid picks."""
    used = [
        ipaddress.IPv4Interface(w).network
        for w in run("ip", "-o", "-4", "addr", "show").split()
        if w[:1].isdigit() and "/" in w
    ]
    nets = list(BENCH_RANGE.subnets(new_prefix=24))
    start = os.getpid() % len(nets)
    for i in range(len(nets)):
        net = nets[(start + i) % len(nets)]
        if not any(net.overlaps(u) for u in used):
            return net
    raise NetnsUnavailable("no free /24 left in 198.18.0.0/15")


class Network:
    """A bridge, and for each node name a namespace with a veth into it and an address. The root
    namespace holds the bridge's address, so clients here reach every node (and nodes reach it)."""

    def __init__(self, nodes: Sequence[str], *, prefix: str | None = None) -> None:
        reason = unavailable_reason()
        if reason:
            raise NetnsUnavailable(reason)
        self.prefix = prefix or f"kl{os.getpid()}"
        self.bridge = f"{self.prefix}br"
        self.nodes = list(nodes)
        self.namespaces = {n: f"{self.prefix}-{n}" for n in self.nodes}
        self._veths = {n: f"{self.prefix}v{i}" for i, n in enumerate(self.nodes)}
        self.subnet: ipaddress.IPv4Network | None = None
        self.addresses: dict[str, str] = {}
        self.root_address = ""
        self._blocked: dict[str, set[str]] = {n: set() for n in self.nodes}
        self._loss = 0  # percent of packets every node drops on input
        self._closed = True
        self._lock = threading.Lock()

    # -- life cycle ---------------------------------------------------------------------------

    def create(self) -> Network:
        self._closed = False
        atexit.register(self.close)
        try:
            self.subnet = _free_subnet()
            hosts = self.subnet.hosts()
            self.root_address = str(next(hosts))
            plen = self.subnet.prefixlen
            run("ip", "link", "add", self.bridge, "type", "bridge")
            run("ip", "addr", "add", f"{self.root_address}/{plen}", "dev", self.bridge)
            run("ip", "link", "set", self.bridge, "up")
            # while the bridge is down its route goes: this one keeps the subnet's packets here
            run("ip", "route", "add", "unreachable", str(self.subnet), "metric", "4000")
            for n in self.nodes:
                ns, veth, addr = self.namespaces[n], self._veths[n], str(next(hosts))
                self.addresses[n] = addr
                run("ip", "netns", "add", ns)
                run("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
                run("ip", "link", "set", veth, "master", self.bridge, "up")
                run("ip", "-n", ns, "addr", "add", f"{addr}/{plen}", "dev", "eth0")
                run("ip", "-n", ns, "link", "set", "eth0", "up")
                run("ip", "-n", ns, "link", "set", "lo", "up")
                # only the subnet's own route: no default route, nothing leaves this machine
                run(
                    "nft",
                    "-f",
                    "-",
                    ns=ns,
                    stdin=f"table inet {_TABLE} {{ chain input {{ type filter hook input "
                    "priority 0; policy accept; }; }\n",
                )
            self._wait_link_up()
        except BaseException:
            self.close()
            raise
        return self

    def _wait_link_up(self, timeout: float = 10.0) -> None:
        """Bridge ports pass traffic once forwarding; wait until root reaches every node's namespace."""
        deadline = time.monotonic() + timeout
        for n in self.nodes:
            sysfs = f"/sys/class/net/{self._veths[n]}"
            while (
                _read(f"{sysfs}/operstate") != "up" or _read(f"{sysfs}/brport/state") != "3"
            ):  # 3: BR_STATE_FORWARDING
                if time.monotonic() > deadline:
                    raise RuntimeError(f"bridge port of {n} is not forwarding after {timeout} s")
                time.sleep(0.05)

    def close(self) -> None:
        """Remove every namespace, veth and the bridge (idempotent; failures are only reported)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        atexit.unregister(self.close)
        for n in self.nodes:
            run("ip", "netns", "del", self.namespaces[n], check=False)  # takes the veth pair along
            run("ip", "link", "del", self._veths[n], check=False)
        run("ip", "link", "del", self.bridge, check=False)
        if self.subnet is not None:
            run(
                "ip", "route", "del", "unreachable", str(self.subnet), "metric", "4000", check=False
            )

    def __enter__(self) -> Network:
        return self.create()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def leftovers(self) -> list[str]:
        """Namespaces, links and routes of this run still present (empty after close)."""
        names = run("ip", "netns", "list").split() + run("ip", "-o", "link", "show").split()
        left = {x.split("@")[0].rstrip(":") for x in names if x.startswith(self.prefix)}
        if self.subnet is not None and str(self.subnet) in run("ip", "route", "show"):
            left.add(f"route {self.subnet}")
        return sorted(left)

    def exec_prefix(self, node: str) -> list[str]:
        """Argv prefix that runs a command in `node`'s namespace (`ip netns exec` execs: the pid
        of the started process is the command's own, so signals reach it)."""
        return ["ip", "netns", "exec", self.namespaces[node]]

    # -- faults -------------------------------------------------------------------------------

    def partition(self, side_a: Iterable[str], side_b: Iterable[str]) -> None:
        """No packet between any node of `side_a` and any of `side_b` (dropped on input, both ways:
        a connect times out, as on a real cut link). Adds to cuts already in force."""
        a, b = set(side_a), set(side_b)
        if a & b:
            raise ValueError(f"a node on both sides of a partition: {sorted(a & b)}")
        for x in a:
            self._blocked[x] |= b
        for y in b:
            self._blocked[y] |= a
        self._apply(a | b)

    def heal(self) -> None:
        """Lift every partition."""
        touched = {n for n, s in self._blocked.items() if s}
        for n in touched:
            self._blocked[n] = set()
        self._apply(touched)

    def blocked(self) -> dict[str, set[str]]:
        return {n: set(s) for n, s in self._blocked.items() if s}

    def set_loss(self, percent: int) -> None:
        """Every node drops `percent` % of the packets it receives, at random (0: none)."""
        if not 0 <= percent <= 100:
            raise ValueError(f"loss must be 0..100 %, not {percent}")
        self._loss = percent
        self._apply(self.nodes)

    def _apply(self, nodes: Iterable[str]) -> None:
        for n in nodes:
            loss = self._loss
            rules = (
                f"add rule inet {_TABLE} input numgen random mod 100 < {loss} drop\n"
                if loss
                else ""
            )
            rules += "".join(
                f"add rule inet {_TABLE} input ip saddr {self.addresses[peer]} drop\n"
                for peer in sorted(self._blocked[n])
            )
            run(
                "nft",
                "-f",
                "-",
                ns=self.namespaces[n],
                stdin=f"flush chain inet {_TABLE} input\n{rules}",
            )

    def set_bridge(self, up: bool) -> None:
        """Every port of the bridge down cuts each node from every other and from the clients (the
        root keeps its route to the silent bridge: nothing is sent elsewhere); up restores them."""
        for n in self.nodes:
            run("ip", "link", "set", self._veths[n], "up" if up else "down")
        if up:
            self._wait_link_up()

    # -- probes -------------------------------------------------------------------------------

    def reaches(self, src: str | None, dst: str, port: int, timeout: float = 1.0) -> bool:
        """Whether a TCP connect from inside `src`'s namespace (None: the root one) to `dst`'s
        address and `port` succeeds within `timeout`."""
        addr = self.addresses[dst]
        if src is None:
            return _connects(addr, port, timeout)
        result: list[bool] = []
        ns_path = f"/run/netns/{self.namespaces[src]}"

        def probe() -> None:  # setns moves this thread only; it ends with the probe
            libc = ctypes.CDLL(None, use_errno=True)
            with open(ns_path) as f:
                if libc.setns(f.fileno(), CLONE_NEWNET) != 0:
                    raise OSError(ctypes.get_errno(), f"setns {ns_path}")
            result.append(_connects(addr, port, timeout))

        t = threading.Thread(target=probe, name=f"probe-{src}-{dst}", daemon=True)
        t.start()
        t.join(timeout + 5)
        return bool(result and result[0])


def _connects(addr: str, port: int, timeout: float) -> bool:
    try:
        with socket.create_connection((addr, port), timeout=timeout):
            return True
    except OSError:
        return False


def _read(path: str) -> str:
    with open(path) as f:
        return f.read().strip()
