"""REST v3 consumer groups against a real broker with kafkalite's own consumers, classic and KIP-848:
state, assignor, members, assignments, lags and their summary; the console's offset reset (409 while
the group has members, dry run, commit).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest
from rest_http import call

from kafkalite.client import KafkaConsumer
from kafkalite.testing import Broker


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    cfg = {"http.listeners": "http://127.0.0.1:0", "group.initial.rebalance.delay.ms": "0"}
    with Broker(tmp_path_factory.mktemp("rest-groups"), config=cfg) as b:
        yield b


def v3(b: Broker, *parts: object) -> str:
    tail = "".join(f"/{quote(str(p), safe='')}" for p in parts)
    return f"{b.http_url}/v3/clusters/{b.cluster_id}{tail}"


def fill(b: Broker, topic: str, partition: int, n: int) -> None:
    for i in range(n):
        body = {"partition_id": partition, "value": {"type": "STRING", "data": f"r{i}"}}
        status, r = call("POST", v3(b, "topics", topic, "records"), body)
        assert status == 200, r


class Member:
    """One group member: kafkalite's consumer for the classic protocol, librdkafka's for KIP-848
    (kafkalite's client speaks only the classic one)."""

    def __init__(self, broker: Broker, topic: str, group: str, protocol: str) -> None:
        self.classic: KafkaConsumer | None = None
        self.rdkafka: Any = None
        if protocol == "classic":
            self.classic = KafkaConsumer(
                bootstrap_servers=broker.bootstrap_servers,
                group_id=group,
                auto_offset_reset="earliest",
                enable_auto_commit=False,
            )
            self.classic.subscribe([topic])
        else:
            confluent_kafka = pytest.importorskip("confluent_kafka")
            self.rdkafka = confluent_kafka.Consumer(
                {
                    "bootstrap.servers": broker.bootstrap_servers,
                    "group.id": group,
                    "group.protocol": "consumer",
                    "auto.offset.reset": "earliest",
                    "enable.auto.commit": False,
                }
            )
            self.rdkafka.subscribe([topic])

    def consume_and_commit(self, n: int) -> None:
        got = 0
        deadline = time.monotonic() + 30
        while got < n and time.monotonic() < deadline:
            if self.classic is not None:
                got += sum(len(v) for v in self.classic.poll(timeout_ms=200).values())
            else:
                msg = self.rdkafka.poll(0.2)
                got += 1 if msg is not None and msg.error() is None else 0
        assert got == n
        if self.classic is not None:
            self.classic.commit()
        else:
            self.rdkafka.commit(asynchronous=False)

    def close(self) -> None:
        if self.classic is not None:
            self.classic.close()
        else:
            self.rdkafka.close()


def wait_for(fn: Any, timeout: float = 20) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.1)


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_group_members_assignments_and_lags(broker: Broker, protocol: str) -> None:
    topic, group = f"grp-{protocol}", f"g-{protocol}"
    broker.create_topic(topic, 2)
    fill(broker, topic, 0, 5)
    fill(broker, topic, 1, 3)
    c = Member(broker, topic, group, protocol)
    try:
        c.consume_and_commit(8)
        fill(broker, topic, 0, 2)

        def stable() -> Any:
            status, g = call("GET", v3(broker, "consumer-groups", group))
            return g if status == 200 and g["state"] == "STABLE" else None

        g = wait_for(stable)
        assert g, call("GET", v3(broker, "consumer-groups", group))
        assert g["kind"] == "KafkaConsumerGroup" and g["consumer_group_id"] == group
        assert g["type"] == ("CLASSIC" if protocol == "classic" else "CONSUMER")
        assert g["partition_assignor"] and g["is_simple"] is False
        assert g["coordinator"]["related"] == v3(broker, "brokers", 0)
        assert g["consumers"]["related"] == v3(broker, "consumer-groups", group, "consumers")
        listed = call("GET", v3(broker, "consumer-groups"))[1]
        assert group in [x["consumer_group_id"] for x in listed["data"]]
        status, members = call("GET", v3(broker, "consumer-groups", group, "consumers"))
        assert status == 200 and members["kind"] == "KafkaConsumerList"
        (m,) = members["data"]
        cid = m["consumer_id"]
        assert call("GET", v3(broker, "consumer-groups", group, "consumers", cid))[1] == m
        status, assigned = call(
            "GET", v3(broker, "consumer-groups", group, "consumers", cid, "assignments")
        )
        assert status == 200
        assert sorted((a["topic_name"], a["partition_id"]) for a in assigned["data"]) == [
            (topic, 0),
            (topic, 1),
        ]
        status, lags = call("GET", v3(broker, "consumer-groups", group, "lags"))
        assert status == 200 and lags["kind"] == "KafkaConsumerLagList"
        rows = {(x["topic_name"], x["partition_id"]): x for x in lags["data"]}
        assert rows[(topic, 0)]["current_offset"] == 5
        assert rows[(topic, 0)]["log_end_offset"] == 7 and rows[(topic, 0)]["lag"] == 2
        assert rows[(topic, 1)]["lag"] == 0 and rows[(topic, 0)]["consumer_id"] == cid
        one = call("GET", v3(broker, "consumer-groups", group, "lags", topic, "partitions", 0))[1]
        assert one == rows[(topic, 0)]
        status, summary = call("GET", v3(broker, "consumer-groups", group, "lag-summary"))
        assert status == 200 and summary["kind"] == "KafkaConsumerGroupLagSummary"
        assert summary["max_lag"] == 2 and summary["total_lag"] == 2
        assert summary["max_lag_topic_name"] == topic and summary["max_lag_partition_id"] == 0
        assert summary["max_lag_consumer_id"] == cid
        # a group with members refuses a reset, as Kafka does
        status, err = call(
            "POST",
            v3(broker, "consumer-groups", group, "reset-offsets"),
            {"topic": topic, "to": "earliest"},
        )
        assert status == 409 and err["error_code"] == 409
        assert err["message"].startswith("NON_EMPTY_GROUP")
    finally:
        c.close()

    def empty() -> Any:
        return call("GET", v3(broker, "consumer-groups", group))[1].get("state") == "EMPTY"

    assert wait_for(empty)
    # an empty group keeps its protocol type: not "simple" (the CLI's "protocol type consumer" agrees)
    g = call("GET", v3(broker, "consumer-groups", group))[1]
    assert g["is_simple"] is False and g["protocol_type"] == "consumer", g
    url = v3(broker, "consumer-groups", group, "reset-offsets")
    status, dry = call("POST", url, {"topic": topic, "to": "earliest", "dry_run": True})
    assert status == 200 and dry["dry_run"] is True
    assert [(r["partition_id"], r["current_offset"], r["new_offset"]) for r in dry["data"]] == [
        (0, 5, 0),
        (1, 3, 0),
    ]
    lag0 = call("GET", v3(broker, "consumer-groups", group, "lags", topic, "partitions", 0))[1]
    assert lag0["current_offset"] == 5  # a dry run commits nothing
    body = {"topic": topic, "partitions": [0], "to": "offset", "offset": 4, "dry_run": False}
    status, done = call("POST", url, body)
    assert status == 200 and done["data"] == [
        {"topic_name": topic, "partition_id": 0, "current_offset": 5, "new_offset": 4}
    ]
    lag0 = call("GET", v3(broker, "consumer-groups", group, "lags", topic, "partitions", 0))[1]
    assert lag0["current_offset"] == 4 and lag0["lag"] == 3
    status, latest = call("POST", url, {"topic": topic, "to": "latest"})
    assert status == 200 and [r["new_offset"] for r in latest["data"]] == [7, 3]


