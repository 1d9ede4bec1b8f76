"""REST record read with `filter=` (issue 35): only matching records, a next_offset past the batches
left out, and a 400 naming the fault for a bad expression."""

from __future__ import annotations

import urllib.parse
import urllib.request
from collections.abc import Iterator

import pytest
from rest_http import call

from kafkalite.client import KafkaConsumer, KafkaProducer
from kafkalite.testing import Broker


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    cfg = {"http.listeners": "http://127.0.0.1:0"}
    with Broker(tmp_path_factory.mktemp("rest-filter"), config=cfg) as b:
        yield b


def url(b: Broker, topic: str, query: dict[str, str]) -> str:
    base = f"{b.http_url}/v3/clusters/{b.cluster_id}/topics/{topic}/partitions/0/records"
    return base + "?" + urllib.parse.urlencode(query)


def test_rest_read_with_a_filter(broker: Broker) -> None:
    broker.create_topic("rf", 1)
    with KafkaProducer(bootstrap_servers=broker.bootstrap_servers, batch_size=500) as p:
        for i in range(200):
            p.send("rf", b"v%d" % i, key=b"user-%d" % (i % 10), partition=0)
        p.flush(20)
    status, body = call("GET", url(broker, "rf", {"offset": "0", "filter": "key = 'user-3'"}))
    assert status == 200, body
    assert [r["offset"] for r in body["data"]] == list(range(3, 200, 10))
    assert body["next_offset"] == 200
    q = {"offset": "0", "filter": "key = 'user-3' AND offset < 50", "limit": "500"}
    status, body = call("GET", url(broker, "rf", q))
    assert [r["offset"] for r in body["data"]] == [3, 13, 23, 33, 43]
    assert (
        body["next_offset"] == 200
    )  # the batches past offset 50 are left out, the read ends at 200
    status, body = call("GET", url(broker, "rf", {"offset": "0", "filter": "key > 3"}))
    assert status == 400
    assert "key is a string" in str(body)


def test_filtered_fetches_are_counted_in_metrics(broker: Broker) -> None:
    broker.create_topic("rfm", 1)
    with KafkaProducer(bootstrap_servers=broker.bootstrap_servers) as p:
        for i in range(100):
            p.send("rfm", b"v", key=b"k%d" % (i % 10), partition=0)
        p.flush(20)
    c = KafkaConsumer(
        bootstrap_servers=broker.bootstrap_servers,
        auto_offset_reset="earliest",
        filter="key = 'k1'",
    )
    c.assign([("rfm", 0)])
    got: list[int] = []
    while c.position(("rfm", 0)) < 100:
        got += [r.offset for recs in c.poll(timeout_ms=200).values() for r in recs]
    c.close()
    assert got == list(range(1, 100, 10))
    with urllib.request.urlopen(broker.http_url + "/metrics", timeout=10) as resp:
        text = resp.read().decode()
    values = {
        line.split()[0]: float(line.split()[1])
        for line in text.splitlines()
        if line.startswith("kafkalite_fetch_filter_")
    }
    assert values["kafkalite_fetch_filter_bytes_sent_total"] > 0
    assert (
        values["kafkalite_fetch_filter_bytes_sent_total"]
        < values["kafkalite_fetch_filter_bytes_scanned_total"]
    )
