"""Group membership: JoinGroup and SyncGroup and the rebalance they drive (member add/update, static
members, the initial delay, completing a generation, propagating the leader's assignment)."""

from __future__ import annotations

from collections.abc import Sequence

from kafkalite.coordinator import records as rec
from kafkalite.coordinator.deferred import Deferred
from kafkalite.coordinator.group import GroupMetadata, MemberMetadata, Protocols
from kafkalite.coordinator.runtime import CoordinatorRuntime, group_store_error, log
from kafkalite.coordinator.state import GroupState
from kafkalite.coordinator.types import (
    UNKNOWN_MEMBER_ID,
    JoinGroupResult,
    SyncGroupResult,
)
from kafkalite.protocol.errors import ErrorCode

E = ErrorCode
S = GroupState


class Membership(CoordinatorRuntime):
    """The rebalance protocol of classic groups."""

    # ================================================================== JoinGroup

    def join_group(
        self,
        group_id: str,
        member_id: str,
        protocol_type: str,
        protocols: Sequence[tuple[str, bytes]],
        *,
        session_timeout_ms: int,
        rebalance_timeout_ms: int = -1,
        group_instance_id: str | None = None,
        client_id: str = "",
        client_host: str = "",
        require_known_member_id: bool = False,
        supports_skip_assignment: bool = False,
        reason: str | None = None,
    ) -> Deferred[JoinGroupResult]:
        """JoinGroup. The deferred completes when the rebalance does (or at once on an error).

        `require_known_member_id` is true from JoinGroup v4 (KIP-394); `rebalance_timeout_ms` -1
        (JoinGroup v0) means the session timeout; `supports_skip_assignment` is JoinGroup v9 (KIP-814).
        """
        d: Deferred[JoinGroupResult] = Deferred()
        if rebalance_timeout_ms < 0:
            rebalance_timeout_ms = session_timeout_ms
        plist: Protocols = [(name, bytes(meta)) for name, meta in protocols]

        def fail(code: ErrorCode, mid: str = member_id) -> Deferred[JoinGroupResult]:
            d.complete(JoinGroupResult(code, member_id=mid))
            return d

        err = self._validate(group_id)
        if err is not None:
            return fail(err)
        cfg = self.config
        if (
            not cfg.group_min_session_timeout_ms
            <= session_timeout_ms
            <= cfg.group_max_session_timeout_ms
        ):
            return fail(E.INVALID_SESSION_TIMEOUT)
        group = self.groups.get(group_id)
        if group is None:
            if member_id != UNKNOWN_MEMBER_ID:
                return fail(E.UNKNOWN_MEMBER_ID)
            group = self.groups[group_id] = GroupMetadata(group_id)

        if group.is_(S.DEAD):
            # removed under us (deleted or migrated): let the client find the coordinator again
            return fail(E.COORDINATOR_NOT_AVAILABLE)
        if group.consumer is not None:
            if group.consumer.members:
                # online migration of a live group (group.consumer.migration.policy) is not built
                return fail(E.INCONSISTENT_GROUP_PROTOCOL)
            self._downgrade_empty_consumer_group(group)
        if not group.supports_protocols(protocol_type, [n for n, _ in plist]):
            return fail(E.INCONSISTENT_GROUP_PROTOCOL)
        if not self._accept_joining_member(group, member_id):
            if group.has(member_id):
                self._remove_member_and_update_group(group, group.get(member_id), "group is full")
            return fail(E.GROUP_MAX_SIZE_REACHED, UNKNOWN_MEMBER_ID)

        if member_id == UNKNOWN_MEMBER_ID:
            new_id = self._new_member_id(client_id)
            if group_instance_id is not None:
                old_id = group.static_member_id(group_instance_id)
                if old_id is None:
                    self._add_member_and_rebalance(
                        group, new_id, group_instance_id, client_id, client_host,
                        rebalance_timeout_ms, session_timeout_ms, protocol_type, plist, d,
                    )  # fmt: skip
                else:
                    self._update_static_member_and_rebalance(
                        group, old_id, new_id, group_instance_id, plist,
                        rebalance_timeout_ms, session_timeout_ms, supports_skip_assignment, d,
                    )  # fmt: skip
            elif require_known_member_id:
                # KIP-394: hand out the id first; the member joins for real with it
                group.add_pending_member(new_id, self.now() + session_timeout_ms)
                d.complete(JoinGroupResult(E.MEMBER_ID_REQUIRED, member_id=new_id))
            else:
                self._add_member_and_rebalance(
                    group, new_id, None, client_id, client_host,
                    rebalance_timeout_ms, session_timeout_ms, protocol_type, plist, d,
                )  # fmt: skip
        else:
            self._join_known_member(
                group, member_id, group_instance_id, client_id, client_host,
                rebalance_timeout_ms, session_timeout_ms, protocol_type, plist, d,
            )  # fmt: skip
        if group.is_(S.PREPARING_REBALANCE):
            self._try_complete_join(group)
        return d

    def _accept_joining_member(self, group: GroupMetadata, member_id: str) -> bool:
        limit = self.config.group_max_size
        if group.state in (S.EMPTY, S.DEAD):
            return True
        if group.is_(S.PREPARING_REBALANCE):
            # count those who rejoined: members who never come back do not hold seats
            rejoining = group.has(member_id) and group.get(member_id).is_awaiting_join
            return rejoining or group.num_members_awaiting_join < limit
        return group.has(member_id) or group.size() < limit

    def _join_known_member(
        self,
        group: GroupMetadata,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: Protocols,
        d: Deferred[JoinGroupResult],
    ) -> None:
        if group.is_pending_member(member_id):
            self._add_member_and_rebalance(
                group, member_id, group_instance_id, client_id, client_host,
                rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols, d,
            )  # fmt: skip
            return
        if group.is_static_member_fenced(group_instance_id, member_id):
            d.complete(JoinGroupResult(E.FENCED_INSTANCE_ID, member_id=member_id))
            return
        unknown_instance = (
            group_instance_id is not None and group.static_member_id(group_instance_id) is None
        )
        if not group.has(member_id) or unknown_instance:
            d.complete(JoinGroupResult(E.UNKNOWN_MEMBER_ID, member_id=member_id))
            return
        member = group.get(member_id)
        state = group.state
        if state is S.PREPARING_REBALANCE:
            self._update_member_and_rebalance(
                group, member, protocols, rebalance_timeout_ms, session_timeout_ms, d
            )
        elif state is S.COMPLETING_REBALANCE:
            if member.matches(protocols):
                # it missed our JoinGroup answer: give it the current generation again
                d.complete(
                    self._generation_result(
                        group, member_id, with_members=group.is_leader(member_id)
                    )
                )
            else:
                self._update_member_and_rebalance(
                    group, member, protocols, rebalance_timeout_ms, session_timeout_ms, d
                )
        elif state is S.STABLE:
            if group.is_leader(member_id) or not member.matches(protocols):
                # a leader rejoining means it wants a rebalance (e.g. metadata changed)
                self._update_member_and_rebalance(
                    group, member, protocols, rebalance_timeout_ms, session_timeout_ms, d
                )
            else:
                d.complete(self._generation_result(group, member_id, with_members=False))
        else:
            d.complete(JoinGroupResult(E.UNKNOWN_MEMBER_ID, member_id=member_id))

    def _generation_result(
        self, group: GroupMetadata, member_id: str, *, with_members: bool
    ) -> JoinGroupResult:
        return JoinGroupResult(
            E.NO_ERROR,
            member_id=member_id,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader=group.leader_id or "",
            members=group.current_member_metadata() if with_members else [],
        )

    def _add_member_and_rebalance(
        self,
        group: GroupMetadata,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: Protocols,
        d: Deferred[JoinGroupResult],
    ) -> None:
        member = MemberMetadata(
            member_id=member_id,
            group_instance_id=group_instance_id,
            client_id=client_id,
            client_host=client_host,
            rebalance_timeout_ms=rebalance_timeout_ms,
            session_timeout_ms=session_timeout_ms,
            protocol_type=protocol_type,
            supported_protocols=protocols,
            is_new=True,
        )
        if group.is_(S.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True  # lets the initial delay extend once more
        group.add(member, d)
        # a new member cannot heartbeat yet; bound how long its JoinGroup may sit here
        self._schedule_heartbeat(member, self.config.new_member_join_timeout_ms)
        self._maybe_prepare_rebalance(group, f"adding new member {member_id}")

    def _update_member_and_rebalance(
        self,
        group: GroupMetadata,
        member: MemberMetadata,
        protocols: Protocols,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        d: Deferred[JoinGroupResult],
    ) -> None:
        superseded = group.update_member(
            member, protocols, rebalance_timeout_ms, session_timeout_ms, d
        )
        if superseded is not None:
            superseded.complete(
                JoinGroupResult(E.REBALANCE_IN_PROGRESS, member_id=member.member_id)
            )
        self._maybe_prepare_rebalance(group, f"updating metadata for member {member.member_id}")

    def _update_static_member_and_rebalance(
        self,
        group: GroupMetadata,
        old_id: str,
        new_id: str,
        instance_id: str,
        protocols: Protocols,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        supports_skip_assignment: bool,
        d: Deferred[JoinGroupResult],
    ) -> None:
        """A static member came back under a new member id (KIP-345)."""
        current_leader = group.leader_id
        old = group.get(old_id)
        self._fence_member(group, old, E.FENCED_INSTANCE_ID)  # the old incarnation's requests
        member = group.replace_static_member(instance_id, old_id, new_id)
        old_protocols = member.supported_protocols
        old_timeouts = (member.rebalance_timeout_ms, member.session_timeout_ms)
        self._schedule_heartbeat(member)
        group.update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms, d)
        if group.is_(S.STABLE):
            if group.protocol_name == group.select_protocol():
                # nothing the group agreed on changed: persist the new id and keep the assignment
                generation = group.generation_id
                record = rec.group_metadata_record(group.group_id, group.metadata_value())

                def stored(code: ErrorCode) -> None:
                    if code != E.NO_ERROR:
                        log.warning(
                            "group %r: could not store static member %s: %s",
                            group.group_id,
                            new_id,
                            code.name,
                        )
                        if group.has(new_id) and group.generation_id == generation:
                            group.update_member(member, old_protocols, *old_timeouts, None)
                            group.replace_static_member(instance_id, new_id, old_id)
                            self._schedule_heartbeat(member)
                        d.complete(
                            JoinGroupResult(
                                group_store_error(code),
                                member_id=UNKNOWN_MEMBER_ID,
                                generation_id=group.generation_id,
                                protocol_type=group.protocol_type,
                                protocol_name=group.protocol_name,
                                leader=current_leader or "",
                            )
                        )
                        return
                    skip = supports_skip_assignment and group.is_leader(new_id)
                    group.complete_join(
                        member,
                        JoinGroupResult(
                            E.NO_ERROR,
                            member_id=new_id,
                            generation_id=group.generation_id,
                            protocol_type=group.protocol_type,
                            protocol_name=group.protocol_name,
                            # the old leader id keeps a returning leader from computing an assignment a
                            # stable group would never hand out (unless it can skip assigning, v9)
                            leader=new_id if skip else (current_leader or ""),
                            skip_assignment=skip,
                            members=group.current_member_metadata() if skip else [],
                        ),
                    )

                self._write(group.group_id, [record], stored)
            else:
                self._maybe_prepare_rebalance(
                    group, f"static member {instance_id} changed its protocols"
                )
        elif group.is_(S.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, f"static member {instance_id} rejoined while completing")
        # PreparingRebalance: it simply waits with the others

    # ================================================================== rebalance

    def _maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        now = self.now()
        if group.is_(S.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, E.REBALANCE_IN_PROGRESS)
        group.sync_deadline = None
        initial_delay = self.config.group_initial_rebalance_delay_ms
        if group.is_(S.EMPTY):
            group.join_deadline = now + initial_delay
            group.initial_delay_remaining_ms = max(group.rebalance_timeout_ms() - initial_delay, 0)
        else:
            group.join_deadline = now + group.rebalance_timeout_ms()
            group.initial_delay_remaining_ms = None
        log.info(
            "group %r: preparing to rebalance in state %s with generation %d (%s)",
            group.group_id, group.state, group.generation_id, reason,
        )  # fmt: skip
        group.transition_to(S.PREPARING_REBALANCE, now)
        self._try_complete_join(group)

    def _try_complete_join(self, group: GroupMetadata) -> None:
        if (
            group.is_(S.PREPARING_REBALANCE)
            and group.initial_delay_remaining_ms is None
            and group.has_all_members_joined()
        ):
            self._complete_join(group)

    def _join_deadline_passed(self, group: GroupMetadata, now: int) -> None:
        remaining = group.initial_delay_remaining_ms
        if remaining is not None and group.new_member_added and remaining > 0:
            # the initial delay restarts while new members keep arriving, up to the rebalance timeout
            group.new_member_added = False
            delay = min(self.config.group_initial_rebalance_delay_ms, remaining)
            group.join_deadline = now + delay
            group.initial_delay_remaining_ms = max(remaining - delay, 0)
            return
        self._complete_join(group)

    def _complete_join(self, group: GroupMetadata) -> None:
        now = self.now()
        group.join_deadline = None
        group.initial_delay_remaining_ms = None
        group.new_member_added = False
        for member in group.not_yet_rejoined_members():
            if not member.is_static:  # static members keep their seat until their session expires
                group.remove(member.member_id)
        if group.is_(S.DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # nobody rejoined (only static members are left): wait another round for sessions to expire
            group.join_deadline = now + group.rebalance_timeout_ms()
            log.warning(
                "group %r: no member rejoined; waiting another rebalance timeout", group.group_id
            )
            return
        group.init_next_generation(now)
        self.rebalances["classic"] += 1
        log.info(
            "group %r: generation %d (%s) with %d member(s), protocol %s",
            group.group_id, group.generation_id, group.state, group.size(), group.protocol_name,
        )  # fmt: skip
        if group.is_(S.EMPTY):
            self._write(
                group.group_id,
                [rec.group_metadata_record(group.group_id, group.metadata_value({}))],
            )
            return
        group.pending_sync_members = set(group.members)
        group.sync_deadline = now + group.rebalance_timeout_ms()
        for member in list(group.members.values()):
            result = self._generation_result(
                group, member.member_id, with_members=group.is_leader(member.member_id)
            )
            group.complete_join(member, result)
            self._schedule_heartbeat(member)
            member.is_new = False

    def _reset_and_propagate_assignment_error(self, group: GroupMetadata, code: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, code)

    def _propagate_assignment(self, group: GroupMetadata, code: ErrorCode) -> None:
        for member in group.members.values():
            result = SyncGroupResult(
                code, group.protocol_type, group.protocol_name, member.assignment
            )
            if member.complete_sync(result):
                self._schedule_heartbeat(member)

    def _remove_member_and_update_group(
        self, group: GroupMetadata, member: MemberMetadata, reason: str
    ) -> None:
        log.info("group %r: removing member %s (%s)", group.group_id, member.member_id, reason)
        # a new member may still be waiting on its JoinGroup: tell it that it did not get in
        self._fence_member(group, member, E.UNKNOWN_MEMBER_ID)
        group.remove(member.member_id)
        if group.state in (S.STABLE, S.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, reason)
        elif group.is_(S.PREPARING_REBALANCE):
            self._try_complete_join(group)

    def _remove_pending_member_and_update_group(self, group: GroupMetadata, member_id: str) -> None:
        group.pending_members.pop(member_id, None)
        if group.is_(S.PREPARING_REBALANCE):
            self._try_complete_join(group)

    # ================================================================== SyncGroup

    def sync_group(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        *,
        group_instance_id: str | None = None,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
        assignments: dict[str, bytes] | None = None,
    ) -> Deferred[SyncGroupResult]:
        """SyncGroup. Followers wait for the leader; everyone is answered once its assignment is stored."""
        d: Deferred[SyncGroupResult] = Deferred()
        err = self._validate(group_id)
        if err is E.COORDINATOR_LOAD_IN_PROGRESS:
            # the rebalance in flight was lost with the old coordinator: start over from JoinGroup
            err = E.REBALANCE_IN_PROGRESS
        if err is not None:
            d.complete(SyncGroupResult(err))
            return d
        group = self.groups.get(group_id)
        code = self._check_member(group, member_id, group_instance_id, generation_id)
        if code is None and group is not None:
            if (protocol_type is not None and group.protocol_type != protocol_type) or (
                protocol_name is not None and group.protocol_name != protocol_name
            ):
                code = E.INCONSISTENT_GROUP_PROTOCOL
            elif group.is_(S.EMPTY):
                code = E.UNKNOWN_MEMBER_ID
            elif group.is_(S.PREPARING_REBALANCE):
                code = E.REBALANCE_IN_PROGRESS
        if code is not None or group is None:
            d.complete(SyncGroupResult(code or E.UNKNOWN_MEMBER_ID))
            return d
        member = group.get(member_id)
        group.pending_sync_members.discard(member_id)
        if group.is_(S.STABLE):
            d.complete(
                SyncGroupResult(
                    E.NO_ERROR, group.protocol_type, group.protocol_name, member.assignment
                )
            )
            self._schedule_heartbeat(member)
            return d
        # CompletingRebalance
        if member.sync_waiter is not None:
            member.sync_waiter.complete(SyncGroupResult(E.REBALANCE_IN_PROGRESS))
        member.sync_waiter = d
        if group.is_leader(member_id):
            given = assignments or {}
            missing = [m for m in group.members if m not in given]
            if missing:
                log.warning("group %r: leader's assignment leaves out %s", group.group_id, missing)
            assignment = {m: bytes(given.get(m, b"")) for m in group.members}
            generation = group.generation_id
            record = rec.group_metadata_record(group_id, group.metadata_value(assignment))

            def stored(code: ErrorCode) -> None:
                # the record was replayed already (on success); it set every member's assignment
                if not (group.is_(S.COMPLETING_REBALANCE) and group.generation_id == generation):
                    return
                if code != E.NO_ERROR:
                    self._reset_and_propagate_assignment_error(group, group_store_error(code))
                    self._maybe_prepare_rebalance(group, "could not store the group assignment")
                else:
                    group.transition_to(S.STABLE, self.now())
                    self._propagate_assignment(group, E.NO_ERROR)

            self._write(group_id, [record], stored)
        return d

    def _check_member(
        self,
        group: GroupMetadata | None,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
    ) -> ErrorCode | None:
        if group is None:
            return E.UNKNOWN_MEMBER_ID
        if group.is_(S.DEAD):
            return E.COORDINATOR_NOT_AVAILABLE
        if group.is_static_member_fenced(group_instance_id, member_id):
            return E.FENCED_INSTANCE_ID
        if not group.has(member_id):
            return E.UNKNOWN_MEMBER_ID
        if generation_id != group.generation_id:
            return E.ILLEGAL_GENERATION
        return None
