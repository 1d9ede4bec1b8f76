"""/metrics on a 3-broker cluster: one active controller among them, messages counted once (by each
partition's leader), followers' fetches as replication bytes, each group partition's lag once (on the group's
coordinator), and ISR shrinks and expands around a paused follower.
"""

from __future__ import annotations

import re
import time
import urllib.request
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from kafkalite.local_cluster import BrokerProcess, LocalCluster
from kafkalite.zkserver import ZooKeeperServer

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

N = 3000
TOPIC = "metered3"
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@pytest.fixture(scope="module")
def cluster(
    tmp_path_factory: pytest.TempPathFactory, zookeeper: ZooKeeperServer
) -> Iterator[LocalCluster]:
    base = tmp_path_factory.mktemp("metrics")
    # a follower that stops fetching leaves the ISR after 2 s, long before its ZooKeeper session
    # (15 s) expires and the controller would act instead of its leaders (a loaded CI machine)
    config = {
        "http.listeners": "http://127.0.0.1:0",
        "replica.lag.time.max.ms": "2000",
        "zookeeper.session.timeout.ms": "15000",
    }
    with LocalCluster(
        base / "cluster", 3, config=config, zookeeper=zookeeper, chroot=f"/{base.name}"
    ) as c:
        admin = AdminClient({"bootstrap.servers": c.bootstrap_servers, "log_level": 0})
        admin.create_topics([NewTopic(TOPIC, 3, 3)], operation_timeout=20)[TOPIC].result()
        yield c


def http_url(b: BrokerProcess) -> str:
    """The HTTP listener's URL, from the line the broker logs when it binds port 0."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = re.search(r"HTTP listener on (http://[\d.]+:\d+)", b.log_path.read_text())
        if found:
            return found.group(1)
        time.sleep(0.1)
    raise AssertionError(f"broker {b.broker_id} logged no HTTP listener")


def scrape(url: str) -> Samples:
    with urllib.request.urlopen(url + "/metrics", timeout=10) as resp:
        text = resp.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_metrics_across_the_cluster(cluster: LocalCluster) -> None:
    bs = cluster.bootstrap_servers
    p = Producer({"bootstrap.servers": bs, "acks": "all", "linger.ms": 5})
    for i in range(N):
        p.produce(TOPIC, value=b"%06d" % i, partition=i % 3)
    assert p.flush(60) == 0
    c = Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": "metered3-readers",
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
        c.commit(asynchronous=False)
        urls = [http_url(b) for b in cluster.brokers.values()]
        lag_name = "kafka_consumergroup_lag"
        deadline = time.monotonic() + 20
        while True:
            scrapes = [scrape(u) for u in urls]
            lags = sorted(
                (dict(labels)["partition"], v)
                for s in scrapes
                for (name, labels), v in s.items()
                if name == lag_name and dict(labels)["topic"] == TOPIC
            )
            if lags == [("0", 0), ("1", 0), ("2", 0)] or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    finally:
        c.close()
    assert lags == [("0", 0), ("1", 0), ("2", 0)]  # each partition once, by the coordinator
    active = "kafka_controller_kafkacontroller_activecontrollercount"
    assert sum(s[(active, ())] for s in scrapes) == 1
    messages = ("kafka_server_brokertopicmetrics_messagesin_total", (("topic", TOPIC),))
    assert sum(s.get(messages, 0) for s in scrapes) == N
    replication = ("kafka_server_brokertopicmetrics_replicationbytesout_total", (("topic", TOPIC),))
    assert sum(s.get(replication, 0) for s in scrapes) > N * 6
    for s in scrapes:
        assert s[("kafka_server_replicamanager_underreplicatedpartitions", ())] == 0
        assert s[("kafka_log_log_logendoffset", (("partition", "0"), ("topic", TOPIC)))] == N / 3
    leaders = sum(
        s[("kafka_server_replicamanager_leadercount", ())] for s in scrapes
    )  # every hosted partition has one leader
    partitions = sum(s[("kafka_server_replicamanager_partitioncount", ())] for s in scrapes)
    assert partitions == 3 * leaders


def test_isr_shrinks_and_expands_around_a_paused_broker(cluster: LocalCluster) -> None:
    urls = {b.broker_id: http_url(b) for b in cluster.brokers.values()}
    active = "kafka_controller_kafkacontroller_activecontrollercount"
    controller = next(i for i, u in urls.items() if scrape(u)[(active, ())] == 1)
    paused = next(i for i in urls if i != controller)
    others = [u for i, u in urls.items() if i != paused]
    shrinks = ("kafka_server_replicamanager_isrshrinks_total", ())
    expands = ("kafka_server_replicamanager_isrexpands_total", ())
    under = ("kafka_server_replicamanager_underreplicatedpartitions", ())

    def total(key: tuple[str, tuple[tuple[str, str], ...]]) -> float:
        return sum(scrape(u)[key] for u in others)

    before_shrinks, before_expands = total(shrinks), total(expands)
    p = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": 1})
    cluster.brokers[paused].pause()
    try:
        # new records the paused follower cannot fetch: it falls behind, and its leaders shrink
        # the ISR (before its ZooKeeper session, 15 s, expires and the controller acts instead)
        deadline = time.monotonic() + 12
        while total(shrinks) == before_shrinks and time.monotonic() < deadline:
            for i in range(3):
                p.produce(TOPIC, value=b"late", partition=i)
            p.poll(0)
            time.sleep(0.2)
        assert total(shrinks) > before_shrinks
        assert total(under) > 0
    finally:
        cluster.brokers[paused].resume()
    deadline = time.monotonic() + 30
    while total(under) > 0 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert total(under) == 0
    assert total(expands) > before_expands
    p.flush(30)
