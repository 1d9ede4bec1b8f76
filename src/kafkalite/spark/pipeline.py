"""The clickstream pipeline on Spark: JSON page views (user, page, ts) from a kafkalite topic, parsed,
watermarked, joined with a page dimension table, counted in event-time windows, written to a kafkalite
topic (exactly-once sink) and a Parquet table, both checkpointed: a restart, or an executor lost mid-batch,
resumes without loss or double counting.
"""

from __future__ import annotations

import json
import random
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

PAGE_VIEW_SCHEMA = "user STRING, page STRING, ts TIMESTAMP"

# The dimension table: page -> category. Pages not listed are counted under "other".
PAGES: tuple[tuple[str, str], ...] = (
    ("/", "landing"),
    ("/home", "landing"),
    ("/search", "discovery"),
    ("/catalog", "discovery"),
    ("/product/1", "product"),
    ("/product/2", "product"),
    ("/product/3", "product"),
    ("/cart", "checkout"),
    ("/checkout", "checkout"),
    ("/help", "support"),
)
UNKNOWN_CATEGORY = "other"


@dataclass(frozen=True)
class PipelineConfig:
    bootstrap_servers: str
    input_topic: str
    output_topic: str
    parquet_path: str
    checkpoint_dir: str
    window: str = "1 minute"
    watermark: str = "30 seconds"
    max_offsets_per_trigger: int | None = None
    starting_offsets: str = "earliest"
    # the topic sink's transactions: a task re-run after a lost executor writes its windows once
    # (read them with read_committed); False is Spark's at-least-once Kafka sink
    exactly_once: bool = True


# -- event generation (the demo and the tests) -----------------------------------------------------


def page_view(user: str, page: str, ts: datetime) -> dict[str, str]:
    return {"user": user, "page": page, "ts": ts.astimezone(UTC).isoformat(timespec="milliseconds")}


def generate_page_views(
    count: int,
    start: datetime,
    span: timedelta,
    *,
    users: int = 25,
    seed: int = 7,
    jitter: timedelta = timedelta(seconds=5),
) -> list[dict[str, str]]:
    """`count` page views spread over [start, start+span), mostly in order with small disorder,
    a few pages outside the dimension table (as a real site has)."""
    rng = random.Random(seed)
    pages = [p for p, _ in PAGES] + ["/blog/launch", "/careers"]
    weights = [6, 10, 8, 5, 7, 6, 5, 4, 3, 2, 1, 1]
    out = []
    step = span / max(1, count)
    for i in range(count):
        ts = start + step * i + timedelta(seconds=rng.uniform(0, jitter.total_seconds()))
        ts = min(ts, start + span - timedelta(milliseconds=1))
        user = f"user-{rng.randrange(users):03d}"
        out.append(page_view(user, rng.choices(pages, weights)[0], ts))
    return out


def encode_events(events: Iterable[dict[str, str]]) -> list[tuple[bytes, bytes]]:
    """(key, value) pairs: keyed by user so one user's views stay in one partition."""
    return [(e["user"].encode(), json.dumps(e, separators=(",", ":")).encode()) for e in events]


def window_aggregates(
    events: Iterable[dict[str, str]], window_seconds: int
) -> dict[tuple[datetime, str], tuple[int, int]]:
    """What the pipeline computes, in plain Python: (window start, category) -> (views, users)."""
    category = dict(PAGES)
    views: dict[tuple[datetime, str], int] = defaultdict(int)
    users: dict[tuple[datetime, str], set[str]] = defaultdict(set)
    for e in events:
        ts = datetime.fromisoformat(e["ts"]).astimezone(UTC)
        epoch = int(ts.timestamp() // window_seconds) * window_seconds
        key = (datetime.fromtimestamp(epoch, UTC), category.get(e["page"], UNKNOWN_CATEGORY))
        views[key] += 1
        users[key].add(e["user"])
    return {k: (views[k], len(users[k])) for k in views}


# -- the Spark job ---------------------------------------------------------------------------------


def page_dimension(spark: Any) -> Any:
    return spark.createDataFrame(list(PAGES), "page STRING, category STRING")


def build_aggregates(spark: Any, cfg: PipelineConfig) -> Any:
    """The streaming DataFrame of finished windows: window_start, window_end, category, views, users."""
    from pyspark.sql import functions as F

    reader = (
        spark.readStream.format("kafkalite")
        .option("kafka.bootstrap.servers", cfg.bootstrap_servers)
        .option("subscribe", cfg.input_topic)
        .option("startingOffsets", cfg.starting_offsets)
    )
    if cfg.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(cfg.max_offsets_per_trigger))
    raw = reader.load()
    views = (
        raw.select(F.from_json(F.col("value").cast("string"), PAGE_VIEW_SCHEMA).alias("e"))
        .select("e.*")
        .where(F.col("user").isNotNull() & F.col("page").isNotNull() & F.col("ts").isNotNull())
        .withWatermark("ts", cfg.watermark)
    )
    enriched = views.join(F.broadcast(page_dimension(spark)), "page", "left").withColumn(
        "category", F.coalesce(F.col("category"), F.lit(UNKNOWN_CATEGORY))
    )
    return (
        enriched.groupBy(F.window("ts", cfg.window).alias("w"), "category")
        .agg(F.count("*").alias("views"), F.size(F.collect_set("user")).alias("users"))
        .select(
            F.col("w.start").alias("window_start"),
            F.col("w.end").alias("window_end"),
            "category",
            "views",
            "users",
        )
    )


