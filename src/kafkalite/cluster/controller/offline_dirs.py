"""Replicas in a failed log dir, as the controller decides about them (Kafka's replicasOnOfflineDirs and
onReplicasBecomeOffline): which partitions need a new leader or a smaller ISR, as pure functions.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence

from kafkalite.cluster.controller.election import offline_partition_leader, without_replica
from kafkalite.cluster.controller.states import LeaderIsr, TopicPartition


def newly_offline(
    broker: int,
    reported: Iterable[TopicPartition],
    assignments: Mapping[TopicPartition, Sequence[int]],
    offline: Mapping[TopicPartition, Collection[int]],
) -> list[TopicPartition]:
    """The partitions of `reported` whose replica on `broker` was not known offline yet (and that
    `broker` does host); the others were handled already."""
    return sorted(
        tp
        for tp in set(reported)
        if broker in assignments.get(tp, ()) and broker not in offline.get(tp, ())
    )


def offline_replica_proposals(
    broker: int,
    tps: Iterable[TopicPartition],
    leadership: Mapping[TopicPartition, LeaderIsr],
    assignments: Mapping[TopicPartition, Sequence[int]],
    live: Collection[int],
    offline: Mapping[TopicPartition, Collection[int]],
    unclean: Callable[[str], bool],
) -> dict[TopicPartition, LeaderIsr]:
    """The replicas of `tps` on `broker` went offline (their log dir failed): a partition it led
    gets a new leader from the rest of its ISR (the ISR loses `broker`), or none when no in-sync
    replica is left (leader -1, the ISR kept as Kafka keeps it); a partition it followed in sync
    loses it from the ISR. Replicas known offline elsewhere are never elected."""
    out: dict[TopicPartition, LeaderIsr] = {}
    for tp in tps:
        st = leadership.get(tp)
        replicas = assignments.get(tp, ())
        if st is None or broker not in replicas:
            continue
        usable = {r for r in live if r != broker and r not in offline.get(tp, ())}
        if st.leader == broker:
            elected = offline_partition_leader(st, replicas, usable, unclean(tp[0]))
            out[tp] = elected if elected is not None else without_replica(st, broker)
        elif broker in st.isr:
            out[tp] = without_replica(st, broker)
    return out


def usable_replicas(
    tp: TopicPartition, live: Collection[int], offline: Mapping[TopicPartition, Collection[int]]
) -> set[int]:
    """The live brokers whose replica of `tp` can lead (not in a failed log dir)."""
    gone = offline.get(tp, ())
    return {b for b in live if b not in gone}
