"""KIP-848's server-side assignors, `uniform` (balanced and sticky) and `range` (contiguous ranges per
topic): pure functions from subscriptions, topic metadata and the previous target to the next target.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass

# an assignment: topic id -> partitions
Assignment = Mapping[uuid.UUID, frozenset[int]]


@dataclass(frozen=True, slots=True)
class SubscribedTopic:
    """A topic the group subscribes to, as the assignor sees it."""

    topic_id: uuid.UUID
    name: str
    partitions: int


@dataclass(frozen=True, slots=True)
class AssignmentMember:
    """What an assignor knows of a member: its subscribed topic ids and its previous target."""

    member_id: str
    subscribed: frozenset[uuid.UUID]
    previous: Assignment


def _freeze(
    parts: dict[str, dict[uuid.UUID, set[int]]],
) -> dict[str, dict[uuid.UUID, frozenset[int]]]:
    return {m: {t: frozenset(ps) for t, ps in topics.items() if ps} for m, topics in parts.items()}


def uniform_assign(
    members: list[AssignmentMember], topics: Mapping[uuid.UUID, SubscribedTopic]
) -> dict[str, dict[uuid.UUID, frozenset[int]]]:
    """Every partition of a subscribed topic to one member subscribed to it, the members' counts as
    even as their subscriptions allow, and partitions kept where they were when that stays balanced."""
    by_id = {m.member_id: m for m in members}
    owner: dict[tuple[uuid.UUID, int], str] = {}
    counts = {m.member_id: 0 for m in members}
    # sticky start: a partition stays with its previous owner if that member still subscribes
    for m in sorted(members, key=lambda m: m.member_id):
        for tid, parts in m.previous.items():
            topic = topics.get(tid)
            if topic is None or tid not in m.subscribed:
                continue
            for p in sorted(parts):
                if p < topic.partitions and (tid, p) not in owner:
                    owner[(tid, p)] = m.member_id
                    counts[m.member_id] += 1
    eligible: dict[uuid.UUID, list[str]] = {
        tid: sorted(m.member_id for m in members if tid in m.subscribed) for tid in topics
    }
    for tid in sorted(topics, key=lambda t: topics[t].name):
        if not eligible[tid]:
            continue
        for p in range(topics[tid].partitions):
            if (tid, p) in owner:
                continue
            best = min(eligible[tid], key=lambda mid: (counts[mid], mid))
            owner[(tid, p)] = best
            counts[best] += 1
    # balance: move a partition from a member with more than one over another eligible member
    moved = True
    while moved:
        moved = False
        for (tid, p), mid in sorted(owner.items(), key=lambda kv: (str(kv[0][0]), -kv[0][1])):
            target = min(eligible[tid], key=lambda other: (counts[other], other))
            if counts[target] < counts[mid] - 1:
                owner[(tid, p)] = target
                counts[mid] -= 1
                counts[target] += 1
                moved = True
    out: dict[str, dict[uuid.UUID, set[int]]] = {mid: {} for mid in by_id}
    for (tid, p), mid in owner.items():
        out[mid].setdefault(tid, set()).add(p)
    return _freeze(out)


def range_assign(
    members: list[AssignmentMember], topics: Mapping[uuid.UUID, SubscribedTopic]
) -> dict[str, dict[uuid.UUID, frozenset[int]]]:
    """Per topic, its subscribers in member-id order take contiguous ranges of partitions; the
    first (partitions mod subscribers) take one more (co-partitioned topics line up)."""
    out: dict[str, dict[uuid.UUID, set[int]]] = {m.member_id: {} for m in members}
    for tid, topic in topics.items():
        subscribers = sorted(m.member_id for m in members if tid in m.subscribed)
        if not subscribers:
            continue
        per, extra = divmod(topic.partitions, len(subscribers))
        start = 0
        for i, mid in enumerate(subscribers):
            n = per + (1 if i < extra else 0)
            if n:
                out[mid][tid] = set(range(start, start + n))
            start += n
    return _freeze(out)


ASSIGNORS = {"uniform": uniform_assign, "range": range_assign}
DEFAULT_ASSIGNOR = "uniform"  # the first of Kafka's group.consumer.assignors default
