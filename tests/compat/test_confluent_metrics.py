"""/metrics while confluent-kafka (librdkafka) produces and a consumer group reads and commits: every scrape
parses, the topic's messages-in counter ends at the number produced and the group's lag at 0.
"""

from __future__ import annotations

import threading
import time
import urllib.request
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer
from prometheus_client.parser import text_string_to_metric_families

from kafkalite.testing import Broker

N = 20_000
TOPIC = "metered"


@pytest.fixture(scope="module")
def http_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    config = {"http.listeners": "http://127.0.0.1:0", "group.initial.rebalance.delay.ms": "0"}
    with Broker(tmp_path_factory.mktemp("metrics") / "d", config=config) as b:
        yield b


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of one scrape by (name, sorted labels); fails if the text does not parse."""
    with urllib.request.urlopen(url + "/metrics", timeout=10) as resp:
        text = resp.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_counters_and_lag_under_confluent_kafka(http_broker: Broker) -> None:
    url = http_broker.http_url
    bootstrap = f"{http_broker.host}:{http_broker.port}"
    produced = threading.Event()
    errors: list[str] = []

    def produce() -> None:
        p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})

        def report(err: object, _msg: object) -> None:
            if err is not None:
                errors.append(str(err))

        for i in range(N):
            while True:
                try:
                    p.produce(TOPIC, value=b"%08d" % i + b"." * 92, on_delivery=report)
                    break
                except BufferError:
                    p.poll(0.05)
        p.flush(60)
        produced.set()

    worker = threading.Thread(target=produce)
    worker.start()
    scrapes = 0
    seen: list[float] = []
    while not produced.is_set():
        samples = scrape(url)  # parses while the producer runs
        scrapes += 1
        seen.append(
            samples.get(
                ("kafka_server_brokertopicmetrics_messagesin_total", (("topic", TOPIC),)), 0
            )
        )
        time.sleep(0.05)
    worker.join()
    assert not errors
    assert scrapes >= 1
    assert seen == sorted(seen)  # a counter never goes down

    samples = scrape(url)
    messages = ("kafka_server_brokertopicmetrics_messagesin_total", (("topic", TOPIC),))
    assert samples[messages] == N
    assert samples[("kafka_server_brokertopicmetrics_bytesin_total", (("topic", TOPIC),))] > N * 100
    produce_count = ("kafka_network_requestmetrics_totaltimems_count", (("request", "Produce"),))
    assert samples[produce_count] >= 1
    assert samples[("kafka_network_requestmetrics_requests_total", (("request", "Produce"),))] >= 1

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "metered-readers",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        c.subscribe([TOPIC])
        got = 0
        deadline = time.monotonic() + 60
        while got < N and time.monotonic() < deadline:
            got += sum(1 for m in c.consume(1000, 0.5) if m.error() is None)
        assert got == N
        lag = (
            "kafka_consumergroup_lag",
            (("group", "metered-readers"), ("partition", "0"), ("topic", TOPIC)),
        )
        c.commit(asynchronous=False)
        deadline = time.monotonic() + 10
        samples = scrape(url)
        while samples.get(lag) != 0 and time.monotonic() < deadline:
            time.sleep(0.1)
            samples = scrape(url)
        assert samples.get(lag) == 0
    finally:
        c.close()
    assert (
        samples[("kafka_server_brokertopicmetrics_bytesout_total", (("topic", TOPIC),))] > N * 100
    )
    fetch_count = ("kafka_network_requestmetrics_totaltimems_count", (("request", "Fetch"),))
    assert samples[fetch_count] >= 1
    commit_count = ("kafka_network_requestmetrics_requests_total", (("request", "OffsetCommit"),))
    assert samples[commit_count] >= 1
    assert samples[("kafka_server_brokertopicmetrics_failedproducerequests_total", ())] == 0
    labels = (("partition", "0"), ("topic", TOPIC))
    assert samples[("kafka_log_log_logendoffset", labels)] == N
    assert samples[("kafka_log_log_logstartoffset", labels)] == 0
    assert samples[("kafka_log_log_size", labels)] > N * 100
    assert samples[("kafka_server_replicamanager_underreplicatedpartitions", ())] == 0
