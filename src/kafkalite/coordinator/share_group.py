"""KIP-932 share groups, the membership half: members, the group epoch and the simple assignor that
lets several members share one partition; a pure model driven by heartbeats and the clock.

Share-group membership is kept in the coordinator's memory (the share-partition state, what matters
for delivery, is persisted by the share coordinator); a coordinator move makes members rejoin.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kafkalite.coordinator.consumer_assignors import SubscribedTopic
from kafkalite.protocol.errors import ErrorCode

Assignment = dict[uuid.UUID, frozenset[int]]

EMPTY = "Empty"
STABLE = "Stable"
DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class ShareGroupConfig:
    session_timeout_ms: int = 45000  # share.session.timeout.ms / group.share.session.timeout.ms
    heartbeat_interval_ms: int = 5000  # share.heartbeat.interval.ms
    max_size: int = 200  # group.share.max.size


@dataclass(slots=True)
class ShareMember:
    member_id: str
    member_epoch: int
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    deadline_ms: int
    assignment: Assignment = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ShareHeartbeat:
    member_id: str
    member_epoch: int
    rack_id: str | None
    subscribed_topic_names: tuple[str, ...] | None
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True)
class ShareHeartbeatResult:
    error: ErrorCode
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    assignment: Assignment | None = None


def simple_assign(
    members: Mapping[str, tuple[str, ...]], topics: Mapping[str, SubscribedTopic]
) -> dict[str, Assignment]:
    """Kafka's simple share assignor, as a function: every partition of a subscribed topic goes to the
    members subscribed to it, round-robin; with more members than partitions, partitions are shared
    so every member gets one (a queue: many readers per partition)."""
    out: dict[str, Assignment] = {m: {} for m in members}
    for name in sorted({t for subs in members.values() for t in subs}):
        topic = topics.get(name)
        if topic is None or topic.partitions <= 0:
            continue
        readers = sorted(m for m, subs in members.items() if name in subs)
        if not readers:
            continue
        n, p = len(readers), topic.partitions
        for i in range(max(n, p)):
            member = readers[i % n]
            part = i % p
            out[member][topic.topic_id] = out[member].get(topic.topic_id, frozenset()) | {part}
    return out


class ShareGroup:
    """One share group's membership; `heartbeat` and `expire` change it and say what to answer."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ShareMember] = {}
        self.metadata: tuple[tuple[str, str, int], ...] = ()
        self.topics: Mapping[str, SubscribedTopic] = {}  # as the last heartbeat saw them
        # topics whose share-partitions may hold state (subscribed once, or offsets altered), by name:
        # what DescribeShareGroupOffsets lists when asked for every topic
        self.state_topics: dict[str, uuid.UUID] = {}

    @property
    def state(self) -> str:
        return STABLE if self.members else EMPTY

    def subscribed_topics(self) -> set[str]:
        return {t for m in self.members.values() for t in m.subscribed_topic_names}

    def _metadata_of(
        self, topics: Mapping[str, SubscribedTopic]
    ) -> tuple[tuple[str, str, int], ...]:
        return tuple(
            (name, str(topics[name].topic_id), topics[name].partitions)
            for name in sorted(self.subscribed_topics())
            if name in topics
        )

    def _reassign(self, topics: Mapping[str, SubscribedTopic]) -> None:
        self.topics = topics
        self.group_epoch += 1
        self.metadata = self._metadata_of(topics)
        for name, topic_id, _ in self.metadata:
            self.state_topics[name] = uuid.UUID(topic_id)
        plan = simple_assign(
            {m.member_id: m.subscribed_topic_names for m in self.members.values()}, topics
        )
        for m in self.members.values():
            m.assignment = plan.get(m.member_id, {})
        self.assignment_epoch = self.group_epoch

    def heartbeat(
        self,
        hb: ShareHeartbeat,
        topics: Mapping[str, SubscribedTopic],
        config: ShareGroupConfig,
        now_ms: int,
        new_member_id: str,
    ) -> ShareHeartbeatResult:
        """Join (epoch 0), heartbeat (the member's epoch) or leave (-1)."""
        E = ErrorCode
        if hb.member_epoch == -1:
            member = self.members.pop(hb.member_id, None)
            if member is None:
                return ShareHeartbeatResult(E.UNKNOWN_MEMBER_ID, f"member {hb.member_id} unknown")
            self._reassign(topics)
            return ShareHeartbeatResult(E.NO_ERROR, None, hb.member_id, -1)
        member = self.members.get(hb.member_id) if hb.member_id else None
        changed = False
        if hb.member_epoch == 0:
            if member is None:
                if len(self.members) >= config.max_size:
                    return ShareHeartbeatResult(
                        E.GROUP_MAX_SIZE_REACHED,
                        f"share group {self.group_id} has reached its maximum size",
                    )
                member_id = hb.member_id or new_member_id
                member = ShareMember(
                    member_id=member_id,
                    member_epoch=0,
                    rack_id=hb.rack_id,
                    client_id=hb.client_id,
                    client_host=hb.client_host,
                    subscribed_topic_names=tuple(sorted(set(hb.subscribed_topic_names or ()))),
                    deadline_ms=0,
                )
                self.members[member_id] = member
                changed = True
            else:  # a rejoin with the same id: the member lost its state
                names = tuple(sorted(set(hb.subscribed_topic_names or ())))
                changed = names != member.subscribed_topic_names
                member.subscribed_topic_names = names
        else:
            if member is None:
                return ShareHeartbeatResult(
                    E.UNKNOWN_MEMBER_ID, f"member {hb.member_id} is not in group {self.group_id}"
                )
            if hb.member_epoch != member.member_epoch:
                return ShareHeartbeatResult(
                    E.FENCED_MEMBER_EPOCH,
                    f"member epoch {hb.member_epoch} does not match the current "
                    f"{member.member_epoch}",
                )
            if hb.subscribed_topic_names is not None:
                names = tuple(sorted(set(hb.subscribed_topic_names)))
                if names != member.subscribed_topic_names:
                    member.subscribed_topic_names = names
                    changed = True
        if hb.rack_id is not None:
            member.rack_id = hb.rack_id
        member.deadline_ms = now_ms + config.session_timeout_ms
        if changed or self._metadata_of(topics) != self.metadata:
            self._reassign(topics)
        send = hb.member_epoch != self.group_epoch or hb.subscribed_topic_names is not None
        member.member_epoch = self.group_epoch
        return ShareHeartbeatResult(
            E.NO_ERROR,
            None,
            member.member_id,
            member.member_epoch,
            dict(member.assignment) if send else None,
        )

    def expire(self, now_ms: int) -> list[str]:
        """Members whose session timed out leave the group; their ids."""
        gone = [m.member_id for m in self.members.values() if m.deadline_ms <= now_ms]
        for member_id in gone:
            del self.members[member_id]
        if gone:
            self._reassign(self.topics)
        return gone

    def next_deadline(self) -> int | None:
        return min((m.deadline_ms for m in self.members.values()), default=None)

    def member_ids(self) -> Sequence[str]:
        return sorted(self.members)


__all__ = [
    "DEAD",
    "EMPTY",
    "STABLE",
    "Assignment",
    "ShareGroup",
    "ShareGroupConfig",
    "ShareHeartbeat",
    "ShareHeartbeatResult",
    "ShareMember",
    "simple_assign",
]
