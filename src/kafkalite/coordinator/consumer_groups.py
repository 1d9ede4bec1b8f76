"""KIP-848 consumer groups on the coordinator runtime: ConsumerGroupHeartbeat and ConsumerGroupDescribe,
session and revocation timeouts, one write at a time per group (the next heartbeat plans on replayed state).

A group is a consumer group while its `GroupMetadata.consumer` is set; an empty classic group becomes one
on its first heartbeat, and an empty consumer group goes back to classic on a classic JoinGroup.
"""

from __future__ import annotations

import collections
import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from kafkalite.coordinator import records as rec
from kafkalite.coordinator.consumer_assignors import SubscribedTopic
from kafkalite.coordinator.consumer_group import (
    ConsumerGroup,
    HeartbeatRequest,
    HeartbeatResult,
)
from kafkalite.coordinator.consumer_group_records import to_coordinator_record
from kafkalite.coordinator.consumer_group_types import (
    GroupEpochRecord,
)
from kafkalite.coordinator.deferred import Deferred
from kafkalite.coordinator.group import GroupMetadata
from kafkalite.coordinator.runtime import CoordinatorRuntime, group_store_error
from kafkalite.coordinator.state import GroupState
from kafkalite.coordinator.types import CoordinatorRecord
from kafkalite.protocol.errors import ErrorCode

log = logging.getLogger("kafkalite.coordinator")
E = ErrorCode


@dataclass(frozen=True, slots=True)
class ConsumerMemberDescription:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    assignment: dict[uuid.UUID, frozenset[int]]
    target_assignment: dict[uuid.UUID, frozenset[int]]


@dataclass(frozen=True, slots=True)
class ConsumerGroupDescription:
    group_id: str
    error: ErrorCode
    message: str | None = None
    state: str = ""
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor: str = ""
    members: list[ConsumerMemberDescription] = field(default_factory=list)


