"""GroupMetadata and MemberMetadata: members, static members, pending members, the protocol vote,
leader election, generations, assignments and committed offsets of one classic group.

No I/O and no clock of its own: the coordinator passes `now` in and decides when things happen.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kafkalite.coordinator.consumer_group import ConsumerGroup
from kafkalite.coordinator.deferred import Deferred
from kafkalite.coordinator.records import GroupMetadataValue
from kafkalite.coordinator.state import GroupState, can_rebalance, transition
from kafkalite.coordinator.types import (
    CONSUMER_PROTOCOL_TYPE,
    JoinGroupMember,
    JoinGroupResult,
    OffsetAndMetadata,
    SyncGroupResult,
    TopicPartition,
)
from kafkalite.protocol import primitives as p
from kafkalite.protocol.exceptions import DecodeError

Protocols = list[tuple[str, bytes]]


@dataclass(eq=False)
class MemberMetadata:
    """One member of a group, with the JoinGroup/SyncGroup it may be waiting on."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    supported_protocols: Protocols
    assignment: bytes = b""
    join_waiter: Deferred[JoinGroupResult] | None = None
    sync_waiter: Deferred[SyncGroupResult] | None = None
    is_new: bool = False
    heartbeat_deadline: int | None = None

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.join_waiter is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.sync_waiter is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.supported_protocols]

    def metadata(self, protocol: str) -> bytes:
        for name, meta in self.supported_protocols:
            if name == protocol:
                return meta
        raise KeyError(f"member {self.member_id} does not support protocol {protocol!r}")

    def matches(self, protocols: Sequence[tuple[str, bytes]]) -> bool:
        """Same protocols, same order, same metadata (a rejoin that changes nothing)."""
        return list(protocols) == self.supported_protocols

    def vote(self, candidates: set[str]) -> str:
        """This member's vote: its most preferred protocol among the candidates."""
        for name, _ in self.supported_protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def complete_sync(self, result: SyncGroupResult) -> bool:
        waiter, self.sync_waiter = self.sync_waiter, None
        if waiter is None:
            return False
        waiter.complete(result)
        return True


def subscription_topics(metadata: bytes) -> list[str]:
    """The topics of a ConsumerProtocolSubscription (any version: the topic list comes first)."""
    version, pos = p.read_int16(metadata, 0)
    if version < 0:
        raise DecodeError(f"negative subscription version {version}")
    count, pos = p.read_int32(metadata, pos)
    if count < 0 or count > len(metadata):
        raise DecodeError(f"bad topic count {count}")
    topics: list[str] = []
    for _ in range(count):
        topic, pos = p.read_string(metadata, pos)
        topics.append(topic)
    return topics


