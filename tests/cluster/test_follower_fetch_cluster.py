"""KIP-392 on a real cluster: three brokers in racks a, b and c with the rack-aware replica selector; a
confluent-kafka consumer with client.rack of a follower's rack is sent there by the leader and reads exactly
the records the leader serves, offset by offset, while the leader's consumer-fetch count stays still.
"""

from __future__ import annotations

import re
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from kafkalite.cli.wire import WireClient
from kafkalite.cluster.replica_selector import RACK_AWARE_SELECTOR
from kafkalite.local_cluster import BrokerProcess, LocalCluster
from kafkalite.protocol.messages.metadata import MetadataRequest
from kafkalite.zkserver import ZooKeeperServer

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

QUIET = {"log_level": 0}
TOPIC = "nearby"
N = 2000
RACKS = {1: "a", 2: "b", 3: "c"}


@pytest.fixture
def cluster(tmp_path: Path, zookeeper: ZooKeeperServer) -> Iterator[LocalCluster]:
    c = LocalCluster(
        tmp_path / "cluster",
        3,
        zookeeper=zookeeper,
        chroot=f"/{tmp_path.name}",
        config={
            "replica.selector.class": RACK_AWARE_SELECTOR,
            "http.listeners": "http://127.0.0.1:0",
        },
        broker_config={i: {"broker.rack": r} for i, r in RACKS.items()},
    )
    with c:
        yield c


def http_url(b: BrokerProcess) -> str:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = re.search(r"HTTP listener on (http://[\d.]+:\d+)", b.log_path.read_text())
        if found:
            return found.group(1)
        time.sleep(0.1)
    raise AssertionError(f"broker {b.broker_id} logged no HTTP listener")


def consumer_fetches(b: BrokerProcess) -> tuple[float, float]:
    """(consumer fetches read here, redirects to a preferred read replica) of partition 0."""
    with urllib.request.urlopen(http_url(b) + "/metrics", timeout=10) as resp:
        text = resp.read().decode()
    got = {"consumerfetchrequests": 0.0, "preferredreadreplicaredirects": 0.0}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.labels == {"topic": TOPIC, "partition": "0"} and s.name.endswith("_total"):
                name = s.name.removeprefix("kafkalite_partition_").removesuffix("_total")
                if name in got:
                    got[name] = s.value
    return got["consumerfetchrequests"], got["preferredreadreplicaredirects"]


def read_all(bootstrap: str, expected: int, rack: str | None) -> list[tuple[int, bytes]]:
    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": f"reader-{rack}",
        "enable.auto.commit": False,
        "fetch.wait.max.ms": 100,
        **QUIET,
    }
    if rack is not None:
        conf["client.rack"] = rack
    c = Consumer(conf)
    c.assign([TopicPartition(TOPIC, 0, 0)])
    out: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + 30
    try:
        while len(out) < expected and time.monotonic() < deadline:
            for m in c.consume(500, timeout=0.5):
                assert m.error() is None, m.error()
                out.append((m.offset(), m.value()))
    finally:
        c.close()
    return out


def test_a_rack_consumer_reads_its_racks_follower(cluster: LocalCluster) -> None:
    bs = cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bs, **QUIET})
    admin.create_topics([NewTopic(TOPIC, 1, 3)], operation_timeout=20)[TOPIC].result()
    # every broker's rack, as registered in /brokers/ids, is in the Metadata response
    with WireClient(cluster.brokers[1].bootstrap, timeout=10) as wc:
        md = wc.send(MetadataRequest(topics=[]), version=1)
    assert {b.node_id: b.rack for b in md.brokers} == RACKS
    p = Producer({"bootstrap.servers": bs, "acks": "all", "linger.ms": 5, **QUIET})
    acked: dict[int, bytes] = {}

    def done(err: object, msg: object) -> None:
        assert err is None, err
        acked[msg.offset()] = msg.value()  # type: ignore[attr-defined]

    for i in range(N):
        p.produce(TOPIC, value=b"%06d" % i, partition=0, on_delivery=done)
    assert p.flush(60) == 0
    expected = sorted(acked.items())
    assert len(expected) == N

    part = admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions[0]
    leader = part.leader
    follower = next(b for b in part.replicas if b != leader)
    # wait until every replica is in sync (the leader only names in-sync replicas)
    deadline = time.monotonic() + 20
    while len(part.isrs) < 3 and time.monotonic() < deadline:
        time.sleep(0.2)
        part = admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions[0]
    assert len(part.isrs) == 3
    lead_b, follow_b = cluster.brokers[leader], cluster.brokers[follower]
    lead_before, redirects_before = consumer_fetches(lead_b)
    follow_before, _ = consumer_fetches(follow_b)

    near = read_all(bs, N, RACKS[follower])
    assert near == expected  # exactly the acknowledged records, in order, per offset

    lead_after, redirects_after = consumer_fetches(lead_b)
    follow_after, _ = consumer_fetches(follow_b)
    assert redirects_after > redirects_before  # the leader named the follower
    assert follow_after - follow_before >= 1  # ...which served the reads
    assert lead_after - lead_before <= 1  # at most one read before the redirect took effect

    from_leader = read_all(bs, N, None)
    assert from_leader == near
    assert consumer_fetches(lead_b)[0] > lead_after  # and that one was read at the leader
