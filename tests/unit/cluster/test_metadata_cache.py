"""MetadataCache: snapshots of brokers and partition leadership, updates that replace whole maps, and the
single-node view (this broker leads every partition at epoch 0).
"""

from __future__ import annotations

import uuid

from kafkalite.cluster.metadata_cache import (
    NO_LEADER,
    BrokerEndpoint,
    MetadataCache,
    PartitionMetadata,
    TopicMetadata,
    local_topic_metadata,
)

TID = uuid.UUID(int=42)


def test_local_topics_are_led_here_at_epoch_zero() -> None:
    cache = MetadataCache(7)
    cache.set_brokers([BrokerEndpoint(7, "127.0.0.1", 9092)], controller_id=7)
    cache.put_topic(local_topic_metadata("t", TID, 3, 7))
    t = cache.topic("t")
    assert t is not None and t.partition_count == 3 and not t.internal
    assert cache.topic_by_id(TID) is t
    assert [(p.leader, p.leader_epoch, p.replicas, p.isr) for p in t.partitions] == [
        (7, 0, (7,), (7,))
    ] * 3
    assert cache.leader_endpoint("t", 2) == BrokerEndpoint(7, "127.0.0.1", 9092)
    assert cache.partition("t", 3) is None and cache.partition("missing", 0) is None


def test_partition_updates_replace_states_and_grow_topics() -> None:
    cache = MetadataCache(1)
    cache.set_brokers([BrokerEndpoint(2, "h2", 2), BrokerEndpoint(1, "h1", 1)], controller_id=2)
    assert [b.broker_id for b in cache.alive_brokers()] == [1, 2]
    cache.put_topic(TopicMetadata("t", TID, (PartitionMetadata("t", 0, 1, 3, (1, 2), (1, 2)),)))
    before = cache.topic("t")
    cache.update_partitions(
        [
            PartitionMetadata("t", 0, 2, 4, (1, 2), (2,)),
            PartitionMetadata("t", 2, 1, 0, (1, 2), (1, 2)),
            PartitionMetadata("unknown", 0, 1, 0, (1,), (1,)),
        ]
    )
    t = cache.topic("t")
    assert before is not None and before.partition(0).leader == 1  # readers' snapshot unchanged
    assert t is not None and t.partition_count == 3
    assert t.partition(0) == PartitionMetadata("t", 0, 2, 4, (1, 2), (2,))
    missing = t.partition(1)
    assert missing is not None and missing.leader == NO_LEADER and not missing.has_leader
    assert cache.leader_endpoint("t", 1) is None
    assert cache.topic("unknown") is None
    assert cache.remove_topic("t") is not None and cache.topic_by_id(TID) is None
    assert cache.remove_topic("t") is None
