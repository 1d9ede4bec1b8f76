"""Value types shared by the consumer, producer and admin client: TopicPartition, ConsumerRecord,
OffsetAndMetadata, OffsetAndTimestamp, ConsumerGroupMetadata and the ConsumerRebalanceListener protocol.
"""

from __future__ import annotations

from typing import Any, NamedTuple


class TopicPartition(NamedTuple):
    topic: str
    partition: int


class ConsumerRecord(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int  # 0 CreateTime, 1 LogAppendTime
    key: Any
    value: Any
    headers: list[tuple[str, bytes | None]]
    leader_epoch: int = -1


class OffsetAndMetadata(NamedTuple):
    offset: int
    metadata: str | None = ""
    leader_epoch: int = -1


class OffsetAndTimestamp(NamedTuple):
    offset: int
    timestamp: int
    leader_epoch: int = -1


class ConsumerGroupMetadata(NamedTuple):
    """A consumer's place in its group, for the producer's send_offsets_to_transaction (the group
    coordinator rejects offsets from a member of an older generation)."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


class ConsumerRebalanceListener:
    """Override what you need; the consumer calls these from poll() on the thread that polls.

    on_partitions_revoked: partitions given up in a rebalance (commit their offsets here).
    on_partitions_assigned: partitions received (cooperative: only the newly added ones).
    on_partitions_lost: partitions that now belong to someone else without a clean revoke
    (session expired, fenced); defaults to on_partitions_revoked, as in Kafka.
    """

    def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        pass

    def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        pass

    def on_partitions_lost(self, lost: list[TopicPartition]) -> None:
        self.on_partitions_revoked(lost)
