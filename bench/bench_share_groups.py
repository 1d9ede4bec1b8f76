"""Share-group (KIP-932) consume throughput against a classic consumer group, with confluent-kafka
against the same kafkalite broker in the same run.

N records (256-byte values) are produced once to a one-partition topic; then every round reads all N
back, each mode with a fresh group id starting at the earliest offset:

  classic     one `Consumer` (group.protocol=classic, auto.offset.reset=earliest, auto commit on)
  share       one `ShareConsumer`, implicit acknowledgement (records accepted by the next poll)
  share-ack   one `ShareConsumer`, explicit: acknowledge(ACCEPT) every record, commit_async per poll
  share-x3    three `ShareConsumer`s (threads, one handle each, implicit) on the same partition

The clock starts when the first record arrives (joining is not counted; the time to that moment
is printed as "start"); the classic consumer's starts at its partition assignment instead, since
librdkafka fetches ahead from then on, before the first record reaches the application. It stops
once N distinct offsets have been received; closing the consumers afterwards is not counted.
Figures: records/s, MB/s of values, the ratio to the classic consumer of the same round, and the
broker's CPU seconds per GB of values consumed (utime+stime of the broker process from /proc over
the same span). Every mode checks that it received exactly N distinct offsets; "dup" counts
deliveries of an already seen offset before the last new one arrived, "late" the deliveries after
it, while the consumers are stopping (share-x3 with implicit acknowledgement: librdkafka's close
does not accept the finishing consumer's last batch, so the others still polling get it again).
share-x3 also prints how many records each consumer took. The modes' order alternates from round
to round; medians over --rounds.

--share-fetch-max-bytes sets the share consumers' fetch.max.bytes (librdkafka's default is
50 MiB; the broker reads about what the records it may acquire take, not all of it). --profile
FILE runs the broker under cProfile, which writes FILE when the broker stops on SIGTERM; its
figures then include the profiler's overhead.

Where the time goes (2026-12-02, 200k records, medians of 3, same run): classic 435k rec/s at
1.4 broker CPU-s/GB; share 233k (0.54x) at 4.9; share-ack 172k at 6.1; share-x3 114k at 13.9.
One ShareConsumer is bound by librdkafka's loop, not the broker: one ShareFetch per poll(),
nothing fetched ahead, and the broker is busy about 30% of the span (about 1 ms of handling per
ShareFetch of ~2000 records: the acknowledgement's state write to __share_group_state, the
acquisition, the answer sent with sendfile). The producer's 1 MB batches (~3750 records) exceed
group.share.partition.max.record.locks (2000), so each batch still goes out twice.

Usage: python bench/bench_share_groups.py [--rounds R] [--records N] [--max-poll-records M]
       [--modes classic,share,share-ack,share-x3] [--share-fetch-max-bytes B] [--profile FILE]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import AcknowledgeType, Consumer, Producer, ShareConsumer, libversion
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from peers import free_port, process_cpu_seconds, stop, wait_port

ROOT = Path(__file__).resolve().parents[1]
VALUE_SIZE = 256
MODES = ("classic", "share", "share-ack", "share-x3")
TIMEOUT_S = 600.0


@dataclass
class Tally:
    """What the consumers of one mode received; shared by its threads under `lock`."""

    n: int
    broker_pid: int
    seen: bytearray = field(init=False)
    distinct = 0
    deliveries = 0
    late = 0
    value_bytes = 0
    first_at = 0.0
    last_at = 0.0
    cpu_first = 0.0
    cpu_last = 0.0
    done: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.seen = bytearray(self.n)

    def _start(self) -> None:
        if not self.first_at:
            self.first_at = time.perf_counter()
            self.cpu_first = process_cpu_seconds(self.broker_pid)

    def start(self) -> None:
        """Start the clock now unless it runs already."""
        with self.lock:
            self._start()

    def add(self, msgs: list[Any]) -> int:
        """Count a batch; returns how many records it held (errors skipped), 0 once all N are in."""
        offsets = []
        nbytes = 0
        for m in msgs:
            if m.error() is None:
                offsets.append(m.offset())
                nbytes += len(m.value())
        if not offsets:
            return 0
        with self.lock:
            if self.done.is_set():  # after the last new offset: redeliveries while stopping
                self.late += len(offsets)
                return 0
            self._start()
            seen = self.seen
            new = 0
            for o in offsets:
                if not seen[o]:
                    seen[o] = 1
                    new += 1
            self.distinct += new
            self.deliveries += len(offsets)
            self.value_bytes += nbytes
            if self.distinct >= self.n and not self.done.is_set():
                self.last_at = time.perf_counter()
                self.cpu_last = process_cpu_seconds(self.broker_pid)
                self.done.set()
        return len(offsets)


@dataclass
class Result:
    seconds: float
    start: float
    records: int
    distinct: int
    dup: int
    late: int
    value_bytes: int
    broker_cpu: float
    split: list[int]

    @property
    def rate(self) -> float:
        return self.records / self.seconds

    @property
    def mb_s(self) -> float:
        return self.value_bytes / self.seconds / 1e6

    @property
    def cpu_per_gb(self) -> float:
        return self.broker_cpu / (self.value_bytes / 1e9)


def produce_all(bootstrap: str, topic: str, n: int) -> float:
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "acks": 1,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    value = b"v" * VALUE_SIZE
    t = time.perf_counter()
    for i in range(n):
        while True:
            try:
                p.produce(topic, value=value, partition=0)
                break
            except BufferError:
                p.poll(0.05)
        if i % 10_000 == 0:
            p.poll(0)
    if p.flush(120) != 0:
        raise RuntimeError("producer did not flush")
    return time.perf_counter() - t


def set_group_configs(bootstrap: str, group: str, configs: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entries = [
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()
    ]
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)
    for fut in admin.incremental_alter_configs([resource]).values():
        fut.result(30)


def run_classic(tally: Tally, bootstrap: str, topic: str, group: str, max_poll: int) -> list[int]:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": "classic",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": True,
            "fetch.wait.max.ms": 10,
        }
    )
    # librdkafka fetches ahead as soon as the partition is assigned, before the first consume()
    # returns: start the clock at the assignment
    c.subscribe([topic], on_assign=lambda _c, _p: tally.start())
    got = 0
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while not tally.done.is_set():
            if time.monotonic() > deadline:
                raise TimeoutError("classic consumer: not all records arrived")
            got += tally.add(c.consume(max_poll, 0.2))
    finally:
        c.close()
    return [got]


def share_worker(
    tally: Tally,
    bootstrap: str,
    topic: str,
    group: str,
    max_poll: int,
    explicit: bool,
    fetch_max_bytes: int,
    counts: list[int],
    idx: int,
    errors: list[BaseException],
) -> None:
    try:
        conf: dict[str, object] = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "max.poll.records": max_poll,
            "fetch.wait.max.ms": 10,
        }
        if fetch_max_bytes:
            conf["fetch.max.bytes"] = fetch_max_bytes
        if explicit:
            conf["share.acknowledgement.mode"] = "explicit"
        c = ShareConsumer(conf)
        c.subscribe([topic])
        deadline = time.monotonic() + TIMEOUT_S
        try:
            while not tally.done.is_set() and not errors:
                if time.monotonic() > deadline:
                    raise TimeoutError("share consumer: not all records arrived")
                msgs = c.poll(0.2)
                if explicit and len(msgs):
                    for m in msgs:
                        if m.error() is None:
                            c.acknowledge(m, AcknowledgeType.ACCEPT)
                    c.commit_async()
                counts[idx] += tally.add(msgs)
        finally:
            c.close()
    except BaseException as exc:  # reported by the caller
        errors.append(exc)


def one_mode(
    mode: str, bootstrap: str, topic: str, n: int, broker_pid: int, max_poll: int,
    fetch_max_bytes: int,
) -> Result:  # fmt: skip
    group = f"bench-{mode}-{uuid.uuid4().hex[:6]}"
    tally = Tally(n, broker_pid)
    t0 = time.perf_counter()
    if mode == "classic":
        split = run_classic(tally, bootstrap, topic, group, max_poll)
    else:
        set_group_configs(bootstrap, group, {"share.auto.offset.reset": "earliest"})
        t0 = time.perf_counter()
        members = 3 if mode == "share-x3" else 1
        split = [0] * members
        errors: list[BaseException] = []
        explicit = mode == "share-ack"
        threads = []
        for i in range(members):
            worker_args = (tally, bootstrap, topic, group, max_poll, explicit, fetch_max_bytes)
            threads.append(
                threading.Thread(
                    target=share_worker, args=(*worker_args, split, i, errors), daemon=True
                )
            )
        for t in threads:
            t.start()
        for t in threads:
            t.join(TIMEOUT_S + 60)
        if errors:
            raise RuntimeError(f"{mode}: {errors[0]!r}") from errors[0]
    if not tally.done.is_set():
        raise RuntimeError(f"{mode}: received {tally.distinct} of {n} distinct offsets")
    if tally.distinct != n:
        raise RuntimeError(f"{mode}: {tally.distinct} distinct offsets, expected {n}")
    return Result(
        seconds=tally.last_at - tally.first_at,
        start=tally.first_at - t0,
        records=tally.deliveries,
        distinct=tally.distinct,
        dup=tally.deliveries - tally.distinct,
        late=tally.late,
        value_bytes=tally.value_bytes,
        broker_cpu=tally.cpu_last - tally.cpu_first,
        split=split,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--max-poll-records", type=int, default=1000)
    ap.add_argument(
        "--modes", default=",".join(MODES), help="comma-separated subset of " + ",".join(MODES)
    )
    ap.add_argument(
        "--share-fetch-max-bytes", type=int, default=0,
        help="fetch.max.bytes of the share consumers (default: librdkafka's, 50 MiB)",
    )  # fmt: skip
    ap.add_argument(
        "--profile", metavar="FILE", help="run the broker under cProfile, stats to FILE"
    )
    args = ap.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    unknown = set(modes) - set(MODES)
    if unknown:
        ap.error(f"unknown mode(s): {', '.join(sorted(unknown))}")
    port = free_port()
    results: dict[str, list[Result]] = {m: [] for m in modes}
    ratios: dict[str, list[float]] = {m: [] for m in modes}
    with tempfile.TemporaryDirectory(prefix="bench-share-") as d:
        env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
        profile = ["-m", "cProfile", "-o", args.profile] if args.profile else []
        proc = subprocess.Popen(
            [
                sys.executable, *profile, "-m", "kafkalite.cli.main", "serve", "--data-dir", d,
                "--listen", f"127.0.0.1:{port}", "--log-level", "warning",
                "--override", "group.initial.rebalance.delay.ms=0",
                "--override", "group.share.min.heartbeat.interval.ms=500",
                "--override", "group.share.heartbeat.interval.ms=500",
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            wait_port(port, proc)
            bootstrap = f"127.0.0.1:{port}"
            topic = f"share-bench-{uuid.uuid4().hex[:6]}"
            admin = AdminClient({"bootstrap.servers": bootstrap})
            admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
            took = produce_all(bootstrap, topic, args.records)
            print(
                f"produced {args.records} x {VALUE_SIZE} B to {topic} (1 partition) in {took:.1f} s",
                flush=True,
            )
            for r in range(args.rounds):
                order = modes if r % 2 == 0 else modes[::-1]
                this_round: dict[str, Result] = {}
                for mode in order:
                    res = one_mode(mode, bootstrap, topic, args.records, proc.pid,
                                   args.max_poll_records, args.share_fetch_max_bytes)  # fmt: skip
                    this_round[mode] = res
                    results[mode].append(res)
                    split = "/".join(str(x) for x in res.split) if len(res.split) > 1 else ""
                    print(
                        f"round {r + 1} {mode:9s} {res.rate:9,.0f} rec/s {res.mb_s:6.1f} MB/s "
                        f"in {res.seconds:6.2f} s (start {res.start:5.2f} s), broker "
                        f"{res.cpu_per_gb:6.1f} CPU-s/GB, distinct {res.distinct}, dup {res.dup}, late {res.late}"
                        + (f", split {split}" if split else ""),
                        flush=True,
                    )
                if "classic" in this_round:
                    for mode, res in this_round.items():
                        ratios[mode].append(res.rate / this_round["classic"].rate)
        finally:
            stop(proc)

    def med(xs: list[float]) -> float:
        return statistics.median(xs) if xs else float("nan")

    print(
        f"\n{args.records} records x {VALUE_SIZE} B, one partition, max.poll.records "
        f"{args.max_poll_records}, medians of {args.rounds} (one kafkalite broker, "
        f"librdkafka {libversion()[0]})"
    )
    print(
        f"{'mode':10s} {'rec/s':>10s} {'MB/s':>7s} {'vs classic':>10s} {'broker CPU-s/GB':>16s} "
        f"{'start s':>8s} {'dup':>6s}  split"
    )
    for mode in modes:
        rs = results[mode]
        split = ""
        if rs and len(rs[0].split) > 1:
            split = " | ".join("/".join(str(x) for x in r.split) for r in rs)
        print(
            f"{mode:10s} {med([r.rate for r in rs]):10,.0f} {med([r.mb_s for r in rs]):7.1f} "
            f"{med(ratios[mode]):9.2f}x {med([r.cpu_per_gb for r in rs]):16.1f} "
            f"{med([r.start for r in rs]):8.2f} {med([r.dup for r in rs]):6.0f}  {split}"
        )


if __name__ == "__main__":
    main()
