"""Spark connector benchmark, medians of interleaved rounds against ceilings measured in the same run:
a batch read of N 100-byte records from 4 partitions through the `kafkalite` format into count() and
into Parquet against a Python source yielding the same Arrow batches from memory; a streaming read of
the same records (Trigger.AvailableNow, warm workers) against the batch read; the sink against writing
the same cached rows to Parquet; a streaming read into the exactly-once sink against the at-least-once
sink; read_committed against read_uncommitted on a transactional topic. Broker CPU per GB beside each.

Usage: python bench/bench_spark.py [--records 1000000] [--partitions 4] [--rounds 3] [--txn-records 200000]
       python bench/bench_spark.py --pipeline-cluster [--events 20000] [--workers 2] [--cores 1]
       (the clickstream pipeline on a standalone cluster against local[N], same run)
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from peers import free_port, process_cpu_seconds

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(ROOT / "bench"), str(ROOT / "src"), *filter(None, [os.environ.get("PYTHONPATH")])]
)

from kafkalite.client import (  # noqa: E402
    KafkaAdminClient,
    KafkaConsumer,
    KafkaProducer,
    NewTopic,
    TopicPartition,
)


def _memory_source_class() -> type:
    """A Python data source with the same schema that yields ready-made Arrow batches from memory:
    Spark's own ceiling for a Python source on this machine (no Kafka, no decoding)."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    from kafkalite.spark.schema import arrow_schema, kafka_schema

    class MemoryReader(DataSourceReader):
        def __init__(self, schema, rows, parts):
            self.schema, self.rows, self.parts = schema, rows, parts

        def partitions(self):
            return [InputPartition(i) for i in range(self.parts)]

        def read(self, partition):
            import pyarrow as pa
            import pyarrow.compute as pc

            s = arrow_schema(self.schema)
            per = self.rows // self.parts
            chunk = min(per, 50_000)
            ts = pc.multiply(pa.array([1_700_000_000_000] * chunk, pa.int64()), 1000)
            batch = pa.RecordBatch.from_arrays(
                [
                    pa.array([None] * chunk, pa.binary()),
                    pa.array([b"x" * 100] * chunk, pa.binary()),
                    pa.array(["t"] * chunk, pa.string()),
                    pa.array([partition.value] * chunk, pa.int32()),
                    pa.array(range(chunk), pa.int64()),
                    ts.cast(s.field("timestamp").type),
                    pa.array([0] * chunk, pa.int32()),
                ],
                schema=s,
            )
            for start in range(0, per, chunk):
                yield batch.slice(0, min(chunk, per - start))

    class MemorySource(DataSource):
        @classmethod
        def name(cls):
            return "kafkalite_bench_memory"

        def schema(self):
            return kafka_schema(False)

        def reader(self, schema):
            return MemoryReader(schema, int(self.options["rows"]), int(self.options["parts"]))

    return MemorySource


MemorySource = _memory_source_class() if __name__ != "__main__" else None


