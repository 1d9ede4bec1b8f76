"""REST v3 admin endpoints against a real broker: clusters, brokers and their configs, topics (list,
get, create, delete), topic configs (get, set, reset, alter), partitions with offsets, and replicas.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rest_http import call

from kafkalite.testing import Broker


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    cfg = {"http.listeners": "http://127.0.0.1:0"}
    with Broker(tmp_path_factory.mktemp("rest-admin"), config=cfg) as b:
        yield b


def v3(b: Broker, *parts: object) -> str:
    return f"{b.http_url}/v3/clusters/{b.cluster_id}" + "".join(f"/{p}" for p in parts)


def test_clusters(broker: Broker) -> None:
    status, body = call("GET", f"{broker.http_url}/v3/clusters")
    assert status == 200 and body["kind"] == "KafkaClusterList"
    (c,) = body["data"]
    assert c["cluster_id"] == broker.cluster_id
    assert c["metadata"]["self"] == v3(broker)
    assert c["metadata"]["resource_name"] == f"crn:///kafka={broker.cluster_id}"
    assert c["topics"]["related"] == v3(broker, "topics")
    assert c["controller"]["related"] == v3(broker, "brokers", 0)
    status, one = call("GET", v3(broker))
    assert status == 200 and one == c


def test_unknown_cluster_is_404(broker: Broker) -> None:
    status, body = call("GET", f"{broker.http_url}/v3/clusters/nope/topics")
    assert status == 404
    assert body == {"error_code": 404, "message": "Cluster nope cannot be found."}


def test_unknown_route_answers_json(broker: Broker) -> None:
    status, body = call("GET", f"{broker.http_url}/v3/no/such/thing/here/at/all")
    assert status == 404 and body["error_code"] == 404


def test_brokers_and_configs(broker: Broker) -> None:
    status, body = call("GET", v3(broker, "brokers"))
    assert status == 200 and body["kind"] == "KafkaBrokerList"
    (b,) = body["data"]
    assert b["broker_id"] == 0 and b["port"] == broker.port and b["host"] == broker.host
    assert b["configs"]["related"] == v3(broker, "brokers", 0, "configs")
    assert call("GET", v3(broker, "brokers", 0))[1] == b
    assert call("GET", v3(broker, "brokers", 7))[0] == 404
    assert call("GET", v3(broker, "brokers", "x"))[0] == 404
    status, cfgs = call("GET", v3(broker, "brokers", 0, "configs"))
    assert status == 200 and cfgs["kind"] == "KafkaBrokerConfigList"
    by_name = {c["name"]: c for c in cfgs["data"]}
    assert by_name["num.partitions"]["kind"] == "KafkaBrokerConfig"
    assert by_name["num.partitions"]["broker_id"] == 0
    status, one = call("GET", v3(broker, "brokers", 0, "configs", "log.retention.ms"))
    assert status == 200 and one["name"] == "log.retention.ms"
    assert {"value", "is_default", "is_read_only", "is_sensitive", "source", "synonyms"} <= set(one)
    assert call("GET", v3(broker, "brokers", 0, "configs", "no.such.config"))[0] == 404


def test_topic_lifecycle(broker: Broker) -> None:
    body = {
        "topic_name": "rest-life",
        "partitions_count": 3,
        "replication_factor": 1,
        "configs": [{"name": "cleanup.policy", "value": "compact"}],
    }
    status, t = call("POST", v3(broker, "topics"), body)
    assert status == 201, t
    assert t["kind"] == "KafkaTopic" and t["topic_name"] == "rest-life"
    assert t["partitions_count"] == 3 and t["replication_factor"] == 1
    assert t["metadata"]["resource_name"] == f"crn:///kafka={broker.cluster_id}/topic=rest-life"
    status, again = call("POST", v3(broker, "topics"), body)
    assert status == 400 and again["message"].startswith("TOPIC_ALREADY_EXISTS")
    names = [x["topic_name"] for x in call("GET", v3(broker, "topics"))[1]["data"]]
    assert "rest-life" in names
    status, got = call("GET", v3(broker, "topics", "rest-life"))
    assert status == 200 and got["partitions_count"] == 3 and got["is_internal"] is False
    status, _ = call("DELETE", v3(broker, "topics", "rest-life"))
    assert status == 204
    assert call("GET", v3(broker, "topics", "rest-life"))[0] == 404


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"partitions_count": 1}, "topic_name"),
        ({"topic_name": "x", "partitions_count": "three"}, "partitions_count"),
        ({"topic_name": "bad/name", "partitions_count": 1}, "INVALID_TOPIC_EXCEPTION"),
        (
            {"topic_name": "rf", "partitions_count": 1, "replication_factor": 3},
            "INVALID_REPLICATION_FACTOR",
        ),
        ({"topic_name": "cfg", "configs": [{"name": "no.such", "value": "1"}]}, "INVALID_CONFIG"),
    ],
)
def test_create_topic_bad_input(broker: Broker, body: dict[str, Any], fragment: str) -> None:
    status, err = call("POST", v3(broker, "topics"), body)
    assert status == 400, err
    assert err["error_code"] == 400 and fragment in err["message"]


def test_invalid_json_is_400(broker: Broker) -> None:
    status, err = call("POST", v3(broker, "topics"), raw=b"{not json")
    assert status == 400 and err["error_code"] == 400 and "JSON" in err["message"]


def test_unknown_topic_is_404(broker: Broker) -> None:
    for path in (
        ("topics", "ghost"),
        ("topics", "ghost", "configs"),
        ("topics", "ghost", "partitions"),
    ):
        status, err = call("GET", v3(broker, *path))
        assert status == 404 and err["error_code"] == 404 and "message" in err
    assert call("DELETE", v3(broker, "topics", "ghost"))[0] == 404


def test_topic_configs(broker: Broker) -> None:
    broker.create_topic("rest-cfg", 1)
    status, cfgs = call("GET", v3(broker, "topics", "rest-cfg", "configs"))
    assert status == 200 and cfgs["kind"] == "KafkaTopicConfigList"
    ret = next(c for c in cfgs["data"] if c["name"] == "retention.ms")
    assert ret["is_default"] is True and ret["topic_name"] == "rest-cfg"
    url = v3(broker, "topics", "rest-cfg", "configs", "retention.ms")
    assert call("PUT", url, {"value": "12345"})[0] == 204
    status, one = call("GET", url)
    assert status == 200 and one["value"] == "12345" and one["source"] == "DYNAMIC_TOPIC_CONFIG"
    assert call("DELETE", url)[0] == 204
    assert call("GET", url)[1]["is_default"] is True
    alter = {
        "data": [
            {"name": "cleanup.policy", "value": "compact"},
            {"name": "max.message.bytes", "value": "2048", "operation": "SET"},
        ]
    }
    assert call("POST", v3(broker, "topics", "rest-cfg", "configs:alter"), alter)[0] == 204
    assert (
        call("GET", v3(broker, "topics", "rest-cfg", "configs", "cleanup.policy"))[1]["value"]
        == "compact"
    )
    status, err = call(
        "PUT", v3(broker, "topics", "rest-cfg", "configs", "no.such"), {"value": "1"}
    )
    assert status == 400 and err["message"].startswith("INVALID_CONFIG")
    assert call("PUT", url, {})[0] == 400
    assert call("POST", v3(broker, "topics", "rest-cfg", "configs:alter"), {"data": "x"})[0] == 400


def test_partitions_and_replicas(broker: Broker, tmp_path: Path) -> None:
    broker.create_topic("rest-parts", 2)
    status, parts = call("GET", v3(broker, "topics", "rest-parts", "partitions"))
    assert status == 200 and parts["kind"] == "KafkaPartitionList"
    assert [p["partition_id"] for p in parts["data"]] == [0, 1]
    p0 = parts["data"][0]
    base = v3(broker, "topics", "rest-parts", "partitions", 0)
    assert p0["leader"]["related"] == base + "/replicas/0"
    assert p0["replicas"]["related"] == base + "/replicas"
    assert p0["earliest_offset"] == 0 and p0["latest_offset"] == 0 and p0["size_bytes"] == 0
    assert call("GET", base)[1] == p0
    assert call("GET", v3(broker, "topics", "rest-parts", "partitions", 9))[0] == 404
    status, reps = call("GET", base + "/replicas")
    assert status == 200 and reps["kind"] == "KafkaReplicaList"
    (r,) = reps["data"]
    assert r["broker_id"] == 0 and r["is_leader"] is True and r["is_in_sync"] is True
    assert r["broker"]["related"] == v3(broker, "brokers", 0)