def test_reset_by_timestamp_creates_offsets(broker: Broker) -> None:
    broker.create_topic("grp-ts", 1)
    for i in range(4):
        body = {"value": {"type": "STRING", "data": str(i)}, "timestamp": 5_000 + i * 10}
        assert call("POST", v3(broker, "topics", "grp-ts", "records"), body)[0] == 200
    url = v3(broker, "consumer-groups", "g-new", "reset-offsets")
    status, r = call("POST", url, {"topic": "grp-ts", "to": "timestamp", "timestamp": 5_015})
    assert status == 200, r
    assert r["data"] == [
        {"topic_name": "grp-ts", "partition_id": 0, "current_offset": None, "new_offset": 2}
    ]
    lag = call("GET", v3(broker, "consumer-groups", "g-new", "lags", "grp-ts", "partitions", 0))
    assert lag[0] == 200 and lag[1]["lag"] == 2
    status, g = call("GET", v3(broker, "consumer-groups", "g-new"))
    assert status == 200 and g["state"] == "EMPTY" and g["is_simple"] is True
    assert g["protocol_type"] == ""  # committed offsets only: AdminClient's isSimpleConsumerGroup


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"to": "earliest"}, 400),
        ({"topic": "grp-ts", "to": "sideways"}, 400),
        ({"topic": "grp-ts", "to": "offset"}, 400),
        ({"topic": "grp-ts", "to": "earliest", "partitions": [9]}, 404),
        ({"topic": "ghost", "to": "earliest"}, 404),
    ],
)
def test_reset_bad_input(broker: Broker, body: dict[str, Any], status: int) -> None:
    if "grp-ts" not in broker.topics():
        broker.create_topic("grp-ts", 1)
    got, err = call("POST", v3(broker, "consumer-groups", "g-bad", "reset-offsets"), body)
    assert got == status and err["error_code"] == status


def test_unknown_group_is_404(broker: Broker) -> None:
    for path in ("", "/consumers", "/lags", "/lag-summary"):
        status, err = call("GET", v3(broker, "consumer-groups", "nobody") + path)
        assert status == 404 and err == {
            "error_code": 404,
            "message": "Consumer group nobody cannot be found.",
        }