class ConsumerGroups(CoordinatorRuntime):
    """The KIP-848 operations, mixed into the GroupCoordinator beside the classic ones."""

    def _cg_serial(self, group_id: str, run: Callable[[], None]) -> None:
        """Run `run` now if nothing of this group is in flight, else after the ones before it;
        every `run` ends by calling `_cg_next` once."""
        queue = self._cg_queues.get(group_id)
        if queue is not None:
            queue.append(run)
            return
        self._cg_queues[group_id] = collections.deque()
        run()

    def _cg_next(self, group_id: str) -> None:
        queue = self._cg_queues.get(group_id)
        if queue is None:
            return
        if queue:
            queue.popleft()()
        else:
            del self._cg_queues[group_id]

    def consumer_group_heartbeat(
        self,
        group_id: str,
        request: HeartbeatRequest,
        topics: Mapping[str, SubscribedTopic],
    ) -> Deferred[HeartbeatResult]:
        d: Deferred[HeartbeatResult] = Deferred()

        def run() -> None:
            try:
                self._heartbeat_now(group_id, request, topics, d)
            except Exception:  # a bug must not leave the group's queue waiting forever
                log.exception("consumer group %r: heartbeat failed", group_id)
                if not d.done():
                    d.complete(HeartbeatResult(E.UNKNOWN_SERVER_ERROR))
                    self._cg_next(group_id)

        self._cg_serial(group_id, run)
        return d

    def _heartbeat_now(
        self,
        group_id: str,
        request: HeartbeatRequest,
        topics: Mapping[str, SubscribedTopic],
        d: Deferred[HeartbeatResult],
    ) -> None:
        def answer(result: HeartbeatResult) -> None:
            d.complete(result)
            self._cg_next(group_id)

        err = self._validate(group_id)
        if err is not None:
            answer(HeartbeatResult(err))
            return
        group = self.groups.get(group_id)
        records: list[CoordinatorRecord] = []
        if group is not None and group.consumer is None:
            if group.members or group.state not in (GroupState.EMPTY, GroupState.DEAD):
                answer(
                    HeartbeatResult(
                        E.GROUP_ID_NOT_FOUND,
                        f"Group {group_id} is not a consumer group: it has classic members.",
                    )
                )
                return
            if group.protocol_type is not None or group.generation_id:
                records.append(rec.group_tombstone(group_id))  # the classic metadata goes
        cg = (
            group.consumer
            if group is not None and group.consumer is not None
            else ConsumerGroup(group_id)
        )
        result, planned = cg.heartbeat(
            request, topics, self.consumer_config, lambda: str(uuid.uuid4())
        )
        if result.error != E.NO_ERROR or not planned:
            if result.error == E.NO_ERROR and group is not None and group.consumer is not None:
                group.consumer.touch(result.member_id or "", self.consumer_config, self.now())
            answer(result)
            return
        records += [to_coordinator_record(r) for r in planned]
        self.rebalances["consumer"] += _epoch_bumps(planned)

        def written(code: ErrorCode) -> None:
            if code != E.NO_ERROR:
                answer(HeartbeatResult(group_store_error(code)))
                return
            g = self.groups.get(group_id)
            if g is not None and g.consumer is not None and result.member_id:
                g.consumer.touch(result.member_id, self.consumer_config, self.now())
            answer(result)

        self._write(group_id, records, written)

    # -- timers --------------------------------------------------------------------------------
    def _expire_consumer_members(self, group: GroupMetadata, now: int) -> None:
        cg = group.consumer
        if cg is None:
            return
        expired = cg.expired_members(now)
        if not expired:
            return
        group_id = group.group_id

        def run() -> None:
            g = self.groups.get(group_id)
            if g is None or g.consumer is None:
                self._cg_next(group_id)
                return
            members = g.consumer.members
            now_ms = self.now()
            still = [m for m in expired if m in members and members[m].is_expired(now_ms)]
            for m in expired:
                if m in members:
                    members[m].expiring = False
            planned = g.consumer.remove_members(still)
            if not planned:
                self._cg_next(group_id)
                return
            log.info("consumer group %r: member(s) %s expired", group_id, ", ".join(still))
            self.rebalances["consumer"] += _epoch_bumps(planned)
            self._write(
                group_id,
                [to_coordinator_record(r) for r in planned],
                lambda code: self._cg_next(group_id),
            )

        for m in expired:  # not again while the removal waits for its turn
            cg.members[m].expiring = True
        self._cg_serial(group_id, run)

    def _consumer_deadlines(self, group: GroupMetadata) -> list[int]:
        cg = group.consumer
        if cg is None:
            return []
        out = []
        for m in cg.members.values():
            if m.expiring:
                continue
            if m.session_deadline_ms:
                out.append(m.session_deadline_ms)
            if m.revocation_deadline_ms is not None:
                out.append(m.revocation_deadline_ms)
        return out

    # -- describe --------------------------------------------------------------------------------
    def describe_consumer_groups(self, group_ids: list[str]) -> list[ConsumerGroupDescription]:
        out = []
        for gid in group_ids:
            err = self._validate(gid)
            if err is not None:
                out.append(ConsumerGroupDescription(gid, err))
                continue
            group = self.groups.get(gid)
            if group is None or group.consumer is None:
                out.append(
                    ConsumerGroupDescription(
                        gid, E.GROUP_ID_NOT_FOUND, f"Group {gid} is not a consumer group."
                    )
                )
                continue
            cg = group.consumer
            assignor = cg.assignor(self.consumer_config)
            out.append(
                ConsumerGroupDescription(
                    gid,
                    E.NO_ERROR,
                    state=cg.state,
                    group_epoch=cg.group_epoch,
                    assignment_epoch=cg.assignment_epoch,
                    assignor=assignor,
                    members=[
                        ConsumerMemberDescription(
                            m.member_id,
                            m.subscription.instance_id,
                            m.subscription.rack_id,
                            m.member_epoch,
                            m.subscription.client_id,
                            m.subscription.client_host,
                            m.subscription.subscribed_topic_names,
                            m.subscription.subscribed_topic_regex,
                            dict(m.assigned),
                            dict(cg.target.get(m.member_id, {})),
                        )
                        for m in sorted(cg.members.values(), key=lambda m: m.member_id)
                    ],
                )
            )
        return out


def _epoch_bumps(planned: Sequence[object]) -> int:
    """How many group-epoch bumps (KIP-848 rebalances) a planned write holds."""
    return sum(1 for r in planned if isinstance(r, GroupEpochRecord))
