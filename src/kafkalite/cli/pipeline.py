"""`kafkalite pipeline`: the clickstream demo — an embedded broker (or yours), a generated page-view stream,
and the Spark pipeline run twice from the same checkpoint (a stop and restart), checked against plain Python.

Every run has its own id: its topics, checkpoints, table and chart are its own, so runs can repeat
against one shared broker; results stay in the work directory, whose path is printed.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from kafkalite.cli.wire import EXIT_ERROR, CliError


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "pipeline",
        help="run the clickstream demo: embedded broker, generated page views, Spark pipeline",
    )
    p.add_argument("--events", type=int, default=2000, help="page views per phase (default 2000)")
    p.add_argument("--minutes", type=int, default=10, help="event-time span per phase (default 10)")
    p.add_argument(
        "--out",
        "--work-dir",
        dest="work_dir",
        default=default_work_dir(),
        help="where each run keeps its checkpoints, Parquet table and chart, in a folder named by "
        f"its run id (default {default_work_dir()}; the path is printed)",
    )
    p.add_argument(
        "--run-id", help="name of this run (default: the time and a random suffix); topics, "
        "checkpoints and results are named by it"
    )  # fmt: skip
    p.add_argument("--bootstrap-server", help="use this broker instead of starting an embedded one")
    p.add_argument(
        "--master",
        default=os.environ.get("SPARK_MASTER", "local[2]"),
        help="Spark master, as spark-submit takes it (local[N], spark://HOST:PORT; default "
        "$SPARK_MASTER or local[2])",
    )
    p.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark property, as spark-submit's --conf (repeatable; e.g. spark.executor.memory=1g)",
    )
    p.add_argument("--input-topic", help="default clickstream-<run id>")
    p.add_argument("--output-topic", help="default clickstream-aggregates-<run id>")
    p.add_argument("--max-offsets-per-trigger", type=int, default=1000)
    p.add_argument(
        "--verbose", action="store_true", help="print every window, not only the summary"
    )
    p.set_defaults(func=run)


def default_work_dir() -> str:
    """Under the system's temp directory, never the current one (a repo checkout would show it as
    untracked files)."""
    return str(Path(tempfile.gettempdir()) / "kafkalite-pipeline")


def chart_note(charts: list[Path]) -> str:
    """The chart line of the summary: the files written, and why there is no PNG when there is none."""
    note = f"chart: {', '.join(str(c) for c in charts)}"
    if not any(c.suffix == ".png" for c in charts):
        note += " (SVG only: matplotlib is not installed; pip install matplotlib for a PNG too)"
    return note


def _spark_conf(pairs: list[str]) -> dict[str, str]:
    conf: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise CliError(f"--conf takes KEY=VALUE, got {pair!r}")
        conf[key.strip()] = value
    return conf


def _spark(master: str, conf: dict[str, str]) -> tuple[Any, bool]:
    """The session to run on and whether this command made it (then it stops it at the end)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import kafkalite.spark

    existing = SparkSession.getActiveSession()
    if existing is not None:
        kafkalite.spark.register(existing)
        return existing, False
    builder = (
        SparkSession.builder.master(master)
        .appName("kafkalite-clickstream")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
    )
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    kafkalite.spark.register(spark)
    return spark, True


def _print_table(rows: dict[Any, tuple[int, int]], title: str) -> None:
    print(f"\n{title} ({len(rows)} windows)")
    print(f"  {'window start (UTC)':<20} {'category':<10} {'views':>6} {'users':>6}")
    for (start, category), (views, users) in sorted(rows.items()):
        print(f"  {start:%Y-%m-%d %H:%M}     {category:<10} {views:>6} {users:>6}")


def _print_summary(rows: dict[Any, tuple[int, int]], title: str) -> None:
    """Per category: windows, page views, the busiest window; and the totals."""
    per: dict[str, list[tuple[Any, int]]] = {}
    for (start, category), (views, _users) in rows.items():
        per.setdefault(category, []).append((start, views))
    windows = len({start for start, _ in rows})
    print(f"\n{title}: {windows} one-minute windows, {len(per)} categories")
    print(f"  {'category':<12} {'windows':>7} {'views':>7}  busiest window (UTC)")
    total = 0
    for category in sorted(per):
        items = per[category]
        views = sum(v for _, v in items)
        total += views
        start, peak = max(items, key=lambda it: it[1])
        print(f"  {category:<12} {len(items):>7} {views:>7}  {start:%H:%M} ({peak} views)")
    print(f"  {'total':<12} {len(rows):>7} {total:>7}")


