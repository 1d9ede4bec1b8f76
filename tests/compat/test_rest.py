"""REST v3 produce and read against confluent-kafka (librdkafka): records written over HTTP (STRING key,
JSON value, headers, BINARY) read back byte for byte; keys land where librdkafka's murmur2 puts them.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402

from kafkalite.testing import Broker  # noqa: E402

pytestmark = pytest.mark.compat


@pytest.fixture(scope="module")
def rest_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    cfg = {"http.listeners": "http://127.0.0.1:0"}
    with Broker(tmp_path_factory.mktemp("compat-rest"), config=cfg) as b:
        yield b


def post(b: Broker, path: str, body: Any) -> tuple[int, Any]:
    import urllib.error
    import urllib.request

    req = urllib.request.Request(
        f"{b.http_url}/v3/clusters/{b.cluster_id}{path}",
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def get(b: Broker, path: str) -> Any:
    import urllib.request

    url = f"{b.http_url}/v3/clusters/{b.cluster_id}{path}"
    with urllib.request.urlopen(url, timeout=30) as resp:
        return json.loads(resp.read())


def consume(b: Broker, topic: str, partition: int, n: int) -> list[Any]:
    c = Consumer(
        {
            "bootstrap.servers": b.bootstrap_servers,
            "group.id": f"rest-{topic}",
            "enable.auto.commit": False,
        }
    )
    c.assign([TopicPartition(topic, partition, 0)])
    out: list[Any] = []
    deadline = time.monotonic() + 30
    while len(out) < n and time.monotonic() < deadline:
        msg = c.poll(0.5)
        if msg is not None and msg.error() is None:
            out.append(msg)
    c.close()
    return out


def test_rest_records_read_by_confluent_kafka(rest_broker: Broker) -> None:
    b = rest_broker
    b.create_topic("rest-compat", 1)
    value = {"name": "Zoë", "n": [1, 2.5, None, True]}
    s, r1 = post(
        b,
        "/topics/rest-compat/records",
        {
            "partition_id": 0,
            "key": {"type": "STRING", "data": "clé-1"},
            "value": {"type": "JSON", "data": value},
            "headers": [
                {"name": "h1", "value": base64.b64encode(b"\x00\xffraw").decode()},
                {"name": "h2", "value": None},
            ],
            "timestamp": 1_650_000_000_123,
        },
    )
    assert s == 200, r1
    blob = bytes(range(256))
    s, r2 = post(
        b,
        "/topics/rest-compat/records",
        {
            "key": {"type": "BINARY", "data": base64.b64encode(b"\x01\x02").decode()},
            "value": {"type": "BINARY", "data": base64.b64encode(blob).decode()},
        },
    )
    assert s == 200, r2
    s, r3 = post(b, "/topics/rest-compat/records", {"value": {"type": "STRING", "data": ""}})
    assert s == 200, r3
    first, second, third = consume(b, "rest-compat", 0, 3)
    assert first.offset() == r1["offset"] == 0
    assert first.key() == "clé-1".encode()
    assert first.value() == json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
    assert json.loads(first.value()) == value
    assert first.headers() == [("h1", b"\x00\xffraw"), ("h2", None)]
    assert first.timestamp() == (confluent_kafka.TIMESTAMP_CREATE_TIME, 1_650_000_000_123)
    assert second.key() == b"\x01\x02" and second.value() == blob
    assert second.offset() == r2["offset"] == 1
    assert third.key() is None and third.value() == b""


def test_confluent_records_read_over_rest(rest_broker: Broker) -> None:
    b = rest_broker
    b.create_topic("rest-read", 1)
    p = Producer({"bootstrap.servers": b.bootstrap_servers})
    p.produce("rest-read", key=b"k", value=b'{"a": [1]}', headers=[("x", b"y")], timestamp=1234)
    p.produce("rest-read", value=b"\xff\x00", partition=0)
    p.produce("rest-read", key="text", value="just text")
    assert p.flush(30) == 0
    got = get(b, "/topics/rest-read/partitions/0/records?offset=0")
    a, bb, c = got["data"]
    assert a["key"] == {"type": "STRING", "data": "k"} and a["timestamp"] == 1234
    assert a["value"] == {"type": "JSON", "data": {"a": [1]}}
    assert a["headers"] == [{"name": "x", "value": base64.b64encode(b"y").decode()}]
    assert bb["key"] is None and bb["value"] == {"type": "BINARY", "data": "/wA="}
    assert c["value"] == {"type": "STRING", "data": "just text"}
    assert got["next_offset"] == 3


def test_keys_land_where_librdkafka_murmur2_puts_them(rest_broker: Broker) -> None:
    b = rest_broker
    b.create_topic("rest-keys", 8)
    p = Producer({"bootstrap.servers": b.bootstrap_servers, "partitioner": "murmur2_random"})
    keys = [f"key-{i}" for i in range(20)]
    placed: dict[str, int] = {}

    def done(err: Any, msg: Any) -> None:
        assert err is None
        placed[msg.key().decode()] = msg.partition()

    for k in keys:
        p.produce("rest-keys", key=k, value=b"v", on_delivery=done)
    assert p.flush(30) == 0
    for k in keys:
        s, r = post(b, "/topics/rest-keys/records", {"key": {"type": "STRING", "data": k}})
        assert s == 200 and r["partition_id"] == placed[k], (k, r)
