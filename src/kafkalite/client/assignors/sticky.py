"""StickyAssignor ("sticky", eager) and CooperativeStickyAssignor ("cooperative-sticky", KIP-429).

Both balance, then keep previous ownership; they differ in where ownership travels and in cooperative revocation.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kafkalite.client.assignors._balance import balanced_sticky_assignment
from kafkalite.client.assignors.base import (
    COOPERATIVE,
    EAGER,
    AbstractPartitionAssignor,
    Assignment,
    Subscription,
    TopicPartition,
    sorted_members,
    to_assignments,
)
from kafkalite.protocol.exceptions import DecodeError
from kafkalite.protocol.schema import F, data

DEFAULT_GENERATION = -1

# Kafka's StickyAssignorUserData: no version prefix; written as v1, read newest-first (v1, then v0).
StickyAssignorUserData = data(
    "StickyAssignorUserData",
    valid="0-1",
    flexible="none",
    fields=[
        F(
            "previous_assignment",
            "[]TopicPartition",
            "0+",
            fields=[F("topic", "string", "0+"), F("partitions", "[]int32", "0+")],
        ),
        F("generation", "int32", "1+", default=DEFAULT_GENERATION, ignorable=True),
    ],
)


@dataclass
class MemberData:
    """What a member claims to own, and from which generation (-1: unknown)."""

    partitions: list[TopicPartition]
    generation: int = DEFAULT_GENERATION


def encode_sticky_user_data(partitions: Iterable[TopicPartition], generation: int) -> bytes:
    """Serialize a previous assignment as StickyAssignorUserData v1 (topics sorted)."""
    by_topic: dict[str, list[int]] = {}
    for topic, p in partitions:
        by_topic.setdefault(topic, []).append(p)
    entries = [
        StickyAssignorUserData.TopicPartition(topic=t, partitions=sorted(ps))
        for t, ps in sorted(by_topic.items())
    ]
    out: bytes = StickyAssignorUserData(previous_assignment=entries, generation=generation).encode(
        1
    )
    return out


def decode_sticky_user_data(buf: bytes | None) -> MemberData:
    """Parse StickyAssignorUserData (v1, else v0); empty or unreadable data claims nothing."""
    if not buf:
        return MemberData([])
    for version in (1, 0):
        try:
            obj: Any = StickyAssignorUserData.decode(buf, version, exact=False)
        except DecodeError:
            continue
        tps = [(e.topic, p) for e in obj.previous_assignment for p in e.partitions]
        generation = obj.generation if version >= 1 else DEFAULT_GENERATION
        return MemberData(tps, generation)
    return MemberData([])


def encode_generation(generation: int) -> bytes:
    """CooperativeStickyAssignor user data: a bare int32 generation, for leaders that read the
    generation from user data rather than from a v2+ subscription."""
    return struct.pack(">i", generation)


def decode_generation(buf: bytes | None) -> int:
    """The generation a cooperative member put in its user data: Java writes a bare int32;
    librdkafka writes StickyAssignorUserData v1 (its owned partitions travel in the subscription)."""
    if not buf:
        return DEFAULT_GENERATION
    if len(buf) == 4:
        value: int = struct.unpack(">i", buf)[0]
        return value
    return decode_sticky_user_data(buf).generation


def resolve_ownership(
    partitions_per_topic: Mapping[str, int],
    subscriptions: Mapping[str, Subscription],
    claims: Mapping[str, MemberData],
) -> tuple[dict[str, list[TopicPartition]], dict[TopicPartition, list[str]]]:
    """Decide which claims stand: per partition, the single claimant of the highest generation keeps it.

    Claims on partitions that no longer exist are dropped. A winner no longer subscribed to the
    topic keeps nothing (and does not promote an older claim); a tie at the top generation leaves
    the partition unowned. Subscribed claimants that lose become previous-owner hints.
    Returns (owned per member, hints per partition).
    """
    by_tp: dict[TopicPartition, list[tuple[int, str]]] = {}
    for member in sorted_members(subscriptions):
        md = claims.get(member)
        if md is None:
            continue
        for tp in dict.fromkeys(md.partitions):
            topic, p = tp
            if 0 <= p < partitions_per_topic.get(topic, 0):
                by_tp.setdefault(tp, []).append((md.generation, member))
    owned: dict[str, list[TopicPartition]] = {m: [] for m in subscriptions}
    hints: dict[TopicPartition, list[str]] = {}
    for tp, claimants in by_tp.items():
        top = max(g for g, _ in claimants)
        winners = [m for g, m in claimants if g == top]
        subscribed = [m for _, m in claimants if tp[0] in subscriptions[m].topics]
        if len(winners) == 1 and winners[0] in subscribed:
            owned[winners[0]].append(tp)
        losers = [m for m in subscribed if len(winners) > 1 or m != winners[0]]
        if losers:
            hints[tp] = losers
    return owned, hints


class _AbstractStickyAssignor(AbstractPartitionAssignor):
    """Shared assign(): gather member data, resolve ownership, balance stickily."""

    name = "abstract-sticky"
    supported_protocols: list[str] = [EAGER]

    def member_data(self, subscription: Subscription) -> MemberData:
        raise NotImplementedError

    def sticky_assign(
        self, partitions_per_topic: dict[str, int], subscriptions: dict[str, Subscription]
    ) -> tuple[dict[str, list[TopicPartition]], dict[str, list[TopicPartition]]]:
        """Returns (new assignment, the ownership that stood) per member."""
        claims = {m: self.member_data(s) for m, s in subscriptions.items()}
        owned, hints = resolve_ownership(partitions_per_topic, subscriptions, claims)
        topics_of = {m: frozenset(s.topics) for m, s in subscriptions.items()}
        target = balanced_sticky_assignment(
            partitions_per_topic, topics_of, sorted_members(subscriptions), owned, hints
        )
        return target, owned

    def assign(
        self, partitions_per_topic: dict[str, int], subscriptions: dict[str, Subscription]
    ) -> dict[str, Assignment]:
        return to_assignments(self.sticky_assign(partitions_per_topic, subscriptions)[0])


class StickyAssignor(_AbstractStickyAssignor):
    """Kafka's StickyAssignor for the eager protocol: balanced, and moving as few partitions as it can.

    Members revoke everything before joining (eager), so the previous assignment travels in the
    subscription user data (StickyAssignorUserData v1: partitions by topic plus generation), which
    this instance fills from what `on_assignment` last recorded.
    """

    name = "sticky"
    supported_protocols = [EAGER]

    def __init__(self) -> None:
        self.member_assignment: list[TopicPartition] | None = None
        self.generation = DEFAULT_GENERATION

    def subscription_user_data(self, topics: set[str]) -> bytes | None:
        if self.member_assignment is None:
            return None
        return encode_sticky_user_data(self.member_assignment, self.generation)

    def on_assignment(self, assignment: Assignment, generation: int) -> None:
        self.member_assignment = list(assignment.partitions)
        self.generation = generation

    def member_data(self, subscription: Subscription) -> MemberData:
        return decode_sticky_user_data(subscription.user_data)


class CooperativeStickyAssignor(_AbstractStickyAssignor):
    """Kafka's CooperativeStickyAssignor (KIP-429): sticky assignment safe for incremental rebalancing.

    Ownership comes from the subscription's owned_partitions and generation_id (older members: the
    generation in a 4-byte user data); when two members list the same partition, the claim of the
    higher generation stands. A partition that another member still owns is never handed to a new
    owner in the same rebalance: it is left out of everyone's assignment, so its owner revokes it;
    the consumer then rejoins (as Kafka's does whenever it revoked partitions) and the follow-up
    rebalance, where nobody owns it any more, assigns it.
    """

    name = "cooperative-sticky"
    supported_protocols = [COOPERATIVE, EAGER]

    def __init__(self) -> None:
        self.generation = DEFAULT_GENERATION

    def subscription_user_data(self, topics: set[str]) -> bytes | None:
        return encode_generation(self.generation)

    def on_assignment(self, assignment: Assignment, generation: int) -> None:
        self.generation = generation

    def member_data(self, subscription: Subscription) -> MemberData:
        generation = subscription.generation_id
        if generation == DEFAULT_GENERATION:
            generation = decode_generation(subscription.user_data)
        return MemberData([(t, p) for t, p in subscription.owned_partitions], generation)

    def assign(
        self, partitions_per_topic: dict[str, int], subscriptions: dict[str, Subscription]
    ) -> dict[str, Assignment]:
        target, owned = self.sticky_assign(partitions_per_topic, subscriptions)
        return to_assignments(withhold_transfers(target, subscriptions, owned))


def withhold_transfers(
    target: Mapping[str, list[TopicPartition]],
    subscriptions: Mapping[str, Subscription],
    owned: Mapping[str, list[TopicPartition]] | None = None,
) -> dict[str, list[TopicPartition]]:
    """Kafka's cooperative adjustment: leave out of each member's assignment any partition that a
    different member still lists in owned_partitions, so it is revoked before it changes hands.

    `owned` is the ownership that stood after generation checks: its holder keeps the partition even
    when an older-generation member also lists it (that claim was already superseded). Without it,
    every claim by another member withholds the partition.
    """
    claimants: dict[TopicPartition, set[str]] = {}
    for member, sub in subscriptions.items():
        for topic, p in sub.owned_partitions:
            claimants.setdefault((topic, p), set()).add(member)
    holder = {tp: m for m, tps in (owned or {}).items() for tp in tps}
    return {
        member: [
            tp
            for tp in tps
            if holder.get(tp) == member or not (claimants.get(tp, set()) - {member})
        ]
        for member, tps in target.items()
    }
