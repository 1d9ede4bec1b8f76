"""Clickstream pipeline on Spark with kafkalite: page views (JSON: user, page, ts) from a topic, parsed,
watermarked, joined with a page dimension table, counted per 1-minute window, written to a topic and a
Parquet table (both checkpointed; stop it any time and start it again: it resumes where it stopped).

    kafkalite serve &                                  # a broker on 127.0.0.1:9092
    python examples/clickstream_pipeline.py --generate 5000 --available-now
    python examples/clickstream_pipeline.py            # keeps running; Ctrl-C to stop
    python examples/clickstream_pipeline.py --master spark://HOST:7077 --conf spark.executor.memory=1g

`kafkalite pipeline` runs the same job against an embedded broker, end to end, with a restart.
"""

from __future__ import annotations

import argparse
import os
import sys
from datetime import UTC, datetime, timedelta

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers need this interpreter's pyarrow


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--master",
        default=os.environ.get("SPARK_MASTER", "local[2]"),
        help="Spark master as spark-submit takes it (local[N], spark://HOST:PORT)",
    )
    parser.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark property, as spark-submit's --conf (repeatable)",
    )
    parser.add_argument("--bootstrap-servers", default="127.0.0.1:9092")
    parser.add_argument("--input-topic", default="clickstream")
    parser.add_argument("--output-topic", default="clickstream-aggregates")
    parser.add_argument("--table", default="clickstream-out/table")
    parser.add_argument("--checkpoint", default="clickstream-out/checkpoints")
    parser.add_argument("--generate", type=int, default=0, help="first produce N page views")
    parser.add_argument("--available-now", action="store_true", help="process what is there, stop")
    parser.add_argument("--max-offsets-per-trigger", type=int, default=10_000)
    args = parser.parse_args()

    from pyspark.sql import SparkSession

    import kafkalite.spark
    from kafkalite.client import KafkaProducer
    from kafkalite.spark.pipeline import (
        PipelineConfig,
        encode_events,
        generate_page_views,
        read_parquet_aggregates,
        run_available_now,
        start_pipeline,
    )

    if args.generate:
        start = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=30)
        with KafkaProducer(bootstrap_servers=args.bootstrap_servers) as producer:
            for key, value in encode_events(
                generate_page_views(args.generate, start, timedelta(minutes=20))
            ):
                producer.send(args.input_topic, value=value, key=key)
            producer.flush(60)

    builder = (
        SparkSession.builder.master(args.master)
        .appName("clickstream")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
    )
    for pair in args.conf:
        key, sep, value = pair.partition("=")
        if not sep:
            parser.error(f"--conf takes KEY=VALUE, got {pair!r}")
        builder = builder.config(key.strip(), value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    kafkalite.spark.register(spark)
    cfg = PipelineConfig(
        bootstrap_servers=args.bootstrap_servers,
        input_topic=args.input_topic,
        output_topic=args.output_topic,
        parquet_path=os.path.abspath(args.table),
        checkpoint_dir=os.path.abspath(args.checkpoint),
        max_offsets_per_trigger=args.max_offsets_per_trigger,
    )
    if args.available_now:
        run_available_now(spark, cfg)
    else:
        queries = start_pipeline(spark, cfg)
        try:
            spark.streams.awaitAnyTermination()
        except KeyboardInterrupt:
            pass
        finally:
            for q in queries:
                q.stop()
    try:
        rows = read_parquet_aggregates(spark, cfg.parquet_path)
    except Exception:  # nothing written yet
        rows = {}
    for (start, category), (views, users) in sorted(rows.items()):
        print(f"{start:%Y-%m-%d %H:%M} {category:<10} views={views:<5} users={users}")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