def start_broker(data: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kafkalite.cli.main",
            "serve",
            "--data-dir",
            str(data),
            "--listen",
            f"127.0.0.1:{port}",
            "--log-level",
            "warning",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("the broker exited during startup")
        try:
            with socket.create_connection(("127.0.0.1", port), 0.5):
                return proc, f"127.0.0.1:{port}"
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("the broker did not start")


def produce(servers: str, topic: str, records: int, partitions: int) -> float:
    value = b"x" * 100
    t0 = time.perf_counter()
    with KafkaProducer(
        bootstrap_servers=servers, acks="1", linger_ms=5, batch_size=262144
    ) as producer:
        send = producer.send
        for i in range(records):
            send(topic, value=value, partition=i % partitions)
        producer.flush(300)
    return records / (time.perf_counter() - t0)


def produce_transactional(servers: str, topic: str, records: int, partitions: int) -> int:
    """`records` 100-byte records in committed transactions of 20,000, with an aborted transaction of
    2,000 after every second one; returns how many records were committed."""
    value = b"t" * 100
    committed = 0
    with KafkaProducer(
        bootstrap_servers=servers,
        transactional_id=f"bench-{topic}",
        linger_ms=5,
        batch_size=262144,
    ) as producer:
        producer.init_transactions(60)
        n = 0
        while committed < records:
            producer.begin_transaction()
            size = min(20_000, records - committed)
            for _ in range(size):
                producer.send(topic, value=value, partition=n % partitions)
                n += 1
            producer.commit_transaction(120)
            committed += size
            if (committed // 20_000) % 2 == 0 and committed < records:
                producer.begin_transaction()
                for _ in range(2000):
                    producer.send(topic, value=b"aborted", partition=n % partitions)
                    n += 1
                producer.flush(120)  # written to the log, then aborted (not just dropped)
                producer.abort_transaction(120)
    return committed


def streaming_rate(
    spark,
    servers: str,
    topic: str,
    ckpt: str,
    *,
    isolation: str = "read_uncommitted",
    sink=None,
    label: str = "stream",
) -> tuple[int, float, float]:
    """One Trigger.AvailableNow streaming read of the whole topic into noop (or `sink(writer)`):
    (rows, rows/s over the micro-batches' own execution time, rows/s with the query's start-up)."""
    df = (
        spark.readStream.format("kafkalite")
        .option("kafka.bootstrap.servers", servers)
        .option("kafka.isolation.level", isolation)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
    )
    for attempt in range(3):
        t0 = time.perf_counter()
        writer = df.writeStream.option("checkpointLocation", f"{ckpt}-{attempt}")
        query = (sink(writer) if sink else writer.format("noop")).trigger(availableNow=True).start()
        try:
            query.awaitTermination()
        except Exception as exc:
            # on a loaded machine a fresh Python worker may miss Spark's fixed 10 s connect-back
            # window (it compiles pyspark from pyspark.zip): that start is retried, not measured
            if "failed to connect back" not in str(exc) or attempt == 2:
                raise
            print(f"(retrying a stream whose Python worker did not start in time: {label})")
            continue
        break
    elapsed = time.perf_counter() - t0
    if query.exception() is not None:
        raise RuntimeError(f"streaming read failed: {query.exception()}")
    progress = [p for p in query.recentProgress if p["numInputRows"]]
    rows = sum(p["numInputRows"] for p in progress)
    batches_s = sum(p["durationMs"]["triggerExecution"] for p in progress) / 1000
    return rows, rows / max(batches_s, 1e-9), rows / elapsed


def raw_consume(servers: str, topic: str, partitions: int, records: int) -> float:
    parts = [TopicPartition(topic, p) for p in range(partitions)]
    with KafkaConsumer(
        bootstrap_servers=servers,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        max_poll_records=50_000,
        max_partition_fetch_bytes=4 * 1024 * 1024,
    ) as consumer:
        consumer.assign(parts)
        consumer.seek_to_beginning()
        n = 0
        t0 = time.perf_counter()
        deadline = time.monotonic() + 300
        while n < records and time.monotonic() < deadline:
            for recs in consumer.poll(1000).values():
                n += len(recs)
        elapsed = time.perf_counter() - t0
    if n != records:
        raise RuntimeError(f"raw consume read {n} of {records} records")
    return n / elapsed


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else 0.0


class BrokerCpu:
    """The broker's CPU seconds over a block, summed per label (for CPU seconds per GB)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.seconds: dict[str, float] = {}

    def measure(self, label: str, fn):
        c0 = process_cpu_seconds(self.pid)
        out = fn()
        self.seconds[label] = self.seconds.get(label, 0.0) + process_cpu_seconds(self.pid) - c0
        return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3, help="timed rounds per path (median is kept)")
    ap.add_argument(
        "--txn-records",
        type=int,
        default=200_000,
        help="records of the read_committed comparison (0: skip it)",
    )
    args = ap.parse_args()
    rounds = max(1, args.rounds)
    gb = args.records * 100 / 1e9  # record values read per pass, in GB

    with tempfile.TemporaryDirectory(prefix="kafkalite-bench-spark-") as tmp:
        broker, servers = start_broker(Path(tmp) / "broker")
        cpu = BrokerCpu(broker.pid)
        try:
            topic = f"bench-spark-{uuid.uuid4().hex[:8]}"
            sink_topic, eos_topic = topic + "-sink", topic + "-eos"
            with KafkaAdminClient(bootstrap_servers=servers) as admin:
                admin.create_topics(
                    [NewTopic(t, args.partitions) for t in (topic, sink_topic, eos_topic)]
                )
            rate = produce(servers, topic, args.records, args.partitions)
            print(
                f"produced {args.records:,} x 100 B records into {args.partitions} partitions "
                f"({rate:,.0f} records/s)"
            )
            raw = raw_consume(servers, topic, args.partitions, args.records)
            print(f"raw consume (kafkalite client, one thread): {raw:,.0f} records/s")

            from pyspark.sql import SparkSession

            import kafkalite.spark
            from kafkalite.spark.options import EXACTLY_ONCE

            spark = (
                SparkSession.builder.master("local[2]")
                .config("spark.ui.enabled", "false")
                .config("spark.sql.shuffle.partitions", "2")
                .config("spark.ui.showConsoleProgress", "false")
                .getOrCreate()
            )
            spark.sparkContext.setLogLevel("ERROR")
            kafkalite.spark.register(spark)
            import bench_spark  # the memory source must live in an importable module

            spark.dataSource.register(bench_spark.MemorySource)

            def df():
                return (
                    spark.read.format("kafkalite")
                    .option("kafka.bootstrap.servers", servers)
                    .option("subscribe", topic)
                    .load()
                )

            def memory_df():
                return (
                    spark.read.format("kafkalite_bench_memory")
                    .option("rows", str(args.records))
                    .option("parts", str(args.partitions))
                    .load()
                )

            t0 = time.perf_counter()
            cold = df().count()  # the first job also starts and warms up the Python workers
            cold_rate = cold / (time.perf_counter() - t0)
            streaming_rate(spark, servers, topic, str(Path(tmp) / "warm"))  # warm the stream path
            # the sink's input: the topic's key and value, cached in Spark's memory
            rows = df().select("key", "value").cache()
            rows.count()
            pq = str(Path(tmp) / "pq")

            def kafkalite_sink(w):
                return (
                    w.format("kafkalite")
                    .option("kafka.bootstrap.servers", servers)
                    .option("topic", eos_topic)
                )

            def timed(label: str, action, n: int = args.records) -> float:
                t0 = time.perf_counter()
                out = cpu.measure(label, action)
                elapsed = time.perf_counter() - t0
                if "count" in label and out != n:
                    raise RuntimeError(f"{label} gave {out}, expected {n}")
                return n / elapsed

            rates: dict[str, list[float]] = {}
            for i in range(rounds):  # interleaved rounds: every path sees the same machine load
                paths = (
                    ("kafkalite -> count()", lambda: df().count()),
                    ("kafkalite -> Parquet", lambda: df().write.mode("overwrite").parquet(pq)),
                    ("memory -> count()", lambda: memory_df().count()),
                    (
                        "memory -> Parquet",
                        lambda: memory_df().write.mode("overwrite").parquet(pq + "m"),
                    ),
                    (
                        "cached rows -> Parquet",
                        lambda: rows.write.mode("overwrite").parquet(pq + "c"),
                    ),
                    (
                        "cached rows -> kafkalite sink",
                        lambda: (
                            rows.write.format("kafkalite")
                            .option("kafka.bootstrap.servers", servers)
                            .option("topic", sink_topic)
                            .mode("append")
                            .save()
                        ),
                    ),
                )
                for label, action in paths:
                    rates.setdefault(label, []).append(timed(label, action))
                for label, sink in (
                    ("stream -> noop", None),
                    ("stream -> sink, at-least-once", kafkalite_sink),
                    (
                        "stream -> sink, exactly-once",
                        lambda w: kafkalite_sink(w).option(EXACTLY_ONCE, "true"),
                    ),
                ):
                    ckpt = str(Path(tmp) / f"ckpt-{label[-6:]}-{i}")
                    n, batch_rate, with_start = cpu.measure(
                        label,
                        lambda sink=sink, ckpt=ckpt, label=label: streaming_rate(
                            spark, servers, topic, ckpt, sink=sink, label=label
                        ),
                    )
                    if n != args.records:
                        raise RuntimeError(f"{label} read {n} rows, expected {args.records}")
                    rates.setdefault(label, []).append(batch_rate)
                    rates.setdefault(label + " (start incl.)", []).append(with_start)
            written = spark.read.parquet(pq).count()
            if written != args.records:
                raise RuntimeError(f"Parquet has {written} rows, expected {args.records}")
            with KafkaConsumer(bootstrap_servers=servers) as consumer:
                parts = [TopicPartition(sink_topic, p) for p in range(args.partitions)]
                sunk = sum(consumer.end_offsets(parts).values())
            if sunk != rounds * args.records:
                raise RuntimeError(
                    f"the sink wrote {sunk} records, expected {rounds * args.records}"
                )
            isolation_rates: dict[str, list[float]] = {"read_uncommitted": [], "read_committed": []}
            committed = 0
            if args.txn_records:
                txn_topic = topic + "-txn"
                with KafkaAdminClient(bootstrap_servers=servers) as admin:
                    admin.create_topics([NewTopic(txn_topic, args.partitions)])
                committed = produce_transactional(
                    servers, txn_topic, args.txn_records, args.partitions
                )
                for i in range(rounds):  # interleaved: same conditions
                    for isolation, got in isolation_rates.items():
                        ckpt = str(Path(tmp) / f"ckpt-{isolation}-{i}")
                        n, batch_rate, _ = streaming_rate(
                            spark, servers, txn_topic, ckpt, isolation=isolation
                        )
                        if isolation == "read_committed" and n != committed:
                            raise RuntimeError(
                                f"read_committed read {n} rows, expected {committed}"
                            )
                        got.append(batch_rate)
            spark.stop()
        finally:
            broker.terminate()
            broker.wait(30)

    med = {k: median(v) for k, v in rates.items()}
    print(
        f"\nmedians of {rounds} interleaved rounds, {args.records:,} x 100 B records, "
        f"{args.partitions} partitions, local[2] (load average now: {os.getloadavg()[0]:.1f})"
    )
    print(f"{'path':<46}{'rows/s':>12}{'vs ceiling':>12}{'broker CPU s/GB':>17}")

    def row(label: str, ceiling: str | None) -> None:
        r = med[label]
        ratio = f"{r / med[ceiling]:>11.2f}x" if ceiling else f"{'':>12}"
        secs = cpu.seconds.get(label.removesuffix(" (start incl.)"))
        per_gb = (
            f"{secs / (rounds * gb):>17.1f}" if secs is not None and label in cpu.seconds else ""
        )
        print(f"{label:<46}{r:>12,.0f}{ratio}{per_gb}")

    print(f"{'raw consume (client, one thread)':<46}{raw:>12,.0f}")
    print(f"{'kafkalite -> count(), cold workers':<46}{cold_rate:>12,.0f}")
    row("memory -> count()", None)
    row("kafkalite -> count()", "memory -> count()")
    row("memory -> Parquet", None)
    row("kafkalite -> Parquet", "memory -> Parquet")
    row("stream -> noop", "kafkalite -> count()")
    row("stream -> noop (start incl.)", "kafkalite -> count()")
    row("cached rows -> Parquet", None)
    row("cached rows -> kafkalite sink", "cached rows -> Parquet")
    row("stream -> sink, at-least-once", None)
    row("stream -> sink, exactly-once", "stream -> sink, at-least-once")
    row("stream -> sink, at-least-once (start incl.)", None)
    row("stream -> sink, exactly-once (start incl.)", "stream -> sink, at-least-once (start incl.)")
    print(
        "ceilings: memory = a Python source yielding the same Arrow batches from memory (Spark's own\n"
        "limit for a Python source); the stream is against the batch read into count(); the sink\n"
        "against writing the same cached rows to Parquet; exactly-once against at-least-once.\n"
        "Streams: rows/s over the micro-batches' execution (progress triggerExecution), and with the\n"
        "query's start-up. Broker CPU per GB of record values read or written."
    )
    targets = {
        "kafkalite -> count() >= 0.7x ceiling": med["kafkalite -> count()"]
        >= 0.7 * med["memory -> count()"],
        "kafkalite -> Parquet >= 0.7x ceiling": med["kafkalite -> Parquet"]
        >= 0.7 * med["memory -> Parquet"],
        "stream >= 0.7x batch read": med["stream -> noop"] >= 0.7 * med["kafkalite -> count()"],
        "sink >= 0.7x Parquet": med["cached rows -> kafkalite sink"]
        >= 0.7 * med["cached rows -> Parquet"],
    }
    for name, ok in targets.items():
        print(f"target {name}: {'met' if ok else 'NOT met'}")
    if args.txn_records:
        rc, ru = (
            median(isolation_rates["read_committed"]),
            median(isolation_rates["read_uncommitted"]),
        )
        print(
            f"\nstreaming read of {committed:,} committed records (+ aborted transactions), "
            f"AvailableNow -> noop:\n  read_uncommitted {ru:>12,.0f} rows/s\n  read_committed   "
            f"{rc:>12,.0f} rows/s\n  read_committed / read_uncommitted = {rc / ru:.2f}x (target "
            f">= 0.8x: {'met' if rc >= 0.8 * ru else 'NOT met'})"
        )
    return 0


# -- the clickstream pipeline: standalone cluster against local[2] ---------------------------------


def _standalone_cluster(work: Path, workers: int, cores: int) -> tuple[str, list]:
    """A master and `workers` workers from pyspark's own bin/spark-class, each in its own process
    group; returns (spark:// URL, processes). Executors inherit this environment (PYTHONPATH)."""
    import json
    import urllib.request

    import pyspark

    spark_class = str(Path(pyspark.__file__).parent / "bin" / "spark-class")
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_DAEMON_MEMORY": "256m"}
    env["SPARK_WORKER_DIR"] = str(work / "worker")
    port, web = free_port(), free_port()
    url = f"spark://127.0.0.1:{port}"
    daemon = [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1"]
    daemon += ["--port", str(port), "--webui-port", str(web)]
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    procs = [subprocess.Popen(daemon, env=env, start_new_session=True, **quiet)]
    for _ in range(workers):
        worker = [spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1"]
        worker += ["--cores", str(cores), "--memory", "1g", "--webui-port", str(free_port())]
        procs.append(subprocess.Popen(worker, env=env, start_new_session=True, **quiet))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{web}/json/", timeout=2) as r:
                alive = [w for w in json.load(r)["workers"] if w["state"] == "ALIVE"]
            if len(alive) == workers:
                return url, procs
        except OSError:
            pass
        time.sleep(0.5)
    _stop_groups(procs)
    raise RuntimeError(f"{workers} Spark workers did not register")


def _stop_groups(procs: list) -> None:
    import signal

    for proc in reversed(procs):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(30)


def _pipeline_rate(
    master: str, servers: str, topics: dict[str, str], work: Path, events: list, per_trigger: int
) -> tuple[float, float]:
    """One session on `master`: a warm-up pipeline run on a small topic, then the timed one on the full
    topic (fresh checkpoints); checks the Parquet table is exact. Returns (records/s, seconds)."""
    from pyspark.sql import SparkSession

    import kafkalite.spark
    from kafkalite.spark.pipeline import (
        PipelineConfig,
        read_parquet_aggregates,
        run_available_now,
        window_aggregates,
    )

    builder = (
        SparkSession.builder.master(master)
        .appName("kafkalite-bench-pipeline")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "1g")
        .config("spark.executor.memory", "512m")
    )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    kafkalite.spark.register(spark)
    tag = "local" if master.startswith("local") else "cluster"
    try:
        timed = 0.0
        for name in ("warmup", "timed"):
            cfg = PipelineConfig(
                bootstrap_servers=servers,
                input_topic=topics[name],
                output_topic=f"{topics[name]}-out-{tag}",
                parquet_path=str(work / tag / name / "table"),
                checkpoint_dir=str(work / tag / name / "ckpt"),
                max_offsets_per_trigger=per_trigger,
            )
            t0 = time.perf_counter()
            run_available_now(spark, cfg, timeout=1800)
            timed = time.perf_counter() - t0
        got = read_parquet_aggregates(spark, str(work / tag / "timed" / "table"))
        if got != window_aggregates(events[:-1], 60):  # the last event only moves the watermark
            raise RuntimeError(f"the pipeline on {master} produced wrong aggregates")
    finally:
        spark.stop()
    return len(events) / timed, timed


def pipeline_cluster_main(argv: list[str]) -> int:
    """The clickstream pipeline (both sinks, availableNow) on a standalone cluster of `--workers`
    workers x `--cores` against local[N] with the same total cores, same broker and input, one run."""
    from datetime import UTC, datetime, timedelta

    from kafkalite.spark.pipeline import encode_events, generate_page_views, page_view

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # driver, master, workers: loopback only
    ap = argparse.ArgumentParser(prog="bench_spark.py --pipeline-cluster")
    ap.add_argument("--events", type=int, default=20_000, help="page views in the timed run")
    ap.add_argument("--max-offsets-per-trigger", type=int, default=5_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--cores", type=int, default=1, help="cores per worker")
    args = ap.parse_args(argv)
    cores = args.workers * args.cores
    start = datetime(2026, 1, 1, tzinfo=UTC)
    events = generate_page_views(args.events, start, timedelta(minutes=30))
    events.append(page_view("user-flush", "/home", start + timedelta(hours=2)))
    warmup = generate_page_views(500, start, timedelta(minutes=5), seed=3)
    warmup.append(page_view("user-flush", "/home", start + timedelta(hours=2)))
    with tempfile.TemporaryDirectory(prefix="kafkalite-bench-pipeline-") as tmp:
        work = Path(tmp)
        broker, servers = start_broker(work / "broker")
        procs: list = []
        try:
            run = uuid.uuid4().hex[:8]
            topics = {"warmup": f"clicks-warmup-{run}", "timed": f"clicks-{run}"}
            with KafkaAdminClient(bootstrap_servers=servers) as admin:
                admin.create_topics([NewTopic(t, 3) for t in topics.values()])
            with KafkaProducer(bootstrap_servers=servers, linger_ms=5) as producer:
                for name, evs in (("warmup", warmup), ("timed", events)):
                    for key, value in encode_events(evs):
                        producer.send(topics[name], value=value, key=key)
                producer.flush(120)
            print(
                f"{len(events):,} page views in 3 partitions; maxOffsetsPerTrigger "
                f"{args.max_offsets_per_trigger:,}; both sinks (Parquet, exactly-once topic)"
            )
            local = _pipeline_rate(
                f"local[{cores}]", servers, topics, work, events, args.max_offsets_per_trigger
            )
            print(f"local[{cores}]: {local[0]:,.0f} records/s ({local[1]:.1f} s)")
            url, procs = _standalone_cluster(work / "spark", args.workers, args.cores)
            cluster = _pipeline_rate(
                url, servers, topics, work, events, args.max_offsets_per_trigger
            )
            print(
                f"standalone {args.workers} x {args.cores} core(s): {cluster[0]:,.0f} records/s "
                f"({cluster[1]:.1f} s)"
            )
        finally:
            _stop_groups(procs)
            broker.terminate()
            broker.wait(30)
    print(f"\n{'master':<34}{'records/s':>12}{'vs local':>10}")
    print(f"{f'local[{cores}]':<34}{local[0]:>12,.0f}{1.0:>9.2f}x")
    name = f"standalone, {args.workers} workers x {args.cores} core"
    print(f"{name:<34}{cluster[0]:>12,.0f}{cluster[0] / local[0]:>9.2f}x")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--pipeline-cluster"]:
        sys.exit(pipeline_cluster_main(sys.argv[2:]))
    sys.exit(main())
