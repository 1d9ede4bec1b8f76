"""A KIP-848 consumer group as pure logic: group and member epochs, the target assignment, and each
member's reconciliation toward it, changed only by replaying the records an operation returns.

A partition moves to its new owner only once the old owner has revoked it, so no partition is ever
owned by two members. Records mirror Kafka's `__consumer_offsets` types 3, 5, 6, 7 and 8 (their byte
layout lives with the other record formats, their classes in consumer_group_types); `ConsumerGroup.replay`
is the only way state changes.
"""

from __future__ import annotations

import copy
import hashlib
import re
import uuid
from collections.abc import Callable, Mapping

from kafkalite.coordinator.consumer_assignors import (
    ASSIGNORS,
    DEFAULT_ASSIGNOR,
    AssignmentMember,
    SubscribedTopic,
)
from kafkalite.coordinator.consumer_group_types import (
    EMPTY,
    JOIN_EPOCH,
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    Assignment,
    ConsumerGroupMember,
    ConsumerGroupRecord,
    CurrentAssignmentRecord,
    GroupConfig,
    GroupEpochRecord,
    HeartbeatRequest,
    HeartbeatResult,
    MemberState,
    MemberSubscription,
    MemberSubscriptionRecord,
    TargetAssignmentEpochRecord,
    TargetAssignmentMemberRecord,
    assignment_contains,
    assignment_intersect,
    assignment_minus,
    assignment_union,
    re2_error,
)
from kafkalite.protocol.errors import ErrorCode


