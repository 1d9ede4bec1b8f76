"""Memory at the door (issue 36): what clients that announce big frames and trickle their bytes cost the broker.

Starts `kafkalite serve` (this checkout) as its own process, opens N connections that each send a 4-byte
length announcing --announce bytes and then only --send bytes of the body, waits until the broker has read
what it will read (the kernel's socket queues stop changing), and prints the broker's RSS before and after.
Meanwhile and afterwards a normal client's ApiVersions request must be answered. The same probe runs again
with queued.max.request.bytes set (KIP-72's memory pool), where the broker stops reading once it is used up.

Usage: python bench/probe_frame_memory.py [--connections 200] [--announce-mib 100] [--send-mib 1]
                                          [--queued-max-request-mib 64]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import selectors
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MiB = 1 << 20


@dataclass
class Broker:
    port: int
    pid: int
    log: Path  # the broker's stderr


@contextlib.contextmanager
def serve(overrides: list[str]) -> Iterator[Broker]:
    """`kafkalite serve` on an ephemeral loopback port, with a temporary data dir."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    with tempfile.TemporaryDirectory(prefix="probe-frame-memory-") as d:
        env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
        args = [sys.executable, "-m", "kafkalite.cli.main", "serve", "--data-dir", d]
        args += ["--listen", f"127.0.0.1:{port}", "--log-level", "warning"]
        for item in overrides:
            args += ["--override", item]
        log = Path(d) / "broker.log"
        with open(log, "wb") as err:
            proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=err)
        try:
            deadline = time.monotonic() + 30
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"broker exited with {proc.returncode}: {log.read_text()}")
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise RuntimeError("broker did not listen within 30 s") from None
                    time.sleep(0.05)
            yield Broker(port, proc.pid, log)
        finally:
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def rss_mib(pid: int) -> float:
    """Resident set size of process `pid`, in MiB (from /proc)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def socket_queues(port: int) -> int:
    """Bytes in the kernel's queues of the TCP connections to `port` on loopback: received and not
    yet read by the broker, plus sent by the clients and not yet acknowledged."""
    total = 0
    with open("/proc/net/tcp") as f:
        next(f)
        for line in f:
            fields = line.split()
            local, remote, queues = fields[1], fields[2], fields[4]
            if int(local.split(":")[1], 16) == port or int(remote.split(":")[1], 16) == port:
                tx, rx = queues.split(":")
                total += int(tx, 16) + int(rx, 16)
    return total


def settle(port: int, timeout: float = 60.0, still_for: float = 2.0) -> int:
    """Wait until the broker reads no more of what was sent: the socket queues are empty, or have
    not changed for `still_for` seconds (a broker that stopped reading). Returns the bytes left."""
    deadline = time.monotonic() + timeout
    last, since = -1, time.monotonic()
    while time.monotonic() < deadline:
        now = socket_queues(port)
        if now == 0:
            return 0
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= still_for:
            return now
        time.sleep(0.05)
    raise TimeoutError(f"socket queues still changing after {timeout} s")


def trickle(port: int, connections: int, announce: int, send: int) -> list[socket.socket]:
    """Open `connections` sockets that each announce a frame of `announce` bytes and send `send`
    bytes of it; returns them open. Sends what the kernel takes (a broker that stopped reading
    leaves the rest unsent: the queues are full once nothing is written for a second)."""
    body = b"\x00" * send
    socks, left = [], {}
    sel = selectors.DefaultSelector()
    for _ in range(connections):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.setblocking(False)
        socks.append(s)
        left[s] = memoryview(struct.pack(">i", announce) + body)
        sel.register(s, selectors.EVENT_WRITE)
    while left:
        ready = sel.select(timeout=1.0)
        if not ready:
            break  # nobody can write: the broker is not reading them
        for key, _ in ready:
            s = key.fileobj
            assert isinstance(s, socket.socket)
            try:
                n = s.send(left[s])
            except BlockingIOError:
                continue
            left[s] = left[s][n:]
            if not left[s]:
                del left[s]
                sel.unregister(s)
    sel.close()
    return socks


def api_versions_answered(port: int, timeout: float = 10.0) -> bool:
    """A normal client: ApiVersions v0 on a new connection, answered within `timeout`."""
    request = struct.pack(">hhih", 18, 0, 7, 5) + b"probe"
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(struct.pack(">i", len(request)) + request)
            head = b""
            while len(head) < 8:
                chunk = s.recv(8 - len(head))
                if not chunk:
                    return False
                head += chunk
            return struct.unpack(">ii", head)[1] == 7
    except OSError:
        return False


@dataclass
class ProbeResult:
    rss_before: float
    rss_after: float
    rss_closed: float
    unread: int  # bytes the broker left in the socket queues
    unread_closed: int  # ... and once the clients closed (the broker reads to each one's end)
    served_meanwhile: bool
    served_after: bool

    def line(self, label: str) -> str:
        return (
            f"{label:<44} RSS {self.rss_before:7.1f} -> {self.rss_after:7.1f} MiB "
            f"(+{self.rss_after - self.rss_before:.1f}); after close {self.rss_closed:7.1f} MiB; "
            f"unread {self.unread / MiB:6.1f} MiB (after close {self.unread_closed / MiB:.1f}); "
            "ApiVersions meanwhile "
            f"{'ok' if self.served_meanwhile else 'NOT ANSWERED'}, after "
            f"{'ok' if self.served_after else 'NOT ANSWERED'}"
        )


def probe(connections: int, announce: int, send: int, overrides: list[str]) -> ProbeResult:
    with serve(overrides) as b:
        assert api_versions_answered(b.port)
        before = rss_mib(b.pid)
        socks = trickle(b.port, connections, announce, send)
        try:
            unread = settle(b.port)
            after = rss_mib(b.pid)
            # with a memory pool used up, a new connection's first read still gets in and answered
            meanwhile = api_versions_answered(b.port)
        finally:
            for s in socks:
                s.close()
        unread_closed = settle(b.port)
        return ProbeResult(
            before,
            after,
            rss_mib(b.pid),
            unread,
            unread_closed,
            meanwhile,
            api_versions_answered(b.port),
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--connections", type=int, default=200)
    ap.add_argument("--announce-mib", type=int, default=100)
    ap.add_argument("--send-mib", type=float, default=1.0)
    ap.add_argument("--queued-max-request-mib", type=int, default=64)
    args = ap.parse_args()
    announce, send = args.announce_mib * MiB, int(args.send_mib * MiB)
    what = f"{args.connections} x (announce {args.announce_mib} MiB, send {args.send_mib} MiB)"
    print(what)
    print(probe(args.connections, announce, send, []).line("queued.max.request.bytes=-1 (default)"))
    pool = args.queued_max_request_mib * MiB
    print(
        probe(args.connections, announce, send, [f"queued.max.request.bytes={pool}"]).line(
            f"queued.max.request.bytes={pool}"
        )
    )


if __name__ == "__main__":
    main()
