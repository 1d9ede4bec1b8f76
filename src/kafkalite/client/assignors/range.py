"""RangeAssignor ("range"): per topic, consecutive partition ranges to the sorted members subscribed to it.

The first (partitions mod members) members of each topic get one extra partition, as in Kafka.
"""

from __future__ import annotations

from kafkalite.client.assignors.base import (
    EAGER,
    AbstractPartitionAssignor,
    Assignment,
    Subscription,
    TopicPartition,
    empty_assignment,
    member_sort_key,
    to_assignments,
)


class RangeAssignor(AbstractPartitionAssignor):
    """Kafka's default assignor: topic by topic, member i of n gets partitions [start_i, start_i + len_i).

    Members subscribed to a topic are ordered by Kafka's member order (static members by
    group.instance.id first, then member id), so co-partitioned topics line up on the same member.
    """

    name = "range"
    supported_protocols = [EAGER]

    def assign(
        self, partitions_per_topic: dict[str, int], subscriptions: dict[str, Subscription]
    ) -> dict[str, Assignment]:
        result: dict[str, list[TopicPartition]] = empty_assignment(subscriptions)
        members_per_topic: dict[str, list[str]] = {}
        for member, sub in subscriptions.items():
            for topic in set(sub.topics):
                members_per_topic.setdefault(topic, []).append(member)
        for topic, members in members_per_topic.items():
            num_partitions = partitions_per_topic.get(topic, 0)
            if num_partitions <= 0:
                continue
            members.sort(key=lambda m: member_sort_key(m, subscriptions[m].group_instance_id))
            per_member, extra = divmod(num_partitions, len(members))
            for i, member in enumerate(members):
                start = per_member * i + min(i, extra)
                length = per_member + (1 if i < extra else 0)
                result[member].extend((topic, p) for p in range(start, start + length))
        return to_assignments(result)
