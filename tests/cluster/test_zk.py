"""KafkaZkClient against a real ZooKeeper: Kafka's layout and JSON, ephemeral registrations and the
controller election, compare-and-set partition states, configs, deletions, watches, and a clear error
when ZooKeeper cannot be reached.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
import uuid

import pytest
from kazoo.client import KazooClient

from kafkalite.cluster import zk_data as zd
from kafkalite.cluster.zk import ControllerMovedError, KafkaZkClient, ZkError
from kafkalite.zkserver import ZooKeeperServer

pytestmark = pytest.mark.cluster


def _client(connect: str, session_ms: int = 6000) -> KafkaZkClient:
    c = KafkaZkClient(connect, session_timeout_ms=session_ms, connection_timeout_ms=5000)
    c.start()
    return c


def test_chroot_cluster_id_and_kafkas_layout(zookeeper: ZooKeeperServer, zk_connect: str) -> None:
    a = _client(zk_connect)
    b = _client(zk_connect)
    try:
        cid = a.get_or_create_cluster_id()
        assert b.get_or_create_cluster_id() == cid and len(cid) == 22
        raw = KazooClient(hosts=zookeeper.connect_string)
        raw.start(5)
        chroot = zk_connect[zk_connect.index("/") :]
        doc = json.loads(raw.get(chroot + "/cluster/id")[0])
        assert doc == {"version": "1", "id": cid}
        for path in ("/brokers/ids", "/brokers/topics", "/config/topics", "/admin/delete_topics"):
            assert raw.exists(chroot + path), path
        raw.stop()
    finally:
        a.close()
        b.close()


def test_broker_registration_is_ephemeral_and_unique(zk_connect: str) -> None:
    a = _client(zk_connect)
    b = _client(zk_connect)
    try:
        epoch = a.register_broker(1, "127.0.0.1", 9092, "r1")
        assert epoch > 0
        with pytest.raises(ZkError, match="already registered"):
            b.register_broker(1, "127.0.0.1", 9093, None)
        live = b.live_brokers()
        assert list(live) == [1] and live[1].port == 9092 and live[1].rack == "r1"
        assert live[1].epoch == epoch
        a.close()
        deadline = time.monotonic() + 10
        while b.live_brokers():
            assert time.monotonic() < deadline, "registration outlived its session"
            time.sleep(0.05)
        assert b.register_broker(1, "127.0.0.1", 9093, None) > epoch  # a new broker epoch
    finally:
        b.close()


def test_one_controller_wins_and_the_epoch_grows(zk_connect: str) -> None:
    clients = [_client(zk_connect) for _ in range(3)]
    try:
        results: list[tuple[int, tuple[int, int] | None]] = []
        threads = [
            threading.Thread(target=lambda i=i, c=c: results.append((i, c.try_elect_controller(i))))
            for i, c in enumerate(clients)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        winners = [(i, r) for i, r in results if r is not None]
        assert len(winners) == 1
        winner, (epoch, _) = winners[0]
        assert epoch == 1 and clients[1].read_controller() == (winner, 1)
        clients[winner].close()
        other = next(c for i, c in enumerate(clients) if i != winner)
        deadline = time.monotonic() + 10
        while other.read_controller() is not None:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert other.try_elect_controller(99) == (2, 2)
    finally:
        for c in clients:
            if c.connected:
                c.close()


def test_topics_and_partition_states_by_compare_and_set(zk_connect: str) -> None:
    c = _client(zk_connect)
    try:
        tid = uuid.uuid4()
        c.create_topic("orders", tid, {0: (1, 2, 3), 1: (2, 3, 1)}, {"retention.ms": "1000"})
        with pytest.raises(ZkError, match="already exists"):
            c.create_topic("orders", tid, {0: (1,)}, {})
        topic = c.topic("orders")
        assert topic is not None and topic.topic_id == tid and topic.partitions[1] == (2, 3, 1)
        assert c.configs.topic_config("orders") == {"retention.ms": "1000"}
        won = c.try_elect_controller(1)
        assert won is not None
        epoch, zkv = won
        done, failed = c.write_partition_states({("orders", 0): (1, 0, (1, 2, 3), -1)}, epoch, zkv)
        assert done == {("orders", 0): 0} and failed == []
        # a stale writer (expected version 5) loses; the current version wins
        done, failed = c.write_partition_states({("orders", 0): (2, 1, (2, 3), 5)}, epoch, zkv)
        assert done == {} and failed == [("orders", 0)]
        done, _ = c.write_partition_states({("orders", 0): (2, 1, (2, 3), 0)}, epoch, zkv)
        state = c.partition_states([("orders", 0), ("orders", 1)])
        assert list(state) == [("orders", 0)]
        assert state[("orders", 0)] == zd.PartitionStateZNode(2, 1, (2, 3), epoch, 1)
        # a zombie: once another broker has been elected (the epoch znode moved), the old
        # controller's writes are fenced and change nothing
        c.resign_controller(1)
        other = _client(zk_connect)
        try:
            assert other.try_elect_controller(2) == (epoch + 1, zkv + 1)
        finally:
            other.close()
        with pytest.raises(ControllerMovedError):
            c.write_partition_states({("orders", 0): (3, 9, (3,), 1)}, epoch, zkv)
        assert c.partition_states([("orders", 0)])[("orders", 0)].leader == 2
        c.mark_topic_for_deletion("orders")
        assert c.topics_to_delete() == ["orders"]
        c.delete_topic_znodes("orders")
        assert (
            c.topic("orders") is None
            and c.topics_to_delete() == []
            and c.configs.topic_config("orders") == {}
        )
    finally:
        c.close()


def test_watches_fire_on_changes(zk_connect: str) -> None:
    c = _client(zk_connect)
    other = _client(zk_connect)
    seen: list[list[str]] = []
    controller: list[bytes | None] = []
    try:
        c.watch_children("/brokers/ids", lambda kids: seen.append(sorted(kids)))
        c.watch_data("/controller", controller.append)
        other.register_broker(7, "127.0.0.1", 1, None)
        other.try_elect_controller(7)
        deadline = time.monotonic() + 10
        while ["7"] not in seen or not any(controller):
            assert time.monotonic() < deadline, (seen, controller)
            time.sleep(0.02)
        assert controller[0] is None and zd.decode_controller(controller[-1] or b"") == 7
    finally:
        other.close()
        c.close()


def test_unreachable_zookeeper_is_a_clear_error() -> None:
    c = KafkaZkClient("127.0.0.1:1/kafka", session_timeout_ms=2000, connection_timeout_ms=500)
    started = time.monotonic()
    with pytest.raises(ZkError, match=r"cannot reach ZooKeeper at 127\.0\.0\.1:1"):
        c.start()
    assert time.monotonic() - started < 5


def test_producer_id_blocks_never_overlap(zk_connect: str) -> None:
    clients = [_client(zk_connect) for _ in range(3)]
    try:
        blocks: list[tuple[int, int]] = []
        lock = threading.Lock()

        def claim(i: int, c: KafkaZkClient) -> None:
            for _ in range(5):
                b = c.claim_producer_id_block(i)
                with lock:
                    blocks.append(b)

        threads = [threading.Thread(target=claim, args=(i, c)) for i, c in enumerate(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        blocks.sort()
        assert len(blocks) == 15 and blocks[0] == (0, zd.PRODUCER_ID_BLOCK_SIZE - 1)
        for (_, end), (start, _) in itertools.pairwise(blocks):
            assert start == end + 1  # contiguous and disjoint, whoever claimed them
    finally:
        for c in clients:
            c.close()
