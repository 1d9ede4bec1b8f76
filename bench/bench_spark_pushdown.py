"""Spark filter-pushdown benchmark (issue 35): a batch query `key = 'user-7'` (1% selectivity) over a topic of
--records records, with pushdown (the broker filters) against the same query without it (Spark filters).

One kafkalite broker process (with /metrics), one local[2] SparkSession, same run. Per mode: query wall time
(best of --repeats), the broker's bytes sent to consumers (kafka_server_brokertopicmetrics_bytesout from
/metrics, per query), the broker's CPU seconds per GB of the topic scanned, and rows (checked equal). Ratios
are without / with pushdown. The peer here is the no-pushdown query (Spark's Kafka source cannot push
filters: it reads every record, as the no-pushdown mode does). Machine load is printed: compare within a run.

Usage: python bench/bench_spark_pushdown.py [--records N] [--partitions P] [--size B] [--repeats R]
       [--values random|repeated]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import urllib.request
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from peers import CpuMeter, free_port, kafkalite_broker

WHERE = "key = CAST('user-7' AS BINARY)"


def fill(bs: str, topic: str, n: int, partitions: int, size: int, random_values: bool) -> int:
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    p = Producer(
        {
            "bootstrap.servers": bs,
            "linger.ms": 100,
            "batch.size": 1_000_000,
            "compression.type": "lz4",
            "acks": 1,
        }
    )
    pool = [os.urandom(size) if random_values else b"x" * size for _ in range(997)]
    for i in range(n):
        value = pool[i % 997]
        while True:
            try:
                p.produce(topic, value, key=b"user-%d" % (i % 100), partition=i % partitions)
                break
            except BufferError:
                p.poll(0.05)
    p.flush(300)
    return n * (size + 10)


def bytes_out(http: str) -> float:
    with urllib.request.urlopen(http + "/metrics", timeout=30) as resp:
        for line in resp.read().decode().splitlines():
            if line.startswith("kafka_server_brokertopicmetrics_bytesout") and "{" not in line:
                return float(line.split()[1])
    raise RuntimeError("no kafka_server_brokertopicmetrics_bytesout in /metrics")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument(
        "--values",
        choices=("random", "repeated"),
        default="random",
        help="random: lz4 gains little",
    )
    args = ap.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import kafkalite.spark

    http = f"http://127.0.0.1:{free_port()}"
    results: dict[str, tuple[float, float, float, int]] = {}
    with kafkalite_broker([f"http.listeners={http}"]) as bs:
        topic = f"pushdown-{uuid.uuid4().hex[:8]}"
        t0 = time.perf_counter()
        nbytes = fill(bs, topic, args.records, args.partitions, args.size, args.values == "random")
        print(f"filled {args.records:,} records in {time.perf_counter() - t0:.1f}s", flush=True)
        spark = (
            SparkSession.builder.master("local[2]")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.sql.python.filterPushdown.enabled", "true")
            .config("spark.driver.memory", "2g")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        kafkalite.spark.register(spark)
        try:
            # round 0 warms the JVM and the Python workers up (not counted); modes alternate
            for rep in range(args.repeats + 1):
                modes = ("pushdown", "no pushdown") if rep % 2 else ("no pushdown", "pushdown")
                for mode in modes:
                    df = (
                        spark.read.format("kafkalite")
                        .option("kafka.bootstrap.servers", bs)
                        .option("subscribe", topic)
                        .option("kafkalite.pushdown", str(mode == "pushdown").lower())
                        .load()
                        .where(WHERE)
                    )
                    sent0 = bytes_out(http)
                    meter = CpuMeter(bs)
                    with meter:
                        t = time.perf_counter()
                        rows = df.select("partition", "offset").collect()
                        took = time.perf_counter() - t
                    sent = bytes_out(http) - sent0
                    cpu_gb = meter.broker * took / (nbytes / 1e9)
                    best = results.get(mode)
                    if rep and (best is None or took < best[0]):
                        results[mode] = (took, sent, cpu_gb, len(rows))
        finally:
            spark.stop()
    want = args.records // 100
    print(f"{'mode':>12}  {'query s':>8}  {'broker bytes sent':>18}  {'broker CPU s/GB':>15}  rows")
    for mode, (took, sent, cpu_gb, n) in results.items():
        print(f"{mode:>12}  {took:8.2f}  {sent:18,.0f}  {cpu_gb:15.2f}  {n:,}")
        assert n == want, f"{mode}: {n} rows, expected {want}"
    p, q = results["pushdown"], results["no pushdown"]
    print(
        f"pushdown against no pushdown: {q[1] / max(p[1], 1):.1f}x fewer bytes sent, "
        f"{q[0] / p[0]:.2f}x faster query"
    )
    print(
        f"({args.records:,} records of {args.size} B ({args.values} values) in {args.partitions} "
        "partitions, lz4, "
        f"1% selectivity; best of {args.repeats}, after a warm-up round)"
    )
    print(f"machine load: {Path('/proc/loadavg').read_text().split()[:3]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
