"""REST v3 in a two-broker cluster (in-process brokers on one ZooKeeper, each with its own HTTP listener):
admin through either listener, produce answered by the partition leader's listener (421 elsewhere),
partitions and replicas described from metadata on both.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkalite.testing import Broker

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


def _call(method: str, url: str, body: Any = None) -> tuple[int, Any]:
    import json
    import urllib.error
    import urllib.request

    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            text = resp.read()
            return resp.status, json.loads(text) if text else None
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"null")


@pytest.fixture
def brokers(tmp_path: Path, zk_connect: str) -> Iterator[dict[int, Broker]]:
    props = {
        "zookeeper.connect": zk_connect,
        "zookeeper.session.timeout.ms": "6000",
        "default.replication.factor": "2",
        "offsets.topic.replication.factor": "2",
        "offsets.topic.num.partitions": "2",
        "controlled.shutdown.retry.backoff.ms": "200",
        "http.listeners": "http://127.0.0.1:0",
    }
    started: dict[int, Broker] = {}
    try:
        for broker_id in (1, 2):
            config = {**props, "broker.id": str(broker_id)}
            started[broker_id] = Broker(tmp_path / f"b{broker_id}", config=config).start()
        yield started
    finally:
        for b in started.values():
            b.stop()


def _wait(condition: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def test_rest_in_a_cluster(brokers: dict[int, Broker]) -> None:
    one, two = brokers[1], brokers[2]
    _wait(lambda: all(len(b.server.metadata_cache.alive_brokers()) == 2 for b in (one, two)))
    cid = one.cluster_id
    assert two.cluster_id == cid

    def v3(b: Broker, *parts: object) -> str:
        return f"{b.http_url}/v3/clusters/{cid}" + "".join(f"/{p}" for p in parts)

    status, listed = _call("GET", v3(two, "brokers"))
    assert status == 200 and [x["broker_id"] for x in listed["data"]] == [1, 2]
    status, err = _call("GET", v3(one, "brokers", 2, "configs"))
    assert status == 421 and err["error_code"] == 421
    assert _call("GET", v3(two, "brokers", 2, "configs"))[0] == 200
    body = {"topic_name": "rc", "partitions_count": 2, "replication_factor": 2}
    status, t = _call("POST", v3(one, "topics"), body)
    assert status == 201, t
    assert t["replication_factor"] == 2 and t["partitions_count"] == 2

    def described_on_two() -> bool:
        s, parts = _call("GET", v3(two, "topics", "rc", "partitions"))
        return s == 200 and all(p["leader"] is not None for p in parts["data"])

    _wait(described_on_two)
    _, p0 = _call("GET", v3(two, "topics", "rc", "partitions", 0))
    leader = p0["leader_id"]
    assert sorted(p0["replica_ids"]) == [1, 2]
    lead, follow = brokers[leader], brokers[3 - leader]
    record = {"partition_id": 0, "value": {"type": "STRING", "data": "x"}}
    status, err = _call("POST", v3(follow, "topics", "rc", "records"), record)
    assert status == 421, err
    assert (
        err["message"].startswith("NOT_LEADER_OR_FOLLOWER") and f"broker {leader}" in err["message"]
    )
    status, r = _call("POST", v3(lead, "topics", "rc", "records"), record)
    assert status == 200 and r["offset"] == 0  # acks=all: both replicas have it

    def follower_reads() -> bool:
        s, got = _call("GET", v3(follow, "topics", "rc", "partitions", 0, "records"))
        return s == 200 and [x["value"]["data"] for x in got["data"]] == ["x"]

    _wait(follower_reads)
    _, reps = _call("GET", v3(follow, "topics", "rc", "partitions", 0, "replicas"))
    assert sorted((x["broker_id"], x["is_leader"]) for x in reps["data"]) == sorted(
        [(leader, True), (3 - leader, False)]
    )
    assert _call("DELETE", v3(two, "topics", "rc"))[0] == 204
    _wait(lambda: _call("GET", v3(one, "topics", "rc"))[0] == 404)
