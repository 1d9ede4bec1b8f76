"""Leader balance on a real cluster: three brokers, a topic of six partitions with three replicas; one
broker restarts and comes back leading nothing. A confluent-kafka ElectLeaders (also the CLI and the legacy
/admin/preferred_replica_election znode) gives the preferred replicas their leadership back; with
auto.leader.rebalance.enable the controller does it alone.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import ElectionType, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from kafkalite.cli.main import main as cli_main
from kafkalite.cli.wire import CliError, WireClient
from kafkalite.cluster import zk_data as zd
from kafkalite.local_cluster import LocalCluster
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.leaders import ElectLeadersRequest
from kafkalite.protocol.messages.metadata import MetadataRequest
from kafkalite.zkserver import ZooKeeperServer

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

QUIET = {"log_level": 0}
TOPIC = "balanced"
PARTITIONS = 6


@pytest.fixture
def cluster(tmp_path: Path, zookeeper: ZooKeeperServer) -> Iterator[LocalCluster]:
    """Broker 1 starts first and is the controller, without automatic rebalance; brokers 2 and 3
    have it (checking every second), so the controller after broker 1 rebalances by itself."""
    c = LocalCluster(
        tmp_path / "cluster",
        3,
        zookeeper=zookeeper,
        chroot=f"/{tmp_path.name}",
        config={
            "replica.lag.time.max.ms": 3000,
            "zookeeper.session.timeout.ms": 8000,
            "replica.fetch.backoff.ms": 200,
            "leader.imbalance.check.interval.seconds": 1,
        },
    )
    props = c.broker_props()
    for b in c.brokers.values():
        b.props = {**props, "auto.leader.rebalance.enable": str(b.broker_id != 1).lower()}
    try:
        c.brokers[1].start()
        _wait("broker 1 elected controller", lambda: _controller_of(c.brokers[1].bootstrap) == 1)
        rest = [threading.Thread(target=c.brokers[i].start) for i in (2, 3)]
        for t in rest:
            t.start()
        for t in rest:
            t.join()
        c.wait_for_controller()
        yield c
    finally:
        c.stop()


def _controller_of(bootstrap: str) -> int:
    try:
        with WireClient(bootstrap, timeout=3) as wc:
            return int(wc.send(MetadataRequest(topics=[]), version=1).controller_id)
    except CliError:
        return -1


def _state(admin: AdminClient) -> dict[int, tuple[int, list[int], list[int]]]:
    """partition -> (leader, replicas, isr) as the brokers' metadata has them."""
    md = admin.list_topics(TOPIC, timeout=10).topics[TOPIC]
    return {p: (pm.leader, list(pm.replicas), list(pm.isrs)) for p, pm in md.partitions.items()}


def _balanced(admin: AdminClient) -> bool:
    s = _state(admin)
    return len(s) == PARTITIONS and all(leader == r[0] for leader, r, _ in s.values())


