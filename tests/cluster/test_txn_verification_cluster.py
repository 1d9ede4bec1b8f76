"""KIP-890 part 1 across brokers: the leader of a data partition asks the transaction coordinator on another
broker (AddPartitionsToTxn v4/v5 VerifyOnly over the inter-broker channel) before a transaction's first batch.
A raw client's batch for a partition never added is refused (INVALID_TXN_STATE) and nothing is appended; a
confluent-kafka transactional producer commits through the same path.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalite.cli.wire import WireClient
from kafkalite.coordinator.txn_records import partition_for
from kafkalite.local_cluster import LocalCluster
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.schema import APIS
from kafkalite.records.batch import build_batch
from kafkalite.zkserver import ZooKeeperServer

pytestmark = [pytest.mark.cluster]

QUIET = {"log_level": 0}
TXN_PARTITIONS = 4
INIT_PID, ADD, PRODUCE = APIS[22].request, APIS[24].request, APIS[0].request


@pytest.fixture
def cluster(tmp_path: Path, zookeeper: ZooKeeperServer) -> Iterator[LocalCluster]:
    c = LocalCluster(
        tmp_path / "cluster",
        2,
        zookeeper=zookeeper,
        chroot=f"/{tmp_path.name}",
        config={
            "transaction.state.log.num.partitions": TXN_PARTITIONS,
            "transaction.state.log.replication.factor": 1,
            "transaction.state.log.min.isr": 1,
        },
    )
    with c:
        yield c


def _coordinated_by(admin: AdminClient, broker: int, prefix: str) -> str:
    """A transactional id whose `__transaction_state` partition `broker` leads."""
    md = admin.list_topics("__transaction_state", timeout=10).topics["__transaction_state"]
    leaders = {p: int(m.leader) for p, m in md.partitions.items()}
    for i in range(1000):
        txn_id = f"{prefix}-{i}"
        if leaders.get(partition_for(txn_id, TXN_PARTITIONS)) == broker:
            return txn_id
    raise AssertionError(f"no __transaction_state partition led by broker {broker}: {leaders}")


def _produce(c: WireClient, topic: str, txn_id: str, blob: bytes) -> int:
    part = PRODUCE.TopicProduceData.PartitionProduceData(index=0, records=blob)
    td = PRODUCE.TopicProduceData(name=topic, partition_data=[part])
    req = PRODUCE(transactional_id=txn_id, acks=-1, timeout_ms=10000, topic_data=[td])
    return int(c.send(req, version=9).responses[0].partition_responses[0].error_code)


def test_the_leader_verifies_with_a_coordinator_on_another_broker(cluster: LocalCluster) -> None:
    bs = cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bs, **QUIET})
    topic = f"verify-{uuid.uuid4().hex[:6]}"
    for f in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        f.result(20)
    # the data partition's one replica leads it; the transactions are coordinated by the other broker
    data_leader = int(admin.list_topics(topic, timeout=10).topics[topic].partitions[0].leader)
    other = 3 - data_leader
    # a first transactional producer makes __transaction_state
    warm = Producer({"bootstrap.servers": bs, "transactional.id": "warm-up", **QUIET})
    warm.init_transactions(30)
    txn_id = _coordinated_by(admin, other, "client")
    producer = Producer({"bootstrap.servers": bs, "transactional.id": txn_id, **QUIET})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic, value=b"c%d" % i, partition=0)
    producer.commit_transaction(30)

    raw_id = _coordinated_by(admin, other, "raw")
    coordinator, leader = cluster.brokers[other].bootstrap, cluster.brokers[data_leader].bootstrap
    with WireClient(coordinator, timeout=15) as co, WireClient(leader, timeout=15) as lead:
        r = co.send(INIT_PID(transactional_id=raw_id, transaction_timeout_ms=60000))
        assert r.error_code == 0
        pid, epoch = r.producer_id, r.producer_epoch

        def batch(seq: int, value: bytes) -> bytes:
            return build_batch(
                [(None, value)],
                producer_id=pid,
                producer_epoch=epoch,
                base_sequence=seq,
                is_transactional=True,
            )

        # never added: the coordinator on the other broker says no (a local answer would be NOT_COORDINATOR)
        assert _produce(lead, topic, raw_id, batch(0, b"stray")) == ErrorCode.INVALID_TXN_STATE
        t = ADD.AddPartitionsToTxnTopic(name=topic, partitions=[0])
        add = ADD(
            v3_and_below_transactional_id=raw_id,
            v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=[t],
        )
        deadline = time.monotonic() + 30
        while True:
            code = co.send(add, version=3).results_by_topic_v3_and_below[0]
            code = code.results_by_partition[0].partition_error_code
            if code != ErrorCode.CONCURRENT_TRANSACTIONS or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert code == 0
        assert _produce(lead, topic, raw_id, batch(0, b"added")) == 0

    consumer = Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": f"g-{uuid.uuid4().hex[:6]}",
            "auto.offset.reset": "earliest",
            "isolation.level": "read_uncommitted",
            **QUIET,
        }
    )
    consumer.subscribe([topic])
    seen: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(seen) < 6 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and not msg.error():
            seen.append(msg.value())
    consumer.close()
    # the committed five and the verified one; the stray batch is nowhere
    assert seen == [b"c0", b"c1", b"c2", b"c3", b"c4", b"added"]