def start_pipeline(spark: Any, cfg: PipelineConfig, *, available_now: bool = False) -> list[Any]:
    """Start the two checkpointed sinks (Parquet table, kafkalite topic); returns the queries."""
    from pyspark.sql import functions as F

    aggregates = build_aggregates(spark, cfg)
    ckpt = Path(cfg.checkpoint_dir)

    def trigger(writer: Any) -> Any:
        return writer.trigger(availableNow=True) if available_now else writer

    parquet = trigger(
        aggregates.writeStream.format("parquet")
        .outputMode("append")
        .option("path", cfg.parquet_path)
        .option("checkpointLocation", str(ckpt / "parquet"))
        .queryName(f"clickstream_parquet_{cfg.output_topic}")
    ).start()
    to_topic = trigger(
        aggregates.select(
            F.col("category").alias("key"),
            F.to_json(
                F.struct(
                    F.date_format("window_start", "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("window_start"),
                    F.date_format("window_end", "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("window_end"),
                    "category",
                    "views",
                    "users",
                )
            ).alias("value"),
        )
        .writeStream.format("kafkalite")
        .outputMode("append")
        .option("kafka.bootstrap.servers", cfg.bootstrap_servers)
        .option("topic", cfg.output_topic)
        .option("kafkalite.sink.exactlyOnce", "true" if cfg.exactly_once else "false")
        .option("checkpointLocation", str(ckpt / "topic"))
        .queryName(f"clickstream_topic_{cfg.output_topic}")
    ).start()
    return [parquet, to_topic]


def run_available_now(spark: Any, cfg: PipelineConfig, timeout: float = 300) -> None:
    """Process everything in the input topic now (both sinks), then stop; raises if a query failed."""
    queries = start_pipeline(spark, cfg, available_now=True)
    try:
        for q in queries:
            if not q.awaitTermination(timeout):
                raise TimeoutError(f"query {q.name} did not finish within {timeout} s")
            if q.exception() is not None:
                raise RuntimeError(f"query {q.name} failed: {q.exception()}")
    finally:
        for q in queries:
            if q.isActive:
                q.stop()


def read_parquet_aggregates(spark: Any, path: str) -> dict[tuple[datetime, str], tuple[int, int]]:
    """The Parquet table as {(window start UTC, category): (views, users)}; raises on duplicates."""
    from pyspark.sql import functions as F

    out: dict[tuple[datetime, str], tuple[int, int]] = {}
    table = spark.read.parquet(path).select(
        F.col("window_start").cast("long").alias("start"), "category", "views", "users"
    )
    for row in table.collect():
        key = (datetime.fromtimestamp(row["start"], UTC), row["category"])
        if key in out:
            raise AssertionError(f"window {key} appears twice in the Parquet table")
        out[key] = (int(row["views"]), int(row["users"]))
    return out


def parse_topic_aggregates(values: Sequence[bytes]) -> dict[tuple[datetime, str], tuple[int, int]]:
    """Output-topic records as {(window start UTC, category): (views, users)}; raises on duplicates."""
    out: dict[tuple[datetime, str], tuple[int, int]] = {}
    for raw in values:
        doc = json.loads(raw)
        start = datetime.strptime(doc["window_start"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        key = (start, doc["category"])
        if key in out:
            raise AssertionError(f"window {key} appears twice in the output topic")
        out[key] = (int(doc["views"]), int(doc["users"]))
    return out
