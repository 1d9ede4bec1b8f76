"""Member liveness: Heartbeat and LeaveGroup, and the clock-driven timers of a group (session expiry,
the rebalance and initial-delay join deadline, members that never sync), fired from `tick`.
"""

from __future__ import annotations

from collections.abc import Sequence

from kafkalite.coordinator.group import GroupMetadata
from kafkalite.coordinator.membership import Membership
from kafkalite.coordinator.state import GroupState
from kafkalite.coordinator.types import (
    UNKNOWN_MEMBER_ID,
    LeaveGroupResult,
    LeavingMember,
    MemberLeaveResult,
)
from kafkalite.protocol.errors import ErrorCode

E = ErrorCode
S = GroupState


class Liveness(Membership):
    """Heartbeats, departures and timers."""

    # ================================================================== Heartbeat

    def heartbeat(
        self,
        group_id: str,
        member_id: str,
        generation_id: int,
        group_instance_id: str | None = None,
    ) -> ErrorCode:
        err = self._validate(group_id)
        if err is E.COORDINATOR_LOAD_IN_PROGRESS:
            return (
                E.NO_ERROR
            )  # still loading: answer blindly, the member finds out at its next join
        if err is not None:
            return err
        group = self.groups.get(group_id)
        code = self._check_member(group, member_id, group_instance_id, generation_id)
        if code is not None or group is None:
            return code or E.UNKNOWN_MEMBER_ID
        if group.is_(S.EMPTY):
            return E.UNKNOWN_MEMBER_ID
        self._schedule_heartbeat(group.get(member_id))
        if group.is_(S.PREPARING_REBALANCE):
            return E.REBALANCE_IN_PROGRESS
        return E.NO_ERROR

    # ================================================================== LeaveGroup

    def leave_group(self, group_id: str, members: Sequence[LeavingMember]) -> LeaveGroupResult:
        """LeaveGroup (batched, v3+; v0-2 send one member). Per-member errors as Kafka gives them."""
        err = self._validate(group_id)
        if err is not None:
            return LeaveGroupResult(err)
        group = self.groups.get(group_id)
        if group is None:
            return LeaveGroupResult(
                E.NO_ERROR,
                [
                    MemberLeaveResult(m.member_id, m.group_instance_id, E.UNKNOWN_MEMBER_ID)
                    for m in members
                ],
            )
        if group.is_(S.DEAD):
            return LeaveGroupResult(E.COORDINATOR_NOT_AVAILABLE)
        out: list[MemberLeaveResult] = []
        for leaving in members:
            mid, iid = leaving.member_id, leaving.group_instance_id
            why = f"member left the group ({leaving.reason or 'no reason given'})"
            if mid == UNKNOWN_MEMBER_ID and iid is not None:
                # an admin removing a static member by instance id
                current = group.static_member_id(iid)
                if current is None:
                    code = E.UNKNOWN_MEMBER_ID
                else:
                    self._remove_member_and_update_group(group, group.get(current), why)
                    code = E.NO_ERROR
            elif group.is_pending_member(mid):
                self._remove_pending_member_and_update_group(group, mid)
                code = E.NO_ERROR
            elif group.is_static_member_fenced(iid, mid):
                code = E.FENCED_INSTANCE_ID
            elif not group.has(mid):
                code = E.UNKNOWN_MEMBER_ID
            else:
                self._remove_member_and_update_group(group, group.get(mid), why)
                code = E.NO_ERROR
            out.append(MemberLeaveResult(mid, iid, code))
        return LeaveGroupResult(E.NO_ERROR, out)

    # ================================================================== timers

    def _expire_group_timers(self, group: GroupMetadata, now: int) -> None:
        for member in list(group.members.values()):
            deadline = member.heartbeat_deadline
            if (
                deadline is None
                or now < deadline
                or group.members.get(member.member_id) is not member
            ):
                continue
            if member.is_new or not (member.is_awaiting_join or member.is_awaiting_sync):
                self._remove_member_and_update_group(group, member, "session timeout expired")
            else:
                member.heartbeat_deadline = None  # rescheduled when its join/sync completes
        for pending_id, deadline in list(group.pending_members.items()):
            if now >= deadline:
                self._remove_pending_member_and_update_group(group, pending_id)
        if (
            group.is_(S.PREPARING_REBALANCE)
            and group.join_deadline is not None
            and now >= group.join_deadline
        ):
            self._join_deadline_passed(group, now)
        if group.sync_deadline is not None and now >= group.sync_deadline:
            group.sync_deadline = None
            if group.state in (S.COMPLETING_REBALANCE, S.STABLE) and group.pending_sync_members:
                late = sorted(group.pending_sync_members)
                for mid in late:
                    if group.has(mid):
                        group.remove(mid)
                self._prepare_rebalance(
                    group, f"members {late} did not sync within the rebalance timeout"
                )

    def _group_deadlines(self, group: GroupMetadata) -> list[int]:
        out = [
            m.heartbeat_deadline for m in group.members.values() if m.heartbeat_deadline is not None
        ]
        out += group.pending_members.values()
        if group.join_deadline is not None:
            out.append(group.join_deadline)
        if group.sync_deadline is not None:
            out.append(group.sync_deadline)
        return out