def _chart(rows: dict[Any, tuple[int, int]], stem: Path) -> list[Path]:
    from kafkalite.cli.chart import write_chart

    starts = sorted({start for start, _ in rows})
    categories = sorted({category for _, category in rows})
    series = {c: [float(rows.get((s, c), (0, 0))[0]) for s in starts] for c in categories}
    return write_chart(
        stem,
        "Page views per minute and category",
        [f"{s:%H:%M}" for s in starts],
        series,
        y_label="page views",
    )


def _new_run_id() -> str:
    return f"{datetime.now(UTC):%Y%m%d-%H%M%S}-{secrets.token_hex(2)}"


def run(args: argparse.Namespace) -> int:
    try:
        import pyspark  # noqa: F401
    except ImportError:
        print("error: the pipeline needs PySpark: pip install 'kafkalite[spark]'", file=sys.stderr)
        return EXIT_ERROR
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

    if not (os.environ.get("JAVA_HOME") or shutil.which("java")):
        raise CliError(
            "Spark needs a Java runtime (17 or newer) and none was found: install one "
            "(e.g. apt-get install openjdk-17-jre-headless) or set JAVA_HOME"
        )
    conf = _spark_conf(args.conf)
    run_id = args.run_id or _new_run_id()
    work = Path(args.work_dir).resolve() / run_id
    if args.run_id and (work / "checkpoints").exists():
        raise CliError(
            f"run {run_id!r} already has results in {work}; pick another --run-id (or none)"
        )
    work.mkdir(parents=True, exist_ok=True)
    input_topic = args.input_topic or f"clickstream-{run_id}"
    output_topic = args.output_topic or f"clickstream-aggregates-{run_id}"
    print(f"run {run_id}: results in {work}")
    broker = None
    spark = None
    owned = False
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
                for t, n in ((input_topic, 3), (output_topic, 1))
                if t not in existing
            ]
            if new:
                admin.create_topics(new)
        cfg = PipelineConfig(
            bootstrap_servers=servers,
            input_topic=input_topic,
            output_topic=output_topic,
            parquet_path=str(work / "table"),
            checkpoint_dir=str(work / "checkpoints"),
            max_offsets_per_trigger=args.max_offsets_per_trigger,
        )
        start = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(hours=2)
        span = timedelta(minutes=args.minutes)
        print(f"starting Spark ({args.master}) ...")
        spark, owned = _spark(args.master, conf)

        def send(events: list[dict[str, str]]) -> None:
            with KafkaProducer(bootstrap_servers=servers) as producer:
                for key, value in encode_events(events):
                    producer.send(input_topic, value=value, key=key)
                producer.flush(60)

        first = generate_page_views(args.events, start, span, seed=1)
        send(first)
        t0 = time.monotonic()
        run_available_now(spark, cfg)
        phase1 = time.monotonic() - t0
        print(f"phase 1: {len(first)} page views processed in {phase1:.1f} s")
        if args.verbose:
            _print_table(
                read_parquet_aggregates(spark, cfg.parquet_path), "Parquet table after phase 1"
            )

        print("stopped; restarting from the checkpoints with more page views ...")
        second = generate_page_views(args.events, start + span, span, seed=2)
        flush = page_view("user-flush", "/home", start + 2 * span + timedelta(hours=1))
        send([*second, flush])
        t0 = time.monotonic()
        run_available_now(spark, cfg)
        print(
            f"phase 2: {len(second)} page views and 1 flush event processed in "
            f"{time.monotonic() - t0:.1f} s (the flush event, an hour of event time later, moves the "
            "watermark past phase 2's windows so they are written; its own window stays open, so it "
            "is in no table below)"
        )
        table = read_parquet_aggregates(spark, cfg.parquet_path)
        if args.verbose:
            _print_table(table, "Parquet table after phase 2")
        _print_summary(table, "Parquet table, phases 1 and 2 (the flush event is in no window yet)")

        with (
            KafkaConsumer(  # the sink is transactional: what an aborted attempt wrote is not output
                bootstrap_servers=servers,
                auto_offset_reset="earliest",
                enable_auto_commit=False,
                isolation_level="read_committed",
            ) as consumer
        ):
            tp = TopicPartition(output_topic, 0)
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
        charts = _chart(table, work / "page-views")
        print(
            f"\n{len(values)} aggregate records in topic {output_topic!r}; "
            f"Parquet and topic {'match' if ok else 'DO NOT match'} the expected aggregates"
        )
        print(chart_note(charts))
        print(f"table: {work / 'table'} (Parquet); checkpoints: {work / 'checkpoints'}")
        return 0 if ok else 2
    finally:
        if spark is not None and owned:
            spark.stop()
        if broker is not None:
            broker.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kafkalite")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["pipeline", *(argv if argv is not None else sys.argv[1:])])
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
