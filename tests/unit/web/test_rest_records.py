"""REST v3 produce (BINARY / STRING / JSON keys and values, headers, partition choice, the Kafka error
for a too-large value) and kafkalite's record read by offset, by timestamp and latest.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest
from rest_http import call

from kafkalite.records.speedups import murmur2
from kafkalite.testing import Broker
from kafkalite.web.rest.records import _py_murmur2, describe_bytes, partition_for_key


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    cfg = {"http.listeners": "http://127.0.0.1:0"}
    with Broker(tmp_path_factory.mktemp("rest-records"), config=cfg) as b:
        yield b


def v3(b: Broker, *parts: object) -> str:
    return f"{b.http_url}/v3/clusters/{b.cluster_id}" + "".join(f"/{p}" for p in parts)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def produce(b: Broker, topic: str, body: dict[str, Any]) -> tuple[int, Any]:
    return call("POST", v3(b, "topics", topic, "records"), body)


def read(b: Broker, topic: str, partition: int, query: str = "") -> dict[str, Any]:
    status, body = call("GET", v3(b, "topics", topic, "partitions", partition, "records") + query)
    assert status == 200, body
    return dict(body)


def test_produce_and_read_back(broker: Broker) -> None:
    broker.create_topic("rec-a", 1)
    body = {
        "partition_id": 0,
        "key": {"type": "STRING", "data": "user-1"},
        "value": {"type": "JSON", "data": {"n": 1, "tags": ["a", "b"]}},
        "headers": [{"name": "trace", "value": b64(b"\x00\x01")}, {"name": "empty", "value": None}],
        "timestamp": 1_700_000_000_000,
    }
    status, r = produce(broker, "rec-a", body)
    assert status == 200, r
    assert r["error_code"] == 200 and r["cluster_id"] == broker.cluster_id
    assert r["topic_name"] == "rec-a" and r["partition_id"] == 0 and r["offset"] == 0
    assert r["timestamp"] == "2023-11-14T22:13:20.000Z"
    assert r["key"] == {"type": "STRING", "size": 6}
    assert r["value"] == {"type": "JSON", "size": len(b'{"n":1,"tags":["a","b"]}')}
    status, r2 = produce(broker, "rec-a", {"value": {"type": "BINARY", "data": b64(b"\xff\xfe")}})
    assert status == 200 and r2["offset"] == 1 and r2["key"] is None
    status, r3 = produce(broker, "rec-a", {"value": {"type": "STRING", "data": "plain text"}})
    assert status == 200 and r3["offset"] == 2
    got = read(broker, "rec-a", 0, "?offset=0")
    assert got["kind"] == "KafkaRecordList" and got["next_offset"] == 3
    first, second, third = got["data"]
    assert first["offset"] == 0 and first["timestamp"] == 1_700_000_000_000
    assert first["key"] == {"type": "STRING", "data": "user-1"}
    assert first["value"] == {"type": "JSON", "data": {"n": 1, "tags": ["a", "b"]}}
    assert first["headers"] == [
        {"name": "trace", "value": b64(b"\x00\x01")},
        {"name": "empty", "value": None},
    ]
    assert second["key"] is None and second["value"] == {"type": "BINARY", "data": b64(b"\xff\xfe")}
    assert third["value"] == {"type": "STRING", "data": "plain text"}
    # partition figures follow the log
    _, part = call("GET", v3(broker, "topics", "rec-a", "partitions", 0))
    assert part["latest_offset"] == 3 and part["size_bytes"] > 0


def test_read_by_offset_timestamp_and_latest(broker: Broker) -> None:
    broker.create_topic("rec-b", 1)
    for i in range(10):
        status, _ = produce(
            broker,
            "rec-b",
            {"value": {"type": "STRING", "data": f"v{i}"}, "timestamp": 1_000_000 + i * 1000},
        )
        assert status == 200
    page = read(broker, "rec-b", 0, "?offset=2&limit=3")
    assert [r["offset"] for r in page["data"]] == [2, 3, 4] and page["next_offset"] == 5
    by_time = read(broker, "rec-b", 0, "?timestamp=1005500&limit=2")
    assert [r["value"]["data"] for r in by_time["data"]] == ["v6", "v7"]
    latest = read(broker, "rec-b", 0, "?limit=4")
    assert [r["offset"] for r in latest["data"]] == [6, 7, 8, 9] and latest["next_offset"] == 10
    assert len(read(broker, "rec-b", 0)["data"]) == 10
    assert read(broker, "rec-b", 0, "?offset=10")["data"] == []
    assert read(broker, "rec-b", 0, "?timestamp=99999999999")["data"] == []
    status, err = call(
        "GET", v3(broker, "topics", "rec-b", "partitions", 0, "records") + "?limit=x"
    )
    assert status == 400 and err["error_code"] == 400
    assert call("GET", v3(broker, "topics", "rec-b", "partitions", 5, "records"))[0] == 404


def test_keyed_records_follow_the_default_partitioner(broker: Broker) -> None:
    broker.create_topic("rec-keys", 6)
    for key in ("alpha", "beta", "gamma", "delta"):
        status, r = produce(
            broker, "rec-keys", {"key": {"type": "STRING", "data": key}, "value": None}
        )
        assert status == 200
        assert r["partition_id"] == partition_for_key(key.encode(), 6)


def test_murmur2_matches_kafka() -> None:
    # Kafka's partitioner maps these keys so (values from its own test vectors of murmur2)
    for data in (b"", b"a", b"ab", b"abc", b"abcd", b"21", b"foobar", b"a-little-bit-long-string"):
        if murmur2 is not None:
            assert _py_murmur2(data) == murmur2(data) & 0xFFFFFFFF
    assert partition_for_key(b"21", 2**31 - 1) == (_py_murmur2(b"21") & 0x7FFFFFFF) % (2**31 - 1)


def test_describe_bytes() -> None:
    assert describe_bytes(b'{"a": 1}') == {"type": "JSON", "data": {"a": 1}}
    assert describe_bytes(b"[1,2]") == {"type": "JSON", "data": [1, 2]}
    assert describe_bytes(b"42") == {"type": "STRING", "data": "42"}
    assert describe_bytes(b"{broken") == {"type": "STRING", "data": "{broken"}
    assert describe_bytes(b"\xc3\x28") == {"type": "BINARY", "data": b64(b"\xc3\x28")}
    assert describe_bytes(None) is None


@pytest.mark.parametrize(
    "body",
    [
        {"value": {"type": "BINARY", "data": "***"}},
        {"value": {"type": "STRING", "data": 5}},
        {"value": {"type": "AVRO", "data": "x"}},
        {"value": "bare"},
        {"partition_id": "0", "value": None},
        {"headers": [{"name": "h", "value": "not base64!"}]},
        {"timestamp": "yesterday"},
    ],
)
def test_produce_bad_input_is_400(broker: Broker, body: dict[str, Any]) -> None:
    if "rec-bad" not in broker.topics():
        broker.create_topic("rec-bad", 1)
    status, err = produce(broker, "rec-bad", body)
    assert status == 400, err
    assert err["error_code"] == 400 and err["message"]


def test_produce_errors(broker: Broker) -> None:
    status, err = produce(broker, "no-such-topic", {"value": {"type": "STRING", "data": "x"}})
    assert status == 404 and err["error_code"] == 404
    assert broker.topics().count("no-such-topic") == 0  # the REST path does not auto-create
    broker.create_topic("rec-small", 1, max_message_bytes=1024)
    status, err = produce(broker, "rec-small", {"partition_id": 7, "value": None})
    assert status == 404
    big = {"value": {"type": "BINARY", "data": b64(b"\x01" * 4096)}}
    status, err = produce(broker, "rec-small", big)
    assert status == 413, err
    assert err["error_code"] == 413 and err["message"].startswith("MESSAGE_TOO_LARGE")
    status, err = call("POST", v3(broker, "topics", "rec-small", "records"), raw=b"[1,")
    assert status == 400 and json.dumps(err)
