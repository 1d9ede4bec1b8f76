"""GET /metrics: Prometheus text that prometheus_client parses, JMX-exporter names, counters the broker keeps
per batch, consumer-group lag from committed offsets, and the bucket arithmetic underneath.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from kafkalite.broker.stats import BrokerStats
from kafkalite.client import KafkaConsumer, KafkaProducer
from kafkalite.storage.latency import BOUNDS_MS, LatencyHistogram
from kafkalite.testing import Broker

HTTP = {"http.listeners": "http://127.0.0.1:0", "group.initial.rebalance.delay.ms": "0"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    # every log flushes after each append, so the flush histogram fills too
    config = {**HTTP, "log.flush.interval.messages": "1"}
    with Broker(tmp_path_factory.mktemp("metrics") / "d", config=config) as b:
        yield b


def scrape(url: str) -> tuple[str, str]:
    with urllib.request.urlopen(url + "/metrics", timeout=10) as resp:
        return resp.headers["Content-Type"], resp.read().decode()


def samples(text: str) -> Iterator[Sample]:
    for family in text_string_to_metric_families(text):
        yield from family.samples


def value(text: str, name: str, **labels: str) -> float | None:
    for s in samples(text):
        if s.name == name and s.labels == labels:
            return s.value
    return None


def test_latency_histogram_buckets() -> None:
    h = LatencyHistogram()
    h.observe_ns(100_000)  # 0.1 ms
    h.observe_ns(1_000_000)  # exactly 1 ms: in le="1.0"
    h.observe_ns(60_000_000_000)  # a minute: only +Inf
    cumulative = dict(h.cumulative_ms())
    assert len(cumulative) == len(BOUNDS_MS) + 1
    assert cumulative["0.25"] == 1 and cumulative["1.0"] == 2 and cumulative["30000.0"] == 2
    assert cumulative["+Inf"] == h.count == 3
    assert h.sum_ns == 60_001_100_000


def test_deleted_topics_stay_in_the_all_topics_sums() -> None:
    stats = BrokerStats()
    stats.topic("a").messages_in += 5
    stats.topic("b").messages_in += 7
    stats.forget_topic("a")
    assert "a" not in stats.topics
    assert stats.all_topics().messages_in == 12


def test_request_stats_ignore_frames_that_are_no_kafka_request() -> None:
    stats = BrokerStats()
    stats.record_request(0, 0, 1_000, 3_000, 0, 3_000, 4_000)
    stats.record_request(0xFFFF, 0, 1, 2, 0, 2, 2)  # a SASL v0 token's first bytes
    assert list(stats.requests) == [0]
    rs = stats.requests[0]
    assert rs.requests == 1 and rs.total.sum_ns == 4_000 and rs.local.sum_ns == 2_000


def test_metrics_after_produce_consume_and_commit(broker: Broker) -> None:
    n = 500
    b = broker
    bs = f"{b.host}:{b.port}"
    with KafkaProducer(bootstrap_servers=bs, linger_ms=5) as p:
        for i in range(n):
            p.send("m1", value=b"v%05d" % i)
        p.flush()
    ctype, text = scrape(b.http_url)
    assert ctype.startswith("text/plain") and "version=0.0.4" in ctype
    assert value(text, "kafka_server_brokertopicmetrics_messagesin_total", topic="m1") == n
    per_topic = [
        s.value
        for s in samples(text)
        if s.name == "kafka_server_brokertopicmetrics_messagesin_total" and "topic" in s.labels
    ]
    assert value(text, "kafka_server_brokertopicmetrics_messagesin_total") == sum(per_topic)
    assert (value(text, "kafka_server_brokertopicmetrics_bytesin_total", topic="m1") or 0) > 0
    produce_requests = value(text, "kafka_network_requestmetrics_requests_total", request="Produce")
    assert produce_requests is not None and produce_requests >= 1
    assert value(text, "kafka_log_log_logendoffset", topic="m1", partition="0") == n
    assert value(text, "kafka_log_log_numlogsegments", topic="m1", partition="0") == 1
    assert value(text, "kafka_controller_kafkacontroller_activecontrollercount") == 1

    with KafkaConsumer(
        "m1",
        bootstrap_servers=bs,
        group_id="g-metrics",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    ) as c:
        got = 0
        deadline = time.monotonic() + 30
        while got < n and time.monotonic() < deadline:
            got += sum(len(recs) for recs in c.poll(500).values())
        assert got == n
        c.commit()
        _, text = scrape(b.http_url)
    assert value(text, "kafka_consumergroup_lag", group="g-metrics", topic="m1", partition="0") == 0
    assert (value(text, "kafka_server_brokertopicmetrics_bytesout_total", topic="m1") or 0) > 0
    fetches = value(text, "kafka_network_requestmetrics_totaltimems_count", request="Fetch")
    assert fetches is not None and fetches >= 1
    groups = value(
        text,
        "kafka_coordinator_group_groupmetadatamanager_numgroups",
        type="classic",
        state="Stable",
    )
    assert groups is not None and groups >= 1
    rebalances = value(
        text, "kafka_coordinator_group_groupmetadatamanager_rebalances_total", type="classic"
    )
    assert rebalances is not None and rebalances >= 1


def test_lag_counts_records_past_the_committed_offset(broker: Broker) -> None:
    b = broker
    bs = f"{b.host}:{b.port}"
    with KafkaProducer(bootstrap_servers=bs) as p:
        for i in range(10):
            p.send("lagged", value=b"%d" % i)
        p.flush()
    with KafkaConsumer(
        "lagged",
        bootstrap_servers=bs,
        group_id="g-lag",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    ) as c:
        got = 0
        deadline = time.monotonic() + 30
        while got < 10 and time.monotonic() < deadline:
            got += sum(len(recs) for recs in c.poll(500).values())
        c.commit()
    with KafkaProducer(bootstrap_servers=bs) as p:
        for i in range(7):
            p.send("lagged", value=b"%d" % i)
        p.flush()
    _, text = scrape(b.http_url)
    assert value(text, "kafka_consumergroup_lag", group="g-lag", topic="lagged", partition="0") == 7
    assert value(text, "kafka_server_brokertopicmetrics_messagesin_total", topic="lagged") == 17


def test_event_loop_probe_and_flush_times(broker: Broker) -> None:
    with KafkaProducer(bootstrap_servers=f"{broker.host}:{broker.port}") as p:
        p.send("flushed", value=b"x").get(10)
    time.sleep(0.6)  # a couple of loop-lag probes
    _, text = scrape(broker.http_url)
    probes = value(text, "kafkalite_eventloop_lagms_count")
    assert probes is not None and probes >= 1
    flushes = value(text, "kafka_log_logflushstats_logflushrateandtimems_count")
    assert flushes is not None and flushes >= 1


def test_two_brokers_keep_separate_registries(broker: Broker, tmp_path: Path) -> None:
    with Broker(tmp_path / "other", config=HTTP) as other:
        with KafkaProducer(bootstrap_servers=f"{broker.host}:{broker.port}") as p:
            p.send("only-a", value=b"x").get(10)
        _, text_a = scrape(broker.http_url)
        _, text_b = scrape(other.http_url)
    assert value(text_a, "kafka_server_brokertopicmetrics_messagesin_total", topic="only-a") == 1
    assert value(text_b, "kafka_server_brokertopicmetrics_messagesin_total", topic="only-a") is None
    assert value(text_b, "kafka_server_brokertopicmetrics_messagesin_total") == 0


def test_memory_pool_gauges(tmp_path: Path, broker: Broker) -> None:
    """kafka.network:type=SocketServer's MemoryPoolAvailable / MemoryPoolUsed (KIP-72)."""
    _, text = scrape(broker.http_url)
    assert value(text, "kafka_network_socketserver_memorypoolavailable") == float((1 << 63) - 1)
    assert value(text, "kafka_network_socketserver_memorypoolused") == 0
    with Broker(tmp_path, config={**HTTP, "queued.max.request.bytes": str(1 << 20)}) as b:
        _, text = scrape(b.http_url)  # the scrape itself is HTTP: no Kafka request is held
        assert value(text, "kafka_network_socketserver_memorypoolavailable") == 1 << 20
        assert value(text, "kafka_network_socketserver_memorypoolused") == 0
