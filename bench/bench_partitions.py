"""Partitions at scale on one broker: create T topics x P partitions, write one record to each with
acks=all, then restart cleanly (SIGTERM) and after SIGKILL, and read every record back.

Prints the create time, descriptors in use and RSS of the broker, and both restart times (process
start to every partition answering ListOffsets with its record). The broker is `kafkalite serve` on
a fresh data dir with default settings apart from `--override` items given here.

Usage: python bench/bench_partitions.py [--topics 1000] [--partitions 100] [--override K=V ...]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent))
from peers import free_port, wait_port

_ROOT = Path(__file__).resolve().parent.parent
QUIET = {"log_level": 0}


def start(data: str, port: int, overrides: list[str]) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PYTHONPATH=str(_ROOT / "src"))
    args = [sys.executable, "-m", "kafkalite.cli.main", "serve", "--data-dir", data]
    args += ["--listen", f"127.0.0.1:{port}", "--log-level", "warning"]
    for item in overrides:
        args += ["--override", item]
    return subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL)


def fds_and_rss(pid: int) -> tuple[int, float]:
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    with open(f"/proc/{pid}/status") as f:
        rss = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    return fds, rss / 1024


def names(topics: int) -> list[str]:
    return [f"scale-{i:05d}" for i in range(topics)]


def create(bs: str, topics: int, partitions: int) -> float:
    admin = AdminClient({"bootstrap.servers": bs, **QUIET})
    t0 = time.perf_counter()
    all_names = names(topics)
    for i in range(0, topics, 100):
        futures = admin.create_topics(
            [NewTopic(t, partitions, 1) for t in all_names[i : i + 100]], operation_timeout=300
        )
        for f in futures.values():
            f.result()
    return time.perf_counter() - t0


def write_all(bs: str, topics: int, partitions: int, per_producer: int = 10_000) -> None:
    """One record to each partition, acks=all: a producer per `per_producer` partitions, one after
    another (a single librdkafka producer spreads its work over every partition it has seen: at
    100,000 partitions it, not the broker, is the bottleneck and messages time out)."""
    failed: list[object] = []

    def cb(err: object, _msg: object) -> None:
        if err is not None:
            failed.append(err)

    all_names = names(topics)
    step = max(1, per_producer // partitions)
    for i in range(0, topics, step):
        p = Producer({"bootstrap.servers": bs, "acks": "all", "linger.ms": 20, **QUIET})
        for t in all_names[i : i + step]:
            for part in range(partitions):
                while True:
                    try:
                        p.produce(t, f"{t}/{part}".encode(), partition=part, on_delivery=cb)
                        break
                    except BufferError:
                        p.poll(0.01)
            p.poll(0)
        if p.flush(600) or failed:
            raise SystemExit(f"write: {len(failed)} failed ({failed[:1]})")


def serving_all(bs: str, topics: int, partitions: int, deadline: float) -> None:
    """Until every partition answers its offsets with the one record written to it. Each pass is a
    new client: librdkafka keeps a partition it once saw without a leader (logs still recovering
    after a crash) in its metadata cache, and answers for it from there, for minutes."""
    pending = [TopicPartition(t, p) for t in names(topics) for p in range(partitions)]
    while pending and time.monotonic() < deadline:
        c = Consumer({"bootstrap.servers": bs, "group.id": "bench-partitions", **QUIET})
        try:
            left = []
            for i in range(0, len(pending), 1000):
                chunk = pending[i : i + 1000]
                try:
                    got = c.offsets_for_times(
                        [TopicPartition(tp.topic, tp.partition, -1) for tp in chunk], timeout=60
                    )
                except Exception:  # not yet: the broker is still opening logs
                    left += chunk
                    continue
                left += [tp for tp, r in zip(chunk, got, strict=True) if r.error or r.offset != 1]
        finally:
            c.close()
        pending = left
        if pending:
            time.sleep(0.2)
    if pending:
        raise SystemExit(f"{len(pending)} partitions not serving their record")


def read_back(bs: str, topics: int, partitions: int, per_consumer: int = 10_000) -> int:
    """How many records are missing, read from offset 0 by a consumer per `per_consumer` partitions
    (one after another, as the producers write)."""
    missing = 0
    all_names = names(topics)
    step = max(1, per_consumer // partitions)
    for i in range(0, topics, step):
        chunk = all_names[i : i + step]
        c = Consumer({"bootstrap.servers": bs, "group.id": "bench-read",
                      "enable.auto.commit": False, **QUIET})  # fmt: skip
        expected = {f"{t}/{p}".encode() for t in chunk for p in range(partitions)}
        c.assign([TopicPartition(t, p, 0) for t in chunk for p in range(partitions)])
        seen: set[bytes] = set()
        deadline = time.monotonic() + 600
        while len(seen) < len(expected) and time.monotonic() < deadline:
            for m in c.consume(10000, timeout=1):
                if m.error() is None:
                    seen.add(m.value())
        c.close()
        missing += len(expected - seen)
    return missing


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--topics", type=int, default=1000)
    ap.add_argument("--partitions", type=int, default=100)
    ap.add_argument("--override", action="append", default=[])
    a = ap.parse_args()
    total = a.topics * a.partitions
    with tempfile.TemporaryDirectory(prefix="bench-partitions-") as data:
        port = free_port()
        bs = f"127.0.0.1:{port}"
        proc = start(data, port, a.override)
        try:
            wait_port(port, proc, 60)
            took = create(bs, a.topics, a.partitions)
            fds, rss = fds_and_rss(proc.pid)
            print(f"created {total:,} partitions ({a.topics} topics x {a.partitions}) in {took:.1f} s; "
                  f"broker {fds} fds, RSS {rss:.0f} MiB", flush=True)  # fmt: skip
            t0 = time.perf_counter()
            write_all(bs, a.topics, a.partitions)
            fds, rss = fds_and_rss(proc.pid)
            print(f"wrote one record to each with acks=all in {time.perf_counter() - t0:.1f} s; "
                  f"broker {fds} fds, RSS {rss:.0f} MiB", flush=True)  # fmt: skip
            for how in ("clean shutdown (SIGTERM)", "SIGKILL"):
                proc.send_signal(signal.SIGTERM if how.startswith("clean") else signal.SIGKILL)
                proc.wait(300)
                t0 = time.perf_counter()
                proc = start(data, port, a.override)
                wait_port(port, proc, 600)
                listening = time.perf_counter() - t0
                serving_all(bs, a.topics, a.partitions, time.monotonic() + 600)
                fds, rss = fds_and_rss(proc.pid)
                print(f"restart after {how}: every partition serving in "
                      f"{time.perf_counter() - t0:.1f} s (listening after {listening:.1f} s); "
                      f"broker {fds} fds, RSS {rss:.0f} MiB", flush=True)  # fmt: skip
            missing = read_back(bs, a.topics, a.partitions)
            print(f"read back: {total - missing:,} of {total:,} records ({missing} missing)")
        finally:
            proc.kill()
            proc.wait()


if __name__ == "__main__":
    main()
