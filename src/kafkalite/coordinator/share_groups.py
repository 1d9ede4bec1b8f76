"""KIP-932 share groups on the group coordinator: ShareGroupHeartbeat and ShareGroupDescribe over the
pure `ShareGroup` model, session expiry on the coordinator's clock, dropped when the partition moves.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kafkalite.coordinator.consumer_assignors import SubscribedTopic
from kafkalite.coordinator.runtime import CoordinatorRuntime
from kafkalite.coordinator.share_group import (
    ShareGroup,
    ShareGroupConfig,
    ShareHeartbeat,
    ShareHeartbeatResult,
)
from kafkalite.protocol.errors import ErrorCode

log = logging.getLogger("kafkalite.coordinator")
E = ErrorCode


@dataclass(frozen=True, slots=True)
class ShareMemberDescription:
    member_id: str
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    assignment: dict[uuid.UUID, frozenset[int]]


@dataclass(frozen=True, slots=True)
class ShareGroupDescription:
    group_id: str
    error: ErrorCode
    message: str | None = None
    state: str = ""
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor: str = "simple"
    members: list[ShareMemberDescription] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ShareGroupLookup:
    """A share group found for offset administration, or the error to answer."""

    error: ErrorCode
    message: str | None = None
    group: ShareGroup | None = None


class ShareGroups(CoordinatorRuntime):
    """The share-group operations, mixed into the GroupCoordinator."""

    def share_group_heartbeat(
        self,
        group_id: str,
        hb: ShareHeartbeat,
        topics: Mapping[str, SubscribedTopic],
        config: ShareGroupConfig,
    ) -> ShareHeartbeatResult:
        err = self._validate(group_id)
        if err is not None:
            return ShareHeartbeatResult(err)
        other = self.groups.get(group_id)
        if other is not None and (other.members or other.consumer is not None):
            return ShareHeartbeatResult(
                E.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group."
            )
        group = self.share_groups.get(group_id)
        if group is None:
            if hb.member_epoch != 0:
                return ShareHeartbeatResult(
                    E.UNKNOWN_MEMBER_ID, f"Share group {group_id} not found."
                )
            group = self.share_groups[group_id] = ShareGroup(group_id)
        before = set(group.members)
        result = group.heartbeat(
            hb, topics, config, self.now(), self._new_member_id(hb.client_id or "consumer")
        )
        after = set(group.members)
        if before != after:
            log.info(
                "share group %r: epoch %d, %d member(s) (%s joined, %s left)",
                group_id, group.group_epoch, len(after),
                sorted(after - before) or "none", sorted(before - after) or "none",
            )  # fmt: skip
        self.share_configs[group_id] = config
        return result

    def share_group_describe(self, group_ids: Sequence[str]) -> list[ShareGroupDescription]:
        out: list[ShareGroupDescription] = []
        for gid in group_ids:
            err = self._validate(gid)
            if err is not None:
                out.append(ShareGroupDescription(gid, err))
                continue
            group = self.share_groups.get(gid)
            if group is None:
                known = gid in self.groups
                out.append(
                    ShareGroupDescription(
                        gid,
                        E.GROUP_ID_NOT_FOUND,
                        f"Group {gid} is not a share group."
                        if known
                        else f"Group {gid} not found.",
                    )
                )
                continue
            out.append(
                ShareGroupDescription(
                    gid,
                    E.NO_ERROR,
                    state=group.state,
                    group_epoch=group.group_epoch,
                    assignment_epoch=group.assignment_epoch,
                    members=[
                        ShareMemberDescription(
                            m.member_id,
                            m.rack_id,
                            m.member_epoch,
                            m.client_id,
                            m.client_host,
                            m.subscribed_topic_names,
                            dict(m.assignment),
                        )
                        for m in group.members.values()
                    ],
                )
            )
        return out

    def share_group_lookup(
        self, group_id: str, *, require_empty: bool = False, create: bool = False
    ) -> ShareGroupLookup:
        """The share group for Describe/Alter/DeleteShareGroupOffsets: GROUP_ID_NOT_FOUND for an
        unknown id or a group of another type, NON_EMPTY_GROUP when `require_empty` and members are
        in it (Kafka's rule for altering or deleting share-partition state). With `create`, an unused
        id becomes an empty share group (offsets set before its first member, as Kafka allows)."""
        err = self._validate(group_id)
        if err is not None:
            return ShareGroupLookup(err)
        group = self.share_groups.get(group_id)
        if group is None:
            other = self.groups.get(group_id)
            in_use = other is not None and (other.members or other.consumer is not None)
            if create and not in_use:
                group = self.share_groups[group_id] = ShareGroup(group_id)
                log.info("share group %r created empty by an offset change", group_id)
            else:
                return ShareGroupLookup(
                    E.GROUP_ID_NOT_FOUND,
                    f"Group {group_id} is not a share group."
                    if other is not None
                    else f"Group {group_id} not found.",
                )
        if require_empty and group.members:
            return ShareGroupLookup(
                E.NON_EMPTY_GROUP,
                f"Share group {group_id} has {len(group.members)} member(s); "
                "its offsets can only change while it is empty.",
            )
        return ShareGroupLookup(E.NO_ERROR, None, group)

    def _expire_share_members(self, now: int) -> None:
        for group in list(self.share_groups.values()):
            if not self.is_coordinator_for(group.group_id):
                continue
            gone = group.expire(now)
            if gone:
                log.info(
                    "share group %r: member(s) %s timed out; epoch %d",
                    group.group_id, gone, group.group_epoch,
                )  # fmt: skip

    def _share_deadlines(self) -> list[int]:
        return [d for g in self.share_groups.values() if (d := g.next_deadline()) is not None]