class ConsumerGroup:
    """One KIP-848 group. Operations return records; `replay` applies them (live and on load)."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        self.target: dict[str, Assignment] = {}
        self.metadata_hash = 0
        # the subscribed topics of the heartbeat being planned (derived, never persisted)
        self.subscribed_metadata: dict[uuid.UUID, SubscribedTopic] = {}

    # -- replay: the one way state changes ------------------------------------------------------
    def replay(self, record: ConsumerGroupRecord) -> None:
        if isinstance(record, GroupEpochRecord):
            self.group_epoch = record.epoch or 0
            self.metadata_hash = record.metadata_hash
        elif isinstance(record, MemberSubscriptionRecord):
            if record.subscription is None:
                self.members.pop(record.member_id, None)
            elif record.member_id in self.members:
                self.members[record.member_id].subscription = record.subscription
            else:
                self.members[record.member_id] = ConsumerGroupMember(
                    record.member_id, record.subscription
                )
        elif isinstance(record, TargetAssignmentEpochRecord):
            self.assignment_epoch = record.assignment_epoch or 0
        elif isinstance(record, TargetAssignmentMemberRecord):
            if record.partitions is None:
                self.target.pop(record.member_id, None)
            else:
                self.target[record.member_id] = dict(record.partitions)
        else:
            member = self.members.get(record.member_id)
            if member is None or record.tombstone:
                return
            member.member_epoch = record.member_epoch
            member.previous_member_epoch = record.previous_member_epoch
            member.state = record.state
            member.assigned = dict(record.assigned)
            member.pending_revocation = dict(record.pending_revocation)

    # -- queries --------------------------------------------------------------------------------
    @property
    def state(self) -> str:
        """Kafka's consumer-group states: Empty, Assigning, Reconciling, Stable."""
        if not self.members:
            return "Empty"
        if self.group_epoch != self.assignment_epoch:
            return "Assigning"
        if any(
            m.member_epoch != self.assignment_epoch or m.state is not MemberState.STABLE
            for m in self.members.values()
        ):
            return "Reconciling"
        return "Stable"

    def static_member(self, instance_id: str | None) -> ConsumerGroupMember | None:
        """The member holding this `group.instance.id`, if any."""
        if instance_id is None:
            return None
        for m in self.members.values():
            if m.subscription.instance_id == instance_id:
                return m
        return None

    def owners(self, exclude: str | None = None) -> dict[tuple[uuid.UUID, int], str]:
        """Who holds each partition now: assigned or still to be revoked."""
        out: dict[tuple[uuid.UUID, int], str] = {}
        for m in self.members.values():
            if m.member_id == exclude:
                continue
            for part in (m.assigned, m.pending_revocation):
                for t, ps in part.items():
                    for p in ps:
                        out[(t, p)] = m.member_id
        return out

    # -- operations ------------------------------------------------------------------------------
    def heartbeat(
        self,
        req: HeartbeatRequest,
        topics: Mapping[str, SubscribedTopic],
        config: GroupConfig,
        new_member_id: Callable[[], str],
    ) -> tuple[HeartbeatResult, list[ConsumerGroupRecord]]:
        """One ConsumerGroupHeartbeat: join (epoch 0), leave (-1/-2), or a member's heartbeat; the
        answer and the records to write. Nothing here changes: the caller replays the records once
        they are written, then calls `touch`. `topics` is the cluster's topics by name."""
        return copy.deepcopy(self)._heartbeat(req, topics, config, new_member_id)

    def touch(self, member_id: str, config: GroupConfig, now_ms: int) -> None:
        """After a heartbeat's records are replayed: the member's session and revocation clocks."""
        member = self.members.get(member_id)
        if member is None:
            return
        if member.member_epoch == STATIC_LEAVE_EPOCH:
            # a static member that left keeps the session of its last heartbeat: it is removed
            # when that ends unless a new instance took its place before
            if not member.session_deadline_ms:
                member.session_deadline_ms = now_ms + config.session_timeout_ms
            member.revocation_deadline_ms = None
            return
        member.session_deadline_ms = now_ms + config.session_timeout_ms
        member.expiring = False
        if member.state is not MemberState.UNREVOKED_PARTITIONS:
            member.revocation_deadline_ms = None
        elif member.revocation_deadline_ms is None:
            member.revocation_deadline_ms = now_ms + member.subscription.rebalance_timeout_ms

    def _heartbeat(
        self,
        req: HeartbeatRequest,
        topics: Mapping[str, SubscribedTopic],
        config: GroupConfig,
        new_member_id: Callable[[], str],
    ) -> tuple[HeartbeatResult, list[ConsumerGroupRecord]]:
        records: list[ConsumerGroupRecord] = []
        if req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(req)
        if req.server_assignor is not None and req.server_assignor not in config.assignors:
            return HeartbeatResult(
                ErrorCode.UNSUPPORTED_ASSIGNOR,
                f"ServerAssignor {req.server_assignor} is not supported. "
                f"Supported assignors: {', '.join(config.assignors)}.",
            ), []
        if req.subscribed_topic_regex is not None:
            why = re2_error(req.subscribed_topic_regex)
            if why is not None:
                return HeartbeatResult(
                    ErrorCode.INVALID_REGULAR_EXPRESSION,
                    f"SubscribedTopicRegex `{req.subscribed_topic_regex}` is not a valid regular "
                    f"expression: {why}.",
                ), []
        member = self.members.get(req.member_id) if req.member_id else None
        joining = req.member_epoch == JOIN_EPOCH
        static = self.static_member(req.instance_id)
        if req.instance_id is not None and not joining:
            refused = self._check_static(static, req)
            if refused is not None:
                return refused, []
        if joining:
            if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
                return HeartbeatResult(
                    ErrorCode.INVALID_REQUEST,
                    "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.",
                ), []
            if req.rebalance_timeout_ms < 0:
                return HeartbeatResult(
                    ErrorCode.INVALID_REQUEST,
                    "RebalanceTimeoutMs must be provided in first request.",
                ), []
            if member is None and len(self.members) >= config.max_size:
                return HeartbeatResult(
                    ErrorCode.GROUP_MAX_SIZE_REACHED,
                    f"The consumer group has reached its maximum capacity of {config.max_size} members.",
                ), []
            member_id = req.member_id or new_member_id()
            if static is not None:
                if static.member_epoch != STATIC_LEAVE_EPOCH:
                    return HeartbeatResult(
                        ErrorCode.UNRELEASED_INSTANCE_ID,
                        f"Static member {member_id} with instance id {req.instance_id} cannot "
                        f"join the group because the instance id is owned by {static.member_id} "
                        "member.",
                    ), []
                # the static member is back (Kafka's replaceStaticMember): the new member id takes
                # over its subscription and its partitions; the group epoch stays
                records += self._replace_member(static, member_id)
                member = None
            elif member is not None:
                # a member rejoining with epoch 0 (it lost its state): it starts over
                records += self._remove_member(member.member_id, bump=False)
                member = None
        else:
            if member is None:
                return HeartbeatResult(
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    f"Member {req.member_id} is not a member of group {self.group_id}.",
                ), []
            member_id = member.member_id
            # the answer that bumped the epoch may have been lost: the previous epoch is accepted
            # while the member says what it owns (a full heartbeat; Kafka fences a partial one)
            # and owns nothing it should not
            if req.member_epoch != member.member_epoch and not (
                req.member_epoch == member.previous_member_epoch
                and req.owned is not None
                and assignment_contains(member.assigned, req.owned)
            ):
                return HeartbeatResult(
                    ErrorCode.FENCED_MEMBER_EPOCH,
                    f"The consumer group member's epoch ({req.member_epoch}) is not the one "
                    f"known by the group coordinator ({member.member_epoch}). "
                    "The member must abandon all its partitions and rejoin.",
                ), []
        old = self.members.get(member_id)
        sub = self._subscription(old, req)
        records_epoch_bump = False
        if old is None or old.subscription != sub:
            records.append(MemberSubscriptionRecord(self.group_id, member_id, sub))
            if old is None or _assignment_inputs(old.subscription) != _assignment_inputs(sub):
                records_epoch_bump = True
        # what the member will subscribe to, resolved against the cluster's topics
        subscribed = self._resolve_topics(self._future_subscriptions(member_id, sub), topics)
        self.subscribed_metadata = subscribed
        metadata_hash = _metadata_hash(subscribed)
        if metadata_hash != self.metadata_hash:
            records_epoch_bump = True
        if records_epoch_bump:
            records.append(GroupEpochRecord(self.group_id, self.group_epoch + 1, metadata_hash))
        for r in records:
            self.replay(r)
        if self.group_epoch > self.assignment_epoch:
            target_records = self._compute_target(config)
            for r in target_records:
                self.replay(r)
            records += target_records
        member = self.members[member_id]
        before = (member.member_epoch, member.assigned)
        # a (re)joining member owns nothing yet, whatever the request says
        rec = self._reconcile(member, (req.owned or EMPTY) if joining else req.owned)
        if rec is not None:
            self.replay(rec)
            records.append(rec)
        # the assignment goes with every answer that moves the member to another epoch than the
        # one it sent: a client answered at an epoch without its assignment would keep the old one
        changed = (
            joining
            or (member.member_epoch, member.assigned) != before
            or req.owned is not None
            or member.member_epoch != req.member_epoch
        )
        return HeartbeatResult(
            ErrorCode.NO_ERROR,
            member_id=member_id,
            member_epoch=member.member_epoch,
            assignment=dict(member.assigned) if changed else None,
        ), records

    def expired_members(self, now_ms: int) -> list[str]:
        """Members past their session timeout, or still holding partitions to revoke past their
        rebalance timeout."""
        return [
            m.member_id for m in self.members.values() if not m.expiring and m.is_expired(now_ms)
        ]

    def remove_members(self, member_ids: list[str]) -> list[ConsumerGroupRecord]:
        """The records removing these members (expired, or the group is being deleted); their
        partitions go to the others at the next heartbeats."""
        scratch = copy.deepcopy(self)
        records: list[ConsumerGroupRecord] = []
        for mid in member_ids:
            if mid in scratch.members:
                records += scratch._remove_member(mid)
        return records

    # -- internals ----------------------------------------------------------------------------------
    def _check_static(
        self, static: ConsumerGroupMember | None, req: HeartbeatRequest
    ) -> HeartbeatResult | None:
        """Kafka's checks of a static member's heartbeat or leave: its instance id must be known
        and still its own."""
        if static is None:
            return HeartbeatResult(
                ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown."
            )
        if static.member_id != req.member_id:
            return HeartbeatResult(
                ErrorCode.FENCED_INSTANCE_ID,
                f"Static member {req.member_id} with instance id {req.instance_id} was fenced by "
                f"member {static.member_id}.",
            )
        return None

    def _leave(self, req: HeartbeatRequest) -> tuple[HeartbeatResult, list[ConsumerGroupRecord]]:
        """A leave: -1 removes the member and rebalances; a static member's -2 keeps it, with its
        partitions, under member epoch -2 until it returns or its session ends."""
        if req.instance_id is None:
            member = self.members.get(req.member_id)
            if member is None:
                return HeartbeatResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=req.member_id), []
        else:
            member = self.static_member(req.instance_id)
            refused = self._check_static(member, req)
            if refused is not None:
                return refused, []
            assert member is not None
        if req.instance_id is not None and req.member_epoch == STATIC_LEAVE_EPOCH:
            record = CurrentAssignmentRecord(
                self.group_id,
                member.member_id,
                STATIC_LEAVE_EPOCH,
                member.previous_member_epoch,
                member.state,
                dict(member.assigned),
                EMPTY,
            )
            self.replay(record)
            return HeartbeatResult(
                ErrorCode.NO_ERROR, member_id=member.member_id, member_epoch=STATIC_LEAVE_EPOCH
            ), [record]
        records = self._remove_member(member.member_id)
        return HeartbeatResult(
            ErrorCode.NO_ERROR, member_id=req.member_id, member_epoch=req.member_epoch
        ), records

    def _replace_member(
        self, old: ConsumerGroupMember, member_id: str
    ) -> list[ConsumerGroupRecord]:
        """A static member's new instance takes the old one's place: the old member's records are
        tombstoned and the new one starts from its subscription, target and partitions (epoch 0)."""
        target = self.target.get(old.member_id)
        removed = self._remove_member(old.member_id, bump=False)
        records: list[ConsumerGroupRecord] = [
            MemberSubscriptionRecord(self.group_id, member_id, old.subscription)
        ]
        if target is not None:
            records.append(TargetAssignmentMemberRecord(self.group_id, member_id, target))
        records.append(
            CurrentAssignmentRecord(
                self.group_id,
                member_id,
                JOIN_EPOCH,
                JOIN_EPOCH,
                old.state,
                dict(old.assigned),
                dict(old.pending_revocation),
            )
        )
        for r in records:
            self.replay(r)
        return removed + records

    def _subscription(
        self, old: ConsumerGroupMember | None, req: HeartbeatRequest
    ) -> MemberSubscription:
        prev = old.subscription if old is not None else None
        return MemberSubscription(
            instance_id=req.instance_id
            if req.instance_id is not None
            else (prev.instance_id if prev else None),
            rack_id=req.rack_id if req.rack_id is not None else (prev.rack_id if prev else None),
            client_id=req.client_id or (prev.client_id if prev else ""),
            client_host=req.client_host or (prev.client_host if prev else ""),
            subscribed_topic_names=(
                tuple(sorted(set(req.subscribed_topic_names)))
                if req.subscribed_topic_names is not None
                else (prev.subscribed_topic_names if prev else ())
            ),
            subscribed_topic_regex=(
                (req.subscribed_topic_regex or None)
                if req.subscribed_topic_regex is not None
                else (prev.subscribed_topic_regex if prev else None)
            ),
            rebalance_timeout_ms=(
                req.rebalance_timeout_ms
                if req.rebalance_timeout_ms >= 0
                else (prev.rebalance_timeout_ms if prev else 300000)
            ),
            server_assignor=(
                (req.server_assignor or None)
                if req.server_assignor is not None
                else (prev.server_assignor if prev else None)
            ),
        )

    def _future_subscriptions(
        self, member_id: str, sub: MemberSubscription
    ) -> list[MemberSubscription]:
        return [m.subscription for mid, m in self.members.items() if mid != member_id] + [sub]

    @staticmethod
    def _resolve_topics(
        subs: list[MemberSubscription], topics: Mapping[str, SubscribedTopic]
    ) -> dict[uuid.UUID, SubscribedTopic]:
        out: dict[uuid.UUID, SubscribedTopic] = {}
        for sub in subs:
            for name in sub.subscribed_topic_names:
                t = topics.get(name)
                if t is not None:
                    out[t.topic_id] = t
            if sub.subscribed_topic_regex:
                pattern = re.compile(sub.subscribed_topic_regex)
                for name, t in topics.items():
                    if pattern.fullmatch(name) and not name.startswith("__"):
                        out[t.topic_id] = t
        return out

    def _member_topic_ids(self, sub: MemberSubscription) -> frozenset[uuid.UUID]:
        ids = set()
        by_name = {t.name: tid for tid, t in self.subscribed_metadata.items()}
        for name in sub.subscribed_topic_names:
            if name in by_name:
                ids.add(by_name[name])
        if sub.subscribed_topic_regex:
            pattern = re.compile(sub.subscribed_topic_regex)
            ids.update(tid for name, tid in by_name.items() if pattern.fullmatch(name))
        return frozenset(ids)

    def assignor(self, config: GroupConfig) -> str:
        """The server assignor the members ask for most, else the first configured one."""
        wanted = [
            m.subscription.server_assignor
            for m in self.members.values()
            if m.subscription.server_assignor
        ]
        if wanted:
            return max(set(wanted), key=wanted.count)
        return config.assignors[0] if config.assignors else DEFAULT_ASSIGNOR

    def _compute_target(self, config: GroupConfig) -> list[ConsumerGroupRecord]:
        """A new target assignment for the group epoch (the assignor the members prefer most)."""
        assign = ASSIGNORS.get(self.assignor(config), ASSIGNORS[DEFAULT_ASSIGNOR])
        members = [
            AssignmentMember(
                mid, self._member_topic_ids(m.subscription), self.target.get(mid, EMPTY)
            )
            for mid, m in sorted(self.members.items())
        ]
        target = assign(members, self.subscribed_metadata)
        records: list[ConsumerGroupRecord] = []
        for mid in sorted(target):
            if target[mid] != self.target.get(mid):
                records.append(TargetAssignmentMemberRecord(self.group_id, mid, target[mid]))
        records.append(TargetAssignmentEpochRecord(self.group_id, self.group_epoch))
        return records

    def _reconcile(
        self, member: ConsumerGroupMember, reported: Assignment | None
    ) -> CurrentAssignmentRecord | None:
        """The member's next step toward the target (Kafka's current-assignment builder): revoke
        first, then take the target's partitions that nobody else holds any more."""
        target = self.target.get(member.member_id, EMPTY)
        epoch = self.assignment_epoch
        assigned, pending = member.assigned, member.pending_revocation
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            # the member has revoked once its reported partitions hold none of the pending ones
            if reported is None or assignment_intersect(reported, pending):
                return None
            pending = EMPTY
        elif member.member_epoch == epoch and member.state is MemberState.STABLE:
            return None
        keep = assignment_intersect(assigned, target)
        revoke = assignment_minus(assigned, target)
        if revoke:
            return CurrentAssignmentRecord(
                self.group_id,
                member.member_id,
                member.member_epoch,
                member.previous_member_epoch,
                MemberState.UNREVOKED_PARTITIONS,
                keep,
                assignment_union(pending, revoke),
            )
        others = self.owners(exclude=member.member_id)
        wanted = assignment_minus(target, keep)
        free = {t: frozenset(p for p in ps if (t, p) not in others) for t, ps in wanted.items()}
        free = {t: ps for t, ps in free.items() if ps}
        new_assigned = assignment_union(keep, free)
        state = (
            MemberState.STABLE
            if assignment_contains(new_assigned, target)
            else MemberState.UNRELEASED_PARTITIONS
        )
        new_prev = (
            member.member_epoch if member.member_epoch != epoch else member.previous_member_epoch
        )
        if (
            new_assigned == member.assigned
            and state is member.state
            and member.member_epoch == epoch
            and not member.pending_revocation
        ):
            return None
        return CurrentAssignmentRecord(
            self.group_id, member.member_id, epoch, new_prev, state, new_assigned, EMPTY
        )

    def _remove_member(self, member_id: str, bump: bool = True) -> list[ConsumerGroupRecord]:
        records: list[ConsumerGroupRecord] = [
            CurrentAssignmentRecord(self.group_id, member_id, tombstone=True),
            TargetAssignmentMemberRecord(self.group_id, member_id, None),
            MemberSubscriptionRecord(self.group_id, member_id, None),
        ]
        if bump:
            records.append(
                GroupEpochRecord(self.group_id, self.group_epoch + 1, self.metadata_hash)
            )
        for r in records:
            self.replay(r)
        return records


def _metadata_hash(topics: Mapping[uuid.UUID, SubscribedTopic]) -> int:
    """A stable hash of the subscribed topics' ids, names and partition counts."""
    text = ";".join(
        f"{t.topic_id}:{t.name}:{t.partitions}"
        for _, t in sorted(topics.items(), key=lambda kv: str(kv[0]))
    )
    return int.from_bytes(
        hashlib.blake2b(text.encode(), digest_size=8).digest(), "big", signed=True
    )


def _assignment_inputs(sub: MemberSubscription) -> tuple[object, ...]:
    """What in a subscription changes the target assignment."""
    return (
        sub.subscribed_topic_names,
        sub.subscribed_topic_regex,
        sub.server_assignor,
        sub.rack_id,
    )


__all__ = [
    "ConsumerGroup",
    "ConsumerGroupMember",
    "GroupConfig",
    "HeartbeatRequest",
    "HeartbeatResult",
    "MemberState",
]
