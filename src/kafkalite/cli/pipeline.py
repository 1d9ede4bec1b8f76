"""`kafkalite pipeline`: the clickstream demo — an embedded broker, a generated page-view stream, and the
Spark pipeline run twice from the same checkpoint (a stop and restart), checked against plain Python.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "pipeline",
        help="run the clickstream demo: embedded broker, generated page views, Spark pipeline",
    )
    p.add_argument("--events", type=int, default=2000, help="page views per phase (default 2000)")
    p.add_argument("--minutes", type=int, default=10, help="event-time span per phase (default 10)")
    p.add_argument(
        "--work-dir", help="broker data, checkpoints and the Parquet table (default: temp)"
    )
    p.add_argument("--bootstrap-server", help="use this broker instead of starting an embedded one")
    p.add_argument("--input-topic", default="clickstream")
    p.add_argument("--output-topic", default="clickstream-aggregates")
    p.add_argument("--max-offsets-per-trigger", type=int, default=1000)
    p.set_defaults(func=run)


def _spark() -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import kafkalite.spark

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("kafkalite-clickstream")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    kafkalite.spark.register(spark)
    return spark


def _print_table(rows: dict[Any, tuple[int, int]], title: str) -> None:
    print(f"\n{title} ({len(rows)} windows)")
    print(f"  {'window start (UTC)':<20} {'category':<10} {'views':>6} {'users':>6}")
    for (start, category), (views, users) in sorted(rows.items()):
        print(f"  {start:%Y-%m-%d %H:%M}     {category:<10} {views:>6} {users:>6}")


def run(args: argparse.Namespace) -> int:
    try:
        import pyspark  # noqa: F401
    except ImportError:
        print("error: the pipeline needs PySpark: pip install 'kafkalite[spark]'", file=sys.stderr)
        return 1
    from kafkalite.client import (
        KafkaAdminClient,
        KafkaConsumer,
        KafkaProducer,
        NewTopic,
        TopicPartition,
    )
    from kafkalite.spark.pipeline import (
        PipelineConfig,
        encode_events,
        generate_page_views,
        page_view,
        parse_topic_aggregates,
        read_parquet_aggregates,
        run_available_now,
        window_aggregates,
    )
    from kafkalite.testing import Broker

    tmp = None
    if args.work_dir:
        work = Path(args.work_dir)
        work.mkdir(parents=True, exist_ok=True)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="kafkalite-pipeline-")
        work = Path(tmp.name)
    broker = None
    try:
        if args.bootstrap_server:
            servers = args.bootstrap_server
        else:
            broker = Broker(work / "broker").start()
            servers = broker.bootstrap_servers
            print(f"embedded kafkalite broker on {servers} (data in {work / 'broker'})")
        with KafkaAdminClient(bootstrap_servers=servers) as admin:
            existing = set(admin.list_topics())
            new = [
                NewTopic(t, n)
                for t, n in ((args.input_topic, 3), (args.output_topic, 1))
                if t not in existing
            ]
            if new:
                admin.create_topics(new)
        cfg = PipelineConfig(
            bootstrap_servers=servers,
            input_topic=args.input_topic,
            output_topic=args.output_topic,
            parquet_path=str(work / "table"),
            checkpoint_dir=str(work / "checkpoints"),
            max_offsets_per_trigger=args.max_offsets_per_trigger,
        )
        start = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(hours=2)
        span = timedelta(minutes=args.minutes)
        print("starting Spark (local[2]) ...")
        spark = _spark()

        def send(events: list[dict[str, str]]) -> None:
            with KafkaProducer(bootstrap_servers=servers) as producer:
                for key, value in encode_events(events):
                    producer.send(args.input_topic, value=value, key=key)
                producer.flush(60)

        first = generate_page_views(args.events, start, span, seed=1)
        send(first)
        t0 = time.monotonic()
        run_available_now(spark, cfg)
        print(f"phase 1: {len(first)} page views processed in {time.monotonic() - t0:.1f} s")
        _print_table(
            read_parquet_aggregates(spark, cfg.parquet_path), "Parquet table after phase 1"
        )

        print("\nstopped; restarting from the checkpoints with more page views ...")
        second = generate_page_views(args.events, start + span, span, seed=2)
        flush = page_view("user-flush", "/home", start + 2 * span + timedelta(hours=1))
        send([*second, flush])
        t0 = time.monotonic()
        run_available_now(spark, cfg)
        print(f"phase 2: {len(second) + 1} page views processed in {time.monotonic() - t0:.1f} s")
        table = read_parquet_aggregates(spark, cfg.parquet_path)
        _print_table(table, "Parquet table after phase 2")

        with KafkaConsumer(
            bootstrap_servers=servers, auto_offset_reset="earliest", enable_auto_commit=False
        ) as consumer:
            tp = TopicPartition(args.output_topic, 0)
            end = consumer.end_offsets([tp])[tp]
            consumer.assign([tp])
            consumer.seek_to_beginning(tp)
            values: list[bytes] = []
            deadline = time.monotonic() + 30
            while consumer.position(tp) < end and time.monotonic() < deadline:
                for recs in consumer.poll(500).values():
                    values.extend(r.value for r in recs)
        topic_rows = parse_topic_aggregates(values)
        expected = window_aggregates(first + second, 60)
        ok = table == expected and topic_rows == expected
        print(
            f"\n{len(values)} aggregate records in topic {args.output_topic!r}; "
            f"Parquet and topic {'match' if ok else 'DO NOT match'} the expected aggregates"
        )
        spark.stop()
        return 0 if ok else 2
    finally:
        if broker is not None:
            broker.stop()
        if tmp is not None:
            tmp.cleanup()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kafkalite")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["pipeline", *(argv if argv is not None else sys.argv[1:])])
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
