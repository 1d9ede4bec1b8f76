"""RoundRobinAssignor ("roundrobin"): all subscribed partitions in order, dealt to the sorted members in turn.

A member not subscribed to a partition's topic is skipped for that partition, as in Kafka.
"""

from __future__ import annotations

from kafkalite.client.assignors.base import (
    EAGER,
    AbstractPartitionAssignor,
    Assignment,
    Subscription,
    TopicPartition,
    empty_assignment,
    sorted_members,
    subscribed_partitions,
    to_assignments,
)


class RoundRobinAssignor(AbstractPartitionAssignor):
    """Deal every partition of every subscribed topic (topics sorted, partitions ascending) round-robin.

    The dealer cycles over members in Kafka's member order and, for each partition, advances past
    members not subscribed to its topic; the partition goes to the first subscribed member, and the
    cycle continues after it.
    """

    name = "roundrobin"
    supported_protocols = [EAGER]

    def assign(
        self, partitions_per_topic: dict[str, int], subscriptions: dict[str, Subscription]
    ) -> dict[str, Assignment]:
        result: dict[str, list[TopicPartition]] = empty_assignment(subscriptions)
        members = sorted_members(subscriptions)
        topics_of = {m: set(subscriptions[m].topics) for m in members}
        all_topics = {t for topics in topics_of.values() for t in topics}
        cursor = 0
        for tp in subscribed_partitions(partitions_per_topic, all_topics):
            # someone is subscribed to every topic in all_topics, so this stops within one cycle
            while tp[0] not in topics_of[members[cursor]]:
                cursor = (cursor + 1) % len(members)
            result[members[cursor]].append(tp)
            cursor = (cursor + 1) % len(members)
        return to_assignments(result)
