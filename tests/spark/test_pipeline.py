"""The clickstream pipeline end to end: known page views in, exact window aggregates out in the Parquet
table and the output topic, across a stop and restart from the checkpoint."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from spark_support import consume_all

from kafkalite.client import KafkaProducer
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

pytestmark = pytest.mark.spark

START = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def _send(broker, topic, events):
    with KafkaProducer(bootstrap_servers=broker.bootstrap_servers, linger_ms=1) as producer:
        for key, value in encode_events(events):
            producer.send(topic, value=value, key=key)
        producer.flush(30)


def test_clickstream_pipeline_exact_aggregates_across_restart(spark, broker, topic, tmp_path):
    source, sink = topic + "-views", topic + "-aggregates"
    broker.create_topic(source, 3)
    broker.create_topic(sink, 1)
    cfg = PipelineConfig(
        bootstrap_servers=broker.bootstrap_servers,
        input_topic=source,
        output_topic=sink,
        parquet_path=str(tmp_path / "table"),
        checkpoint_dir=str(tmp_path / "checkpoints"),
        window="1 minute",
        watermark="30 seconds",
        max_offsets_per_trigger=150,
    )
    # phase 1: minutes 0-4 (jitter <= 5 s, well inside the 30 s watermark)
    first = generate_page_views(400, START, timedelta(minutes=5), seed=1)
    _send(broker, source, first)
    run_available_now(spark, cfg)
    done_after_first = read_parquet_aggregates(spark, cfg.parquet_path)
    expected_first = window_aggregates(first, 60)
    # windows that closed (end <= watermark) are final and exact; the last one is still open
    assert done_after_first
    assert all(expected_first[k] == v for k, v in done_after_first.items())
    assert max(k[0] for k in done_after_first) < START + timedelta(minutes=4)

    # phase 2, after a restart from the checkpoints: late-but-allowed views of minute 4, then minutes
    # 5-9, then one view an hour later that moves the watermark past every window above
    second = [page_view("user-late", "/cart", START + timedelta(minutes=4, seconds=50))]
    second += generate_page_views(300, START + timedelta(minutes=5), timedelta(minutes=5), seed=2)
    flush = page_view("user-flush", "/home", START + timedelta(hours=1))
    _send(broker, source, [*second, flush])
    run_available_now(spark, cfg)

    expected = window_aggregates(first + second, 60)
    assert read_parquet_aggregates(spark, cfg.parquet_path) == expected
    assert parse_topic_aggregates([r.value for r in consume_all(broker, sink)]) == expected
