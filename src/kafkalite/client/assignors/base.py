"""The consumer partition assignor interface: Subscription, Assignment and the ConsumerPartitionAssignor protocol.

Also the orderings every built-in assignor shares (Kafka's member and topic-partition order) and the rebalance protocols.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

TopicPartition = tuple[str, int]

# Kafka's RebalanceProtocol names; COOPERATIVE (KIP-429) ranks above EAGER.
EAGER = "eager"
COOPERATIVE = "cooperative"
REBALANCE_PROTOCOL_RANK: dict[str, int] = {EAGER: 0, COOPERATIVE: 1}


@dataclass
class Subscription:
    """One member's JoinGroup metadata as the leader sees it (ConsumerProtocolSubscription plus instance id)."""

    topics: list[str]
    user_data: bytes | None = None
    owned_partitions: list[TopicPartition] = field(default_factory=list)
    generation_id: int = -1
    group_instance_id: str | None = None
    rack_id: str | None = None


@dataclass
class Assignment:
    """One member's share of the group: the partitions it consumes and opaque assignor data."""

    partitions: list[TopicPartition]
    user_data: bytes | None = None


@runtime_checkable
class ConsumerPartitionAssignor(Protocol):
    """What the consumer needs from an assignor (Kafka's ConsumerPartitionAssignor).

    `name` is the protocol name sent in JoinGroup; `supported_protocols` lists the rebalance protocols
    ("eager", "cooperative") the assignor's output is safe for. `assign` runs on the group leader only
    and must return an entry for every member id in `subscriptions`; `on_assignment` runs on every
    member after SyncGroup with the member's own assignment and the new generation.
    """

    name: str
    supported_protocols: list[str]

    def subscription_user_data(self, topics: set[str]) -> bytes | None: ...

    def assign(
        self, partitions_per_topic: dict[str, int], subscriptions: dict[str, Subscription]
    ) -> dict[str, Assignment]: ...

    def on_assignment(self, assignment: Assignment, generation: int) -> None: ...


class AbstractPartitionAssignor:
    """Convenience base for assignors without member state: no user data, nothing to remember."""

    name = "abstract"
    supported_protocols: list[str] = [EAGER]

    def subscription_user_data(self, topics: set[str]) -> bytes | None:
        return None

    def assign(
        self, partitions_per_topic: dict[str, int], subscriptions: dict[str, Subscription]
    ) -> dict[str, Assignment]:
        raise NotImplementedError

    def on_assignment(self, assignment: Assignment, generation: int) -> None:
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


def java_order(s: str) -> bytes:
    """Sort key giving Java's String.compareTo order (UTF-16 code units), which Kafka's assignors use."""
    return s.encode("utf-16-be", "surrogatepass")


def member_sort_key(member_id: str, group_instance_id: str | None) -> tuple[int, bytes, bytes]:
    """Kafka's member order: static members first by group.instance.id, then dynamic ones by member id."""
    if group_instance_id is not None:
        return (0, java_order(group_instance_id), java_order(member_id))
    return (1, java_order(member_id), b"")


def sorted_members(subscriptions: Mapping[str, Subscription]) -> list[str]:
    """Member ids in Kafka's member order."""
    return sorted(
        subscriptions, key=lambda m: member_sort_key(m, subscriptions[m].group_instance_id)
    )


def subscribed_partitions(
    partitions_per_topic: Mapping[str, int], topics: Iterable[str]
) -> list[TopicPartition]:
    """Every partition of the given topics that exist, topics in Java string order, partitions ascending."""
    out: list[TopicPartition] = []
    for topic in sorted(set(topics), key=java_order):
        out.extend((topic, p) for p in range(partitions_per_topic.get(topic, 0)))
    return out


def empty_assignment(subscriptions: Mapping[str, Subscription]) -> dict[str, list[TopicPartition]]:
    return {member: [] for member in subscriptions}


def to_assignments(per_member: Mapping[str, list[TopicPartition]]) -> dict[str, Assignment]:
    """Wrap per-member partition lists (sorted by topic, partition) as Assignment values."""
    return {member: Assignment(sorted(tps)) for member, tps in per_member.items()}
