"""Consumer partition assignors: Range, RoundRobin, Sticky, CooperativeSticky, and the registry to pick them by name.

The group leader runs the assignor chosen by the coordinator; every member calls on_assignment after SyncGroup.

Plugging in a custom assignor: any object with the ConsumerPartitionAssignor shape works (a `name`,
`supported_protocols`, `subscription_user_data`, `assign`, `on_assignment`); subclass
AbstractPartitionAssignor to inherit the no-op parts. Pass the instance (or class) where the consumer
takes `partition.assignment.strategy`, or register the class so it can be named in configuration::

    from kafkalite.client.assignors import (
        AbstractPartitionAssignor, Assignment, Subscription, register_assignor, get_assignor,
    )

    class FirstMemberTakesAll(AbstractPartitionAssignor):
        name = "first-takes-all"          # the protocol name sent in JoinGroup

        def assign(self, partitions_per_topic: dict[str, int],
                   subscriptions: dict[str, Subscription]) -> dict[str, Assignment]:
            members = sorted(subscriptions)
            result = {m: Assignment([]) for m in members}
            for topic in sorted({t for s in subscriptions.values() for t in s.topics}):
                takers = [m for m in members if topic in subscriptions[m].topics]
                result[takers[0]].partitions += [(topic, p)
                                                 for p in range(partitions_per_topic.get(topic, 0))]
            return result

    register_assignor(FirstMemberTakesAll)
    assignor = get_assignor("first-takes-all")

`assign` must return an entry for every member, give each partition to at most one member, and only
to a member subscribed to its topic. An assignor that lists "cooperative" in supported_protocols
must also never give a partition to a member while another member still owns it (see
CooperativeStickyAssignor and withhold_transfers).
"""

from __future__ import annotations

from collections.abc import Iterable

from kafkalite.client.assignors.base import (
    COOPERATIVE,
    EAGER,
    REBALANCE_PROTOCOL_RANK,
    AbstractPartitionAssignor,
    Assignment,
    ConsumerPartitionAssignor,
    Subscription,
    TopicPartition,
)
from kafkalite.client.assignors.range import RangeAssignor
from kafkalite.client.assignors.roundrobin import RoundRobinAssignor
from kafkalite.client.assignors.sticky import (
    CooperativeStickyAssignor,
    StickyAssignor,
    decode_sticky_user_data,
    encode_sticky_user_data,
    withhold_transfers,
)

__all__ = [
    "ASSIGNORS",
    "COOPERATIVE",
    "EAGER",
    "AbstractPartitionAssignor",
    "Assignment",
    "ConsumerPartitionAssignor",
    "CooperativeStickyAssignor",
    "RangeAssignor",
    "RoundRobinAssignor",
    "StickyAssignor",
    "Subscription",
    "TopicPartition",
    "decode_sticky_user_data",
    "encode_sticky_user_data",
    "get_assignor",
    "register_assignor",
    "resolve_assignor",
    "select_rebalance_protocol",
    "withhold_transfers",
]

ASSIGNORS: dict[str, type] = {
    cls.name: cls
    for cls in (RangeAssignor, RoundRobinAssignor, StickyAssignor, CooperativeStickyAssignor)
}

# Java class names accepted in partition.assignment.strategy, mapped to protocol names
_JAVA_CLASS_NAMES = {
    "org.apache.kafka.clients.consumer.RangeAssignor": "range",
    "org.apache.kafka.clients.consumer.RoundRobinAssignor": "roundrobin",
    "org.apache.kafka.clients.consumer.StickyAssignor": "sticky",
    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": "cooperative-sticky",
}


def register_assignor(cls: type, name: str | None = None) -> type:
    """Make a custom assignor class constructible by name (its `name` attribute unless given)."""
    key = name or getattr(cls, "name", None)
    if not isinstance(key, str) or not key:
        raise ValueError(f"{cls!r} has no assignor name")
    ASSIGNORS[key] = cls
    return cls


def get_assignor(name: str) -> ConsumerPartitionAssignor:
    """A new assignor instance by protocol name ("range", ...) or Kafka's Java class name."""
    key = _JAVA_CLASS_NAMES.get(name.strip(), name.strip())
    cls = ASSIGNORS.get(key)
    if cls is None:
        raise ValueError(
            f"unknown partition assignor {name!r}; known: {', '.join(sorted(ASSIGNORS))}"
        )
    assignor: ConsumerPartitionAssignor = cls()
    return assignor


def resolve_assignor(spec: str | type | ConsumerPartitionAssignor) -> ConsumerPartitionAssignor:
    """Turn one `partition.assignment.strategy` entry (name, class or instance) into an instance."""
    if isinstance(spec, str):
        return get_assignor(spec)
    obj = spec() if isinstance(spec, type) else spec
    if not isinstance(obj, ConsumerPartitionAssignor):
        raise TypeError(f"{spec!r} is not a ConsumerPartitionAssignor")
    return obj


def select_rebalance_protocol(assignors: Iterable[ConsumerPartitionAssignor]) -> str:
    """Kafka's choice: the highest rebalance protocol every configured assignor supports."""
    common: set[str] | None = None
    for assignor in assignors:
        supported = set(assignor.supported_protocols)
        common = supported if common is None else common & supported
    if not common:
        raise ValueError("the configured assignors support no common rebalance protocol")
    return max(common, key=lambda p: REBALANCE_PROTOCOL_RANK.get(p, -1))
