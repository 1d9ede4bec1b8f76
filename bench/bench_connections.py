"""Idle-connection benchmark: N idle client connections on one kafkalite broker (a subprocess), what each
costs the broker (RSS, descriptors), and a good confluent-kafka producer's latency beside them vs without.

Each idle connection does what an idle client does: connects, gets its ApiVersions answered, then sits.
The producer sends 100 B records one at a time at --rate per second (linger.ms=0, acks=1); latency is
produce() to delivery report, p50/p99, measured first without the idle connections and then with them,
in the same run against the same broker. RSS is VmRSS of the broker from /proc/<pid>/status.

Usage: python bench/bench_connections.py [--connections 10000] [--seconds 5] [--rate 500]
"""

from __future__ import annotations

import argparse
import os
import resource
import selectors
import socket
import statistics
import struct
import sys
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent))
from peers import BROKER_PIDS, kafkalite_broker

# ApiVersions v0 request: api_key 18, version 0, correlation id 1, client id "idle"
_BODY = struct.pack(">hhih", 18, 0, 1, 4) + b"idle"
API_VERSIONS_V0 = struct.pack(">i", len(_BODY)) + _BODY


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def cpu_s(pid: int) -> float:
    """utime + stime of a process, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def raise_nofile(wanted: int) -> int:
    """Raise this process's soft RLIMIT_NOFILE to the hard limit; the connections it allows."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    room = hard - 200  # the producer, admin client and Python's own descriptors
    if room < wanted:
        print(
            f"note: RLIMIT_NOFILE hard limit is {hard}: only {room} connections can be opened "
            f"from this process (raise it with ulimit -Hn to test {wanted})"
        )
    return min(wanted, room)


def open_idle(host: str, port: int, n: int, batch: int = 500) -> list[socket.socket]:
    """n connections, each with its ApiVersions answered, in batches (the listen backlog is 1024)."""
    socks: list[socket.socket] = []
    sel = selectors.DefaultSelector()
    for start in range(0, n, batch):
        pending: dict[socket.socket, bytearray] = {}
        for _ in range(min(batch, n - start)):
            s = socket.create_connection((host, port), timeout=30)
            s.sendall(API_VERSIONS_V0)
            s.setblocking(False)
            pending[s] = bytearray()
            sel.register(s, selectors.EVENT_READ)
        deadline = time.monotonic() + 60
        while pending:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{len(pending)} ApiVersions answers missing after 60 s")
            for key, _ in sel.select(timeout=1):
                s = key.fileobj  # type: ignore[assignment]
                assert isinstance(s, socket.socket)
                chunk = s.recv(65536)
                if not chunk:
                    raise RuntimeError("the broker closed an idle connection while opening")
                buf = pending[s]
                buf += chunk
                if len(buf) >= 4 and len(buf) - 4 >= struct.unpack_from(">i", buf)[0]:
                    sel.unregister(s)
                    del pending[s]
                    socks.append(s)
    sel.close()
    return socks


def produce_latency(bs: str, topic: str, seconds: float, rate: int) -> tuple[float, float, int]:
    """p50 / p99 (ms) of produce() -> delivery report, one record at a time at `rate`/s."""
    p = Producer({"bootstrap.servers": bs, "linger.ms": 0, "acks": 1, "socket.nagle.disable": True})
    lat: list[float] = []

    def cb(err, _msg, sent: float) -> None:  # type: ignore[no-untyped-def]
        if err is None:
            lat.append((time.perf_counter() - sent) * 1000)

    for _ in range(20):  # warm: metadata, connection
        p.produce(topic, b"w" * 100)
    p.flush(10)
    total = int(seconds * rate)
    start = time.perf_counter()
    for i in range(total):
        due = start + i / rate
        while (now := time.perf_counter()) < due:
            p.poll(max(0.0, min(due - now, 0.001)))
        sent = time.perf_counter()
        p.produce(topic, b"x" * 100, on_delivery=lambda e, m, s=sent: cb(e, m, s))
        p.poll(0)
    p.flush(30)
    del p
    lat.sort()
    return statistics.median(lat), lat[int(len(lat) * 0.99) - 1], len(lat)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--connections", type=int, default=10_000)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--rate", type=int, default=500)
    a = ap.parse_args()
    n = raise_nofile(a.connections)
    with kafkalite_broker() as bs:
        pid = BROKER_PIDS[bs]
        host, port = bs.rsplit(":", 1)
        admin = AdminClient({"bootstrap.servers": bs})
        admin.create_topics([NewTopic("lat", 1, 1)])["lat"].result(30)
        produce_latency(
            bs, "lat", 1.0, a.rate
        )  # warm-up (discarded): metadata, connections, first batches
        p50_0, p99_0, count0 = produce_latency(bs, "lat", a.seconds, a.rate)
        time.sleep(0.5)
        rss0, fds0 = rss_kib(pid), fds(pid)
        t0, c0 = time.monotonic(), cpu_s(pid)
        socks = open_idle(host, int(port), n)
        opened_s, opened_cpu = time.monotonic() - t0, cpu_s(pid) - c0
        time.sleep(1.0)
        rss1, fds1 = rss_kib(pid), fds(pid)
        p50_1, p99_1, count1 = produce_latency(bs, "lat", a.seconds, a.rate)
        rss2 = rss_kib(pid)
        for s in socks:
            s.close()
        time.sleep(1.0)
        p50_2, p99_2, count2 = produce_latency(bs, "lat", a.seconds, a.rate)
        print(f"kafkalite broker pid {pid}, {n} idle connections (ApiVersions answered, then idle)")
        print(f"  opened in {opened_s:.1f} s ({n / opened_s:,.0f} connections/s); broker CPU "
              f"{opened_cpu:.2f} s ({opened_cpu * 1e6 / n:.0f} us per connection)")  # fmt: skip
        print(f"  broker RSS   : {rss0 / 1024:.1f} MiB before, {rss1 / 1024:.1f} MiB with them "
              f"({rss2 / 1024:.1f} MiB after the second latency run)")  # fmt: skip
        print(f"  RSS per idle connection: {(rss1 - rss0) * 1024 / n:,.0f} bytes")
        print(f"  broker fds   : {fds0} before, {fds1} with them")
        print(f"  produce latency, {a.rate} records/s of 100 B, linger.ms=0, acks=1:")
        print(
            f"    without idle connections: p50 {p50_0:.2f} ms  p99 {p99_0:.2f} ms  ({count0} records)"
        )
        print(
            f"    beside {n} idle          : p50 {p50_1:.2f} ms  p99 {p99_1:.2f} ms  ({count1} records)"
        )
        print(
            f"    without again (closed)   : p50 {p50_2:.2f} ms  p99 {p99_2:.2f} ms  ({count2} records)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
