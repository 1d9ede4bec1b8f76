"""Share-group (KIP-932) consume throughput against a classic consumer group, with confluent-kafka
against the same kafkalite broker in the same run.

N records (256-byte values) are produced once to a one-partition topic; then every round reads all N
back, each mode with a fresh group id starting at the earliest offset:

  classic     one `Consumer` (group.protocol=classic, auto.offset.reset=earliest, auto commit on)
  share       one `ShareConsumer`, implicit acknowledgement (records accepted by the next poll)
  share-ack   one `ShareConsumer`, explicit: acknowledge(ACCEPT) every record, commit_async per poll
  share-x3    three `ShareConsumer`s (implicit) on the same partition

Each ShareConsumer runs in a process of its own (started and subscribed before the clock can
start, so all begin together), so that three of them do not share one interpreter lock.

The clock starts when the first record arrives (joining is not counted; the time to that moment
is printed as "start"); the classic consumer's starts at its partition assignment instead, since
librdkafka fetches ahead from then on, before the first record reaches the application. It stops
once N distinct offsets have been received; closing the consumers afterwards is not counted.
Figures: records/s, MB/s of values and the broker's CPU seconds per GB of values consumed
(utime+stime of the broker process from /proc over the same span). Every mode checks that it
received exactly N distinct offsets; "dup" counts deliveries of an already seen offset before the
last new one arrived, "late" the deliveries after it, while the consumers are stopping (share-x3
with implicit acknowledgement: librdkafka's close does not accept the finishing consumer's last
batch, so the others still polling get it again). share-x3 also prints how many records each
consumer took.

The machine's load swings (the classic consumer alone went from 100k to 540k rec/s between
rounds), so the ratios are taken within a round: the classic consumer runs first and last in
every round, the share modes between (their order alternating from round to round), and each
share mode's ratio, of records/s and of CPU per GB, is against the mean of that round's two
classic runs. Every round prints its ratios; the table gives the medians over --rounds.

Every consumer uses librdkafka's fetch.wait.max.ms (500 ms; --fetch-wait-ms): with 10 ms, the
share-x3 members without records answer an empty ShareFetch every 10 ms. --batch-size sets the
producer's batch.size (librdkafka's 1,000,000 by default: about 3,900 records of 256 B, more than
group.share.partition.max.record.locks, 2000 by default, --max-record-locks), which bounds
share-x3: the in-flight limit gates new records (a batch begun below it is acquired to its end,
as in Kafka), so with such batches one batch at a time is in flight and the three consumers take
turns. --share-fetch-max-bytes sets the share consumers' fetch.max.bytes. --profile FILE runs the
broker under cProfile, which writes FILE when the broker stops on SIGTERM; its figures then
include the profiler's overhead.

Figures (2026-12-02, 200k records, medians of 5 rounds, this checkout against its base 3a1d145
run just before it; the machine was shared, load average 4.5 in pair 1, 12 and 17 in pairs 2 and 3):

                 classic        share          share-ack      share-x3
  pair 1 before  515k, 0.8      0.64x, 4.4x    0.45x, 5.1x    0.31x, 10.0x
  pair 1 after   519k, 0.8      0.89x, 2.3x    0.72x, 3.0x    0.81x, 2.5x
  pair 3 before  233k, 1.1      0.76x, 3.3x    0.73x, 3.8x    0.56x, 9.1x
  pair 3 after   250k, 0.8      0.65x, 2.0x    0.60x, 2.4x    0.95x, 1.8x

(classic: rec/s and broker CPU-s/GB; the share modes: records/s and CPU per GB against it.)
A ShareConsumer has nothing fetched ahead (one ShareFetch per poll(), answered before the next is
sent), so its rate follows the round trip and suffers more than the classic consumer's when the
machine is loaded; the consumers' own CPU (librdkafka and this script) is 4-6x the broker's.

Usage: python bench/bench_share_groups.py [--rounds R] [--records N] [--max-poll-records M]
       [--modes classic,share,share-ack,share-x3] [--fetch-wait-ms MS] [--batch-size B]
       [--max-record-locks L] [--share-fetch-max-bytes B] [--profile FILE]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
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
FETCH_WAIT_MS = [500]  # every consumer's fetch.wait.max.ms (--fetch-wait-ms)
PRODUCER_BATCH_BYTES = [1_000_000]  # the producer's batch.size (--batch-size)


_MP = multiprocessing.get_context("spawn")  # consumers in processes of their own: no GIL shared


class Tally:
    """What the consumers of one mode received, in shared memory (the share consumers run in
    processes of their own, so that three of them do not share one interpreter's lock)."""

    def __init__(self, n: int, broker_pid: int) -> None:
        self.n = n
        self.broker_pid = broker_pid
        self.seen = _MP.RawArray("b", n)
        self._counts = _MP.RawArray("q", 4)  # distinct, deliveries, late, value bytes
        self._times = _MP.RawArray("d", 5)  # first, last (perf_counter), broker CPU at both,
        # and the CPU seconds the consumers' processes spent while they consumed
        self.done = _MP.Event()
        self.lock = _MP.Lock()

    distinct = property(lambda self: self._counts[0])
    deliveries = property(lambda self: self._counts[1])
    late = property(lambda self: self._counts[2])
    value_bytes = property(lambda self: self._counts[3])
    first_at = property(lambda self: self._times[0])
    last_at = property(lambda self: self._times[1])
    cpu_first = property(lambda self: self._times[2])
    cpu_last = property(lambda self: self._times[3])
    client_cpu = property(lambda self: self._times[4])

    def add_client_cpu(self, seconds: float) -> None:
        with self.lock:
            self._times[4] += seconds

    def _start(self) -> None:
        if not self._times[0]:
            self._times[0] = time.perf_counter()  # CLOCK_MONOTONIC: one clock for all processes
            self._times[2] = process_cpu_seconds(self.broker_pid)

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
        counts = self._counts
        with self.lock:
            if self.done.is_set():  # after the last new offset: redeliveries while stopping
                counts[2] += len(offsets)
                return 0
            self._start()
            seen = self.seen
            new = 0
            for o in offsets:
                if not seen[o]:
                    seen[o] = 1
                    new += 1
            counts[0] += new
            counts[1] += len(offsets)
            counts[3] += nbytes
            if counts[0] >= self.n:
                self._times[1] = time.perf_counter()
                self._times[3] = process_cpu_seconds(self.broker_pid)
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
    client_cpu: float
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

    @property
    def client_cpu_per_gb(self) -> float:
        return self.client_cpu / (self.value_bytes / 1e9)


def produce_all(bootstrap: str, topic: str, n: int) -> float:
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "batch.size": PRODUCER_BATCH_BYTES[0],
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
            "fetch.wait.max.ms": FETCH_WAIT_MS[0],
        }
    )
    # librdkafka fetches ahead as soon as the partition is assigned, before the first consume()
    # returns: start the clock at the assignment
    cpu0 = time.process_time()  # librdkafka's threads included
    c.subscribe([topic], on_assign=lambda _c, _p: tally.start())
    got = 0
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while not tally.done.is_set():
            if time.monotonic() > deadline:
                raise TimeoutError("classic consumer: not all records arrived")
            got += tally.add(c.consume(max_poll, 0.2))
        tally.add_client_cpu(time.process_time() - cpu0)
    finally:
        c.close()
    return [got]


