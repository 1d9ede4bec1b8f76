"""Share-partition state across brokers: two in-process brokers on one ZooKeeper; the SharePersister of one
broker reaches the share coordinator on the other with the share-state APIs, and back.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkalite.broker.coordinators.share_persister import PersisterStateBatch, ShareStateRead
from kafkalite.coordinator.share_records import SHARE_GROUP_STATE_TOPIC, SharePartitionKey
from kafkalite.protocol.errors import ErrorCode
from kafkalite.testing import Broker

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

E = ErrorCode
B = PersisterStateBatch
PARTITIONS = 4


@pytest.fixture
def brokers(tmp_path: Path, zk_connect: str) -> Iterator[dict[int, Broker]]:
    props = {
        "zookeeper.connect": zk_connect,
        "zookeeper.session.timeout.ms": "6000",
        "default.replication.factor": "2",
        "offsets.topic.replication.factor": "2",
        "offsets.topic.num.partitions": "2",
        "transaction.state.log.replication.factor": "2",
        "transaction.state.log.num.partitions": "2",
        "share.coordinator.state.topic.replication.factor": "2",
        "share.coordinator.state.topic.num.partitions": str(PARTITIONS),
        "controlled.shutdown.retry.backoff.ms": "200",
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


def _wait(condition: object, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def _leader(b: Broker, partition: int) -> int:
    meta = b.server.metadata_cache.partition(SHARE_GROUP_STATE_TOPIC, partition)
    return -1 if meta is None else int(meta.leader)


def _group_led_by(b: Broker, broker_id: int, topic_id: uuid.UUID, prefix: str = "g") -> str:
    manager = b.server.share_coordinator.manager
    for i in range(1000):
        group = f"{prefix}{i}"
        if _leader(b, manager.partition_for(SharePartitionKey(group, topic_id, 0))) == broker_id:
            return group
    raise AssertionError(f"no group's share state is led by broker {broker_id}")


def test_persister_reaches_the_coordinator_on_another_broker_and_state_fails_over(
    brokers: dict[int, Broker],
) -> None:
    one, two = brokers[1], brokers[2]
    _wait(lambda: all(len(b.server.metadata_cache.alive_brokers()) == 2 for b in (one, two)))
    topic_id = uuid.uuid4()
    # the first call creates __share_group_state (retrying until its partitions have leaders)
    assert (
        one.call(one.server.share_persister.initialize, "g-first", topic_id, 0, 0, 0) == E.NO_ERROR
    )
    _wait(
        lambda: (
            all(_leader(b, p) in (1, 2) for b in (one, two) for p in range(PARTITIONS))
            and {_leader(one, p) for p in range(PARTITIONS)} == {1, 2}
        )
    )
    kept = _group_led_by(one, 2, topic_id, "kept")
    kept_batches = (B(0, 3, 4, 2), B(4, 9, 0, 1))
    assert one.call(one.server.share_persister.write, kept, topic_id, 0, 3, 1, 0, kept_batches) == (
        E.NO_ERROR
    )
    for here, there in ((one, two), (two, one)):
        group = _group_led_by(here, there.server.broker_id, topic_id)
        persister = here.server.share_persister
        assert here.call(persister.initialize, group, topic_id, 0, 1, 10) == E.NO_ERROR
        batches = [B(10, 12, 2, 1), B(13, 20, 0, 1)]
        assert here.call(persister.write, group, topic_id, 0, 1, 5, 10, batches) == E.NO_ERROR
        assert here.call(persister.write, group, topic_id, 0, 1, 4, 10, []) == E.FENCED_LEADER_EPOCH
        expected = ShareStateRead(E.NO_ERROR, None, 1, 10, tuple(batches))
        assert here.call(persister.read, group, topic_id, 0, 5) == expected
        # the state lives on the other broker's coordinator
        key = SharePartitionKey(group, topic_id, 0)
        assert there.server.share_coordinator.manager.state(key) is not None
        assert here.server.share_coordinator.leads(key) is False
        assert here.call(persister.read_summary, group, topic_id, 0, 5) == ShareStateRead(
            E.NO_ERROR, None, 1, 10
        )
        assert here.call(persister.delete, group, topic_id, 0) == E.NO_ERROR
        assert there.call(there.server.share_persister.read, group, topic_id, 0, 5) == (
            ShareStateRead(E.NO_ERROR, None, 0, -1)
        )
    # broker 2 leaves: broker 1 becomes the leader of its share-state partitions and loads them
    # from its replica, so the state written through broker 2's coordinator is still there
    two.stop()
    assert one.call(one.server.share_persister.read, kept, topic_id, 0, 1) == ShareStateRead(
        E.NO_ERROR, None, 3, 0, kept_batches
    )
    assert one.server.share_coordinator.leads(SharePartitionKey(kept, topic_id, 0))