@dataclass(eq=False)
class GroupMetadata:
    """The in-memory view of one classic group; persisted fields change through `apply_metadata_value`."""

    group_id: str
    state: GroupState = GroupState.EMPTY
    state_timestamp: int | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None
    generation_id: int = 0
    leader_id: str | None = None
    members: dict[str, MemberMetadata] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    pending_members: dict[str, int] = field(default_factory=dict)  # member id -> expiry deadline
    pending_sync_members: set[str] = field(default_factory=set)
    protocol_votes: Counter[str] = field(default_factory=Counter)
    num_members_awaiting_join: int = 0
    new_member_added: bool = False
    subscribed_topics: set[str] | None = None
    offsets: dict[TopicPartition, OffsetAndMetadata] = field(default_factory=dict)
    pending_offset_commits: Counter[TopicPartition] = field(default_factory=Counter)
    # TxnOffsetCommit: offsets of open transactions, by producer id, until their marker says
    pending_txn_offsets: dict[int, dict[TopicPartition, OffsetAndMetadata]] = field(
        default_factory=dict
    )
    # a KIP-848 consumer group (its own members, epochs and assignments); None for a classic group
    consumer: ConsumerGroup | None = None
    # timers (absolute ms on the coordinator's clock)
    join_deadline: int | None = None
    initial_delay_remaining_ms: int | None = None  # set while the initial rebalance delay runs
    sync_deadline: int | None = None

    # ------------------------------------------------------------------ state

    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def transition_to(self, target: GroupState, now_ms: int) -> None:
        self.state, self.state_timestamp = transition(self.group_id, self.state, target, now_ms)

    def can_rebalance(self) -> bool:
        return can_rebalance(self.state)

    # ------------------------------------------------------------------ members

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def get(self, member_id: str) -> MemberMetadata:
        return self.members[member_id]

    def size(self) -> int:
        return len(self.members)

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def add(self, member: MemberMetadata, waiter: Deferred[JoinGroupResult] | None = None) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        for name in member.protocol_names():
            self.protocol_votes[name] += 1
        member.join_waiter = waiter
        if waiter is not None:
            self.num_members_awaiting_join += 1
        self.pending_members.pop(member.member_id, None)

    def remove(self, member_id: str) -> MemberMetadata | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            for name in member.protocol_names():
                self.protocol_votes[name] -= 1
                if self.protocol_votes[name] <= 0:
                    del self.protocol_votes[name]
            if member.is_awaiting_join:
                self.num_members_awaiting_join -= 1
            gid = member.group_instance_id
            if gid is not None and self.static_members.get(gid) == member_id:
                del self.static_members[gid]
        self.pending_sync_members.discard(member_id)
        if self.is_leader(member_id):
            # re-elect: the earliest remaining joiner leads
            self.leader_id = next(iter(self.members), None)
        return member

    def complete_join(self, member: MemberMetadata, result: JoinGroupResult) -> bool:
        """Answer a member's pending JoinGroup (keeps the awaiting-join count right)."""
        waiter, member.join_waiter = member.join_waiter, None
        if waiter is None:
            return False
        if member.member_id in self.members and self.members[member.member_id] is member:
            self.num_members_awaiting_join -= 1
        waiter.complete(result)
        return True

    def update_member(
        self,
        member: MemberMetadata,
        protocols: Protocols,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        waiter: Deferred[JoinGroupResult] | None,
    ) -> Deferred[JoinGroupResult] | None:
        """Replace a member's protocols/timeouts and join waiter; returns a superseded waiter, if any."""
        for name in member.protocol_names():
            self.protocol_votes[name] -= 1
            if self.protocol_votes[name] <= 0:
                del self.protocol_votes[name]
        for name, _ in protocols:
            self.protocol_votes[name] += 1
        member.supported_protocols = list(protocols)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        superseded = member.join_waiter
        if waiter is not None and superseded is None:
            self.num_members_awaiting_join += 1
        elif waiter is None and superseded is not None:
            self.num_members_awaiting_join -= 1
        member.join_waiter = waiter
        return superseded

    def add_pending_member(self, member_id: str, deadline: int) -> None:
        self.pending_members[member_id] = deadline

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_members

    def has_all_members_joined(self) -> bool:
        return self.num_members_awaiting_join == len(self.members) and not self.pending_members

    def not_yet_rejoined_members(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def maybe_elect_new_joined_leader(self) -> bool:
        """Make sure the leader is a member that rejoined; False if nobody rejoined."""
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.is_awaiting_join:
            return True
        for member in self.members.values():
            if member.is_awaiting_join:
                self.leader_id = member.member_id
                return True
        return False

    # ------------------------------------------------------------------ static members

    def static_member_id(self, group_instance_id: str | None) -> str | None:
        if group_instance_id is None:
            return None
        return self.static_members.get(group_instance_id)

    def is_static_member_fenced(self, group_instance_id: str | None, member_id: str) -> bool:
        """An instance id that is registered to a different member id."""
        current = self.static_member_id(group_instance_id)
        return current is not None and current != member_id

    def replace_static_member(
        self, group_instance_id: str, old_member_id: str, new_member_id: str
    ) -> MemberMetadata:
        """Move a static member to a new member id, keeping its assignment and protocols."""
        member = self.members.pop(old_member_id)
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.is_leader(old_member_id):
            self.leader_id = new_member_id
        self.static_members[group_instance_id] = new_member_id
        if old_member_id in self.pending_sync_members:
            self.pending_sync_members.discard(old_member_id)
            self.pending_sync_members.add(new_member_id)
        return member

    # ------------------------------------------------------------------ protocols

    def candidate_protocols(self) -> set[str]:
        n = len(self.members)
        return {name for name, votes in self.protocol_votes.items() if votes == n}

    def supports_protocols(self, protocol_type: str, protocols: Iterable[str]) -> bool:
        names = list(protocols)
        if self.is_(GroupState.EMPTY):
            return bool(protocol_type) and bool(names)
        n = len(self.members)
        return self.protocol_type == protocol_type and any(
            self.protocol_votes.get(x, 0) == n for x in names
        )

    def select_protocol(self) -> str:
        """The protocol of the next generation: every member votes its preferred candidate; most votes wins
        (ties go to the protocol whose first vote came earliest)."""
        if not self.members:
            raise ValueError(f"group {self.group_id}: cannot select a protocol for an empty group")
        candidates = self.candidate_protocols()
        votes: Counter[str] = Counter()
        first_vote: dict[str, int] = {}
        for i, member in enumerate(self.members.values()):
            choice = member.vote(candidates)
            votes[choice] += 1
            first_vote.setdefault(choice, i)
        return max(votes, key=lambda name: (votes[name], -first_vote[name]))

    def current_member_metadata(self) -> list[JoinGroupMember]:
        if self.protocol_name is None:
            raise ValueError(f"group {self.group_id}: no protocol selected")
        proto = self.protocol_name
        return [
            JoinGroupMember(m.member_id, m.group_instance_id, m.metadata(proto))
            for m in self.members.values()
        ]

    # ------------------------------------------------------------------ generations

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.EMPTY, now_ms)
        self.pending_sync_members.clear()

    def compute_subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to, when known (consumer protocol); None when unknown."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None:
            return None if self.members else set()
        topics: set[str] = set()
        for member in self.members.values():
            try:
                topics.update(subscription_topics(member.metadata(self.protocol_name)))
            except (DecodeError, KeyError):
                return None
        return topics

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return self.subscribed_topics is not None and topic in self.subscribed_topics

    # ------------------------------------------------------------------ persistence

    def metadata_value(self, assignment: dict[str, bytes] | None = None) -> Any:
        """The group-metadata record value of the current generation (assignments given or current)."""
        proto = self.protocol_name
        members = [
            GroupMetadataValue.MemberMetadata(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout=m.rebalance_timeout_ms,
                session_timeout=m.session_timeout_ms,
                subscription=m.metadata(proto) if proto is not None else b"",
                assignment=assignment.get(m.member_id, b"")
                if assignment is not None
                else m.assignment,
            )
            for m in self.members.values()
        ]
        return GroupMetadataValue(
            protocol_type=self.protocol_type or "",
            generation=self.generation_id,
            protocol=proto,
            leader=self.leader_id,
            current_state_timestamp=self.state_timestamp
            if self.state_timestamp is not None
            else -1,
            members=members,
        )

    def apply_metadata_value(self, value: Any, *, live: bool = False) -> None:
        """Set the persisted fields from a group-metadata record: the one path for load and live writes.

        Loading takes the record as the whole truth (members added and removed); a live write of the
        current generation only settles the assignments of the members it names.
        """
        if live:
            for m in value.members:
                member = self.members.get(m.member_id)
                if member is not None:
                    member.assignment = m.assignment
            ts = value.current_state_timestamp
            if ts >= 0 and self.state_timestamp is None:
                self.state_timestamp = ts
            return
        self.protocol_type = value.protocol_type or None
        self.generation_id = value.generation
        self.protocol_name = value.protocol
        self.leader_id = value.leader
        ts = value.current_state_timestamp
        if ts >= 0:
            self.state_timestamp = ts
        # the record is the whole truth: members of an earlier generation are rebuilt from it, so a
        # member that rejoined with other protocols or timeouts reloads as it was last written
        for member_id in list(self.members):
            self.remove(member_id)
        for mid, rec in {m.member_id: m for m in value.members}.items():
            protocols: Protocols = (
                [(value.protocol, rec.subscription)] if value.protocol is not None else []
            )
            member = MemberMetadata(
                member_id=mid,
                group_instance_id=rec.group_instance_id or None,
                client_id=rec.client_id,
                client_host=rec.client_host,
                rebalance_timeout_ms=rec.rebalance_timeout
                if rec.rebalance_timeout > 0
                else rec.session_timeout,
                session_timeout_ms=rec.session_timeout,
                protocol_type=value.protocol_type,
                supported_protocols=protocols,
            )
            self.add(member)
            member.assignment = rec.assignment
        self.leader_id = value.leader
        self.subscribed_topics = self.compute_subscribed_topics()

    def persisted_view(self) -> dict[str, Any]:
        """The part of the group that survives a restart (what a reload must reproduce)."""
        return {
            "group_id": self.group_id,
            "protocol_type": self.protocol_type,
            "generation_id": self.generation_id,
            "protocol_name": self.protocol_name,
            "leader_id": self.leader_id,
            "members": {
                m.member_id: (
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.session_timeout_ms,
                    m.metadata(self.protocol_name) if self.protocol_name else b"",
                    m.assignment,
                )
                for m in self.members.values()
            },
            "offsets": dict(self.offsets),
        }

    # ------------------------------------------------------------------ offsets

    def has_offsets(self) -> bool:
        return (
            bool(self.offsets)
            or bool(self.pending_offset_commits)
            or bool(self.pending_txn_offsets)
        )

    def has_pending_txn_offset(self, tp: TopicPartition) -> bool:
        return any(tp in pending for pending in self.pending_txn_offsets.values())

    def expired_offsets(self, now_ms: int, retention_ms: int) -> list[TopicPartition]:
        """Committed offsets past retention, by the rules of the design:
        an Empty group counts from when it became Empty; a consumer group with known subscriptions never
        expires offsets of subscribed topics; a group without a protocol (standalone commits) counts from
        each commit; any other active group keeps everything. An explicit expire timestamp wins."""
        if self.protocol_type is not None and self.is_(GroupState.EMPTY):
            subscribed: set[str] = set()
            state_ts = self.state_timestamp

            def base(om: OffsetAndMetadata) -> int:
                return state_ts if state_ts is not None else om.commit_timestamp

        elif self.protocol_type == CONSUMER_PROTOCOL_TYPE and self.subscribed_topics is not None:
            subscribed = self.subscribed_topics

            def base(om: OffsetAndMetadata) -> int:
                return om.commit_timestamp

        elif self.protocol_type is None:
            subscribed = set()

            def base(om: OffsetAndMetadata) -> int:
                return om.commit_timestamp

        else:
            return []
        expired = []
        for tp, om in self.offsets.items():
            if tp.topic in subscribed or self.pending_offset_commits.get(tp):
                continue
            if om.expire_timestamp is not None:
                if now_ms >= om.expire_timestamp:
                    expired.append(tp)
            elif now_ms - base(om) >= retention_ms:
                expired.append(tp)
        return expired
