"""The balancing core of the sticky assignors: keep what members validly own, then move only what balance needs.

Balanced means no chain of single-partition moves can take a partition from a member to one holding two fewer.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Iterable, Mapping, Sequence

from kafkalite.client.assignors.base import TopicPartition


class _State:
    """Who holds what during one assignment run, plus the preferences used to pick partitions to move."""

    def __init__(
        self,
        partitions_per_topic: Mapping[str, int],
        topics_of: Mapping[str, frozenset[str]],
        order: Sequence[str],
        previous_owners: Mapping[TopicPartition, Collection[str]],
    ) -> None:
        self.topics_of = topics_of
        self.order = list(order)
        self.rank = {m: i for i, m in enumerate(self.order)}
        self.previous_owners = previous_owners
        # topic -> subscribed members in tie-break order (only topics that exist)
        self.subscribers: dict[str, list[str]] = {}
        for m in self.order:
            for topic in sorted(topics_of[m]):
                if partitions_per_topic.get(topic, 0) > 0:
                    self.subscribers.setdefault(topic, []).append(m)
        self.holdings: dict[str, dict[str, set[int]]] = {m: {} for m in self.order}
        self.load: dict[str, int] = dict.fromkeys(self.order, 0)
        self.owner: dict[TopicPartition, str] = {}
        self.origin: dict[TopicPartition, str] = {}  # who validly owned it before this run

    def give(self, tp: TopicPartition, member: str) -> None:
        self.owner[tp] = member
        self.holdings[member].setdefault(tp[0], set()).add(tp[1])
        self.load[member] += 1

    def take(self, tp: TopicPartition) -> None:
        member = self.owner.pop(tp)
        parts = self.holdings[member][tp[0]]
        parts.discard(tp[1])
        if not parts:
            del self.holdings[member][tp[0]]
        self.load[member] -= 1

    def move_cost(self, tp: TopicPartition, src: str, dst: str) -> tuple[int, int, TopicPartition]:
        """Order candidates for a move src -> dst: breaking stickiness costs 1, restoring it gains 1."""
        origin = self.origin.get(tp)
        cost = 1 if origin == src else (-1 if origin == dst else 0)
        was_there = dst in self.previous_owners.get(tp, ())
        return (cost, 0 if was_there else 1, tp)

    def move_one(self, src: str, dst: str) -> None:
        """Move the cheapest partition src holds that dst may take."""
        candidates = [
            (topic, p)
            for topic, parts in self.holdings[src].items()
            if topic in self.topics_of[dst]
            for p in parts
        ]
        tp = min(candidates, key=lambda c: self.move_cost(c, src, dst))
        self.take(tp)
        self.give(tp, dst)

    def find_path(self, src: str) -> list[str] | None:
        """Shortest chain src -> ... -> dst to the least-loaded reachable member, if it has <= load-2."""
        parent: dict[str, str | None] = {src: None}
        dist = {src: 0}
        queue = deque([src])
        while queue:
            x = queue.popleft()
            for topic in sorted(self.holdings[x]):
                for y in self.subscribers[topic]:
                    if y not in parent:
                        parent[y] = x
                        dist[y] = dist[x] + 1
                        queue.append(y)
        reached = [m for m in parent if m != src]
        if not reached:
            return None
        dst = min(reached, key=lambda m: (self.load[m], dist[m], self.rank[m]))
        if self.load[dst] > self.load[src] - 2:
            return None
        path = [dst]
        step = parent[dst]
        while step is not None:
            path.append(step)
            step = parent[step]
        path.reverse()
        return path

    def shift(self, path: list[str]) -> None:
        # walk from the far end so every member gives away one of the partitions it held when the
        # path was found (never the one it is about to receive)
        for i in range(len(path) - 1, 0, -1):
            self.move_one(path[i - 1], path[i])


def balanced_sticky_assignment(
    partitions_per_topic: Mapping[str, int],
    topics_of: Mapping[str, frozenset[str]],
    order: Sequence[str],
    owned: Mapping[str, Iterable[TopicPartition]],
    previous_owners: Mapping[TopicPartition, Collection[str]] | None = None,
) -> dict[str, list[TopicPartition]]:
    """Assign every partition of every subscribed topic to exactly one subscribed member.

    `owned` holds each member's validated current partitions (a partition claimed by several members
    must appear at most once; invalid claims are ignored). `order` fixes every tie-break, so the
    result depends only on the inputs. `previous_owners` are weaker hints (older generations) used to
    choose between otherwise equal members.

    Result: balanced in the strong sense (no chain of moves from a member to one with two fewer
    partitions exists, which for identical subscriptions means max - min <= 1, and in general
    minimises the largest load and every convex spread measure), keeping owned partitions wherever
    balance allows and moving partitions that were not owned before moving owned ones.
    """
    state = _State(partitions_per_topic, topics_of, order, previous_owners or {})
    for member in state.order:
        for tp in owned.get(member, ()):
            topic, p = tp
            n = partitions_per_topic.get(topic, 0)
            if topic in topics_of[member] and 0 <= p < n and tp not in state.owner:
                state.origin[tp] = member
                state.give(tp, member)

    # 1. hand out the partitions nobody keeps: scarcest topics first, each to the least loaded
    #    subscriber (a previous owner wins a tie)
    unassigned = [
        (topic, p)
        for topic in state.subscribers
        for p in range(partitions_per_topic[topic])
        if (topic, p) not in state.owner
    ]
    unassigned.sort(key=lambda tp: (len(state.subscribers[tp[0]]), tp))
    for tp in unassigned:
        hints = state.previous_owners.get(tp, ())
        best = min(
            state.subscribers[tp[0]],
            key=lambda m: (state.load[m], 0 if m in hints else 1, state.rank[m]),
        )
        state.give(tp, best)

    # 2. shift partitions along chains from heavy to light members until no chain helps; each shift
    #    lowers the sum of squared loads by at least 2, so this terminates
    eligible = [m for m in state.order if any(t in state.subscribers for t in topics_of[m])]
    while eligible:
        floor = min(state.load[m] for m in eligible)
        path = None
        for src in sorted(eligible, key=lambda m: (-state.load[m], state.rank[m])):
            if state.load[src] - 2 < floor:
                break
            path = state.find_path(src)
            if path is not None:
                break
        if path is None:
            break
        state.shift(path)

    return {
        m: sorted((topic, p) for topic, parts in state.holdings[m].items() for p in parts)
        for m in state.order
    }