def share_worker(
    tally: Tally,
    conf: dict[str, object],
    topic: str,
    explicit: bool,
    counts: Any,
    idx: int,
    ready: Any,
    go: Any,
    errors: Any,
) -> None:
    """One ShareConsumer (in a process of its own): subscribes, says it is ready, and polls from
    `go` until all records are in; what it took goes to counts[idx], a failure to `errors`."""
    try:
        c = ShareConsumer(conf)
        c.subscribe([topic])
        ready.set()
        go.wait(60)
        cpu0 = time.process_time()
        deadline = time.monotonic() + TIMEOUT_S
        try:
            while not tally.done.is_set():
                if time.monotonic() > deadline:
                    raise TimeoutError("share consumer: not all records arrived")
                msgs = c.poll(0.2)
                if explicit and len(msgs):
                    for m in msgs:
                        if m.error() is None:
                            c.acknowledge(m, AcknowledgeType.ACCEPT)
                    c.commit_async()
                counts[idx] += tally.add(msgs)
            tally.add_client_cpu(time.process_time() - cpu0)
        finally:
            c.close()
    except BaseException as exc:  # reported by the caller
        errors.put(repr(exc))


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
        members = 3 if mode == "share-x3" else 1
        conf: dict[str, object] = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "max.poll.records": max_poll,
            "fetch.wait.max.ms": FETCH_WAIT_MS[0],
        }
        if fetch_max_bytes:
            conf["fetch.max.bytes"] = fetch_max_bytes
        explicit = mode == "share-ack"
        if explicit:
            conf["share.acknowledgement.mode"] = "explicit"
        counts = _MP.RawArray("q", members)
        errors = _MP.Queue()
        go = _MP.Event()
        readies = [_MP.Event() for _ in range(members)]
        procs = [
            _MP.Process(
                target=share_worker,
                args=(tally, conf, topic, explicit, counts, i, readies[i], go, errors),
                daemon=True,
            )
            for i in range(members)
        ]
        for pr in procs:
            pr.start()
        for ev in readies:  # every member's process is up and subscribed: all start together
            if not ev.wait(60):
                break
        t0 = time.perf_counter()
        go.set()
        for pr in procs:
            pr.join(TIMEOUT_S + 60)
            if pr.is_alive():
                pr.kill()
        split = list(counts)
        if not errors.empty():
            raise RuntimeError(f"{mode}: {errors.get()}")
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
        client_cpu=tally.client_cpu,
        split=split,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
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
        "--fetch-wait-ms", type=int, default=FETCH_WAIT_MS[0],
        help="fetch.wait.max.ms of every consumer (default: librdkafka's, 500)",
    )  # fmt: skip
    ap.add_argument(
        "--batch-size", type=int, default=PRODUCER_BATCH_BYTES[0],
        help="the producer's batch.size (default: librdkafka's, 1000000)",
    )  # fmt: skip
    ap.add_argument(
        "--max-record-locks", type=int, default=2000,
        help="the broker's group.share.partition.max.record.locks (default: Kafka's, 2000)",
    )  # fmt: skip
    ap.add_argument(
        "--profile", metavar="FILE", help="run the broker under cProfile, stats to FILE"
    )
    args = ap.parse_args()
    FETCH_WAIT_MS[0] = args.fetch_wait_ms
    PRODUCER_BATCH_BYTES[0] = args.batch_size
    modes = [m for m in args.modes.split(",") if m]
    unknown = set(modes) - set(MODES)
    if unknown:
        ap.error(f"unknown mode(s): {', '.join(sorted(unknown))}")
    port = free_port()
    results: dict[str, list[Result]] = {m: [] for m in modes}
    ratios: dict[str, list[float]] = {m: [] for m in modes}
    cpu_ratios: dict[str, list[float]] = {m: [] for m in modes}
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
                "--override", f"group.share.partition.max.record.locks={args.max_record_locks}",
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
            share_modes = [m for m in modes if m != "classic"]
            for r in range(args.rounds):
                # the share modes alternate their order; the classic consumer runs before and
                # after them, and the round's ratios are against the mean of its two runs, so a
                # drift of the machine's load during the round weighs on both sides alike
                order = share_modes if r % 2 == 0 else share_modes[::-1]
                if "classic" in modes:
                    order = ["classic", *order, "classic"]
                this_round: dict[str, list[Result]] = {}
                for mode in order:
                    res = one_mode(mode, bootstrap, topic, args.records, proc.pid,
                                   args.max_poll_records, args.share_fetch_max_bytes)  # fmt: skip
                    this_round.setdefault(mode, []).append(res)
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
                    base = this_round["classic"]
                    base_rate = statistics.mean(x.rate for x in base)
                    base_cpu = statistics.mean(x.cpu_per_gb for x in base)
                    for mode, runs in this_round.items():
                        if mode == "classic":
                            continue
                        ratios[mode].append(runs[0].rate / base_rate)
                        cpu_ratios[mode].append(runs[0].cpu_per_gb / base_cpu)
                    print(
                        f"round {r + 1} against the classic consumer (mean of its 2 runs): "
                        + ", ".join(
                            f"{m} {ratios[m][-1]:.2f}x rec/s, {cpu_ratios[m][-1]:.1f}x CPU/GB"
                            for m in share_modes
                        ),
                        flush=True,
                    )
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
        "vs classic: the median of the rounds' ratios, each against the mean of that round's two "
        "classic runs (the classic row: its runs' medians)"
    )
    print(
        f"{'mode':10s} {'rec/s':>10s} {'MB/s':>7s} {'vs classic':>10s} {'broker CPU-s/GB':>16s} "
        f"{'CPU/GB vs classic':>18s} {'client CPU-s/GB':>16s} {'start s':>8s} {'dup':>6s}  split"
    )
    for mode in modes:
        rs = results[mode]
        split = ""
        if rs and len(rs[0].split) > 1:
            split = " | ".join("/".join(str(x) for x in r.split) for r in rs)
        print(
            f"{mode:10s} {med([r.rate for r in rs]):10,.0f} {med([r.mb_s for r in rs]):7.1f} "
            f"{med(ratios[mode]) if mode != 'classic' else 1.0:9.2f}x "
            f"{med([r.cpu_per_gb for r in rs]):16.1f} "
            f"{med(cpu_ratios[mode]) if mode != 'classic' else 1.0:17.1f}x "
            f"{med([r.client_cpu_per_gb for r in rs]):16.1f} "
            f"{med([r.start for r in rs]):8.2f} {med([r.dup for r in rs]):6.0f}  {split}"
        )
    for mode in modes:
        if mode != "classic" and ratios[mode]:
            print(
                f"per round, {mode}: "
                + " ".join(f"{x:.2f}x" for x in ratios[mode])
                + " rec/s; "
                + " ".join(f"{x:.1f}x" for x in cpu_ratios[mode])
                + " CPU/GB"
            )


if __name__ == "__main__":
    main()