def _wait(what: str, check: Any, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def _setup(cluster: LocalCluster, admin: AdminClient) -> None:
    """The topic, created and written, led by its preferred replicas."""
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(20)
    _wait("every preferred replica leading", lambda: _balanced(admin))
    p = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", **QUIET})
    for i in range(300):
        p.produce(TOPIC, f"v{i}".encode(), partition=i % PARTITIONS)
    assert p.flush(20) == 0


def _restart(cluster: LocalCluster, admin: AdminClient, broker: int) -> list[int]:
    """`broker` stops (its leaderships move away) and starts again, back in every ISR; returns the
    partitions it is the preferred replica of."""
    cluster.brokers[broker].stop()
    led = [p for p, (leader, _, _) in _state(admin).items() if leader == broker]
    assert led == [], f"broker {broker} still leads {led} after its controlled shutdown"
    cluster.brokers[broker].start()
    _wait(
        f"broker {broker} back in every ISR",
        lambda: all(broker in isr for _, _, isr in _state(admin).values()),
    )
    preferred = sorted(p for p, (_, r, _) in _state(admin).items() if r[0] == broker)
    assert preferred, f"the topic's placement gave broker {broker} no preferred partition"
    return preferred


def test_preferred_election_then_automatic_rebalance_restore_balance_after_a_restart(
    cluster: LocalCluster, capsys: Any
) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, **QUIET})
    _setup(cluster, admin)

    # (a) broker 2 restarts; the controller (broker 1) does not rebalance by itself
    preferred = _restart(cluster, admin, 2)
    time.sleep(1.5)
    assert not any(leader == 2 for leader, _, _ in _state(admin).values())
    # one named partition whose preferred replica already leads: ELECTION_NOT_NEEDED
    other = next(p for p, (_, r, _) in _state(admin).items() if r[0] != 2)
    err = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(TOPIC, other)]).result(20)
    assert isinstance(err[TopicPartition(TOPIC, other)], KafkaError)
    assert err[TopicPartition(TOPIC, other)].code() == ErrorCode.ELECTION_NOT_NEEDED
    # Kafka's legacy /admin/preferred_replica_election znode: done, then deleted by the controller
    first, rest = preferred[0], preferred[1:]
    raw = KazooClient(hosts=cluster.zookeeper_connect)
    raw.start()
    try:
        raw.create(
            zd.PREFERRED_REPLICA_ELECTION, zd.encode_preferred_replica_election([(TOPIC, first)])
        )
        _wait("the znode's election", lambda: _state(admin)[first][0] == 2)
        _wait("the znode deleted", lambda: raw.exists(zd.PREFERRED_REPLICA_ELECTION) is None)
    finally:
        raw.stop()
    # every partition: broker 2's other preferred ones are elected; those needing nothing are left out
    results = admin.elect_leaders(ElectionType.PREFERRED, None).result(20)
    mine = {(tp.topic, tp.partition): e for tp, e in results.items() if tp.topic == TOPIC}
    assert mine == {(TOPIC, p): None for p in rest}
    _wait("the preferred replicas leading again", lambda: _balanced(admin))

    # a broker that is not the controller answers NOT_CONTROLLER for each partition
    with WireClient(cluster.brokers[3].bootstrap, timeout=10) as wc:
        req = ElectLeadersRequest(
            election_type=0,
            topic_partitions=[ElectLeadersRequest.TopicPartitions(topic=TOPIC, partitions=[0])],
        )
        resp = wc.send(req)
    assert [(r.topic, [(p.partition_id, p.error_code) for p in r.partition_result])
            for r in resp.replica_election_results] == [(TOPIC, [(0, ErrorCode.NOT_CONTROLLER)])]  # fmt: skip

    # the CLI through the controller: nothing left to do, exit 0
    bs = cluster.bootstrap_servers
    assert cli_main(["leaders", "elect", "--bootstrap-server", bs,
                     "--election-type", "preferred", "--topic", TOPIC]) == 0  # fmt: skip
    assert f"Valid replica already elected for partitions {TOPIC}-0" in capsys.readouterr().out
    # an unclean election is not needed while every partition has a live leader
    assert cli_main(["leaders", "elect", "--bootstrap-server", bs, "--election-type", "unclean",
                     "--topic", TOPIC, "--partition", "1", "--output", "json"]) == 0  # fmt: skip
    assert '"error":"ELECTION_NOT_NEEDED"' in capsys.readouterr().out
    assert cli_main(["leaders", "elect", "--bootstrap-server", bs, "--election-type",
                     "preferred", "--topic", TOPIC, "--partition", "99"]) == 2  # fmt: skip
    assert "UNKNOWN_TOPIC_OR_PARTITION" in capsys.readouterr().out

    # (b) broker 1 (the controller) restarts: broker 2 or 3 takes over, with automatic rebalance
    cluster.brokers[1].stop()
    assert not any(leader == 1 for leader, _, _ in _state(admin).values())
    started = time.monotonic()
    cluster.brokers[1].start()
    _wait("the new controller's rebalance", lambda: _balanced(admin))
    print(f"broker 1 leads its preferred partitions {time.monotonic() - started:.1f} s after start")
