"""What ShareFetch and ShareAcknowledge share: request checks, ACLs, resolving a topic id to the partition
this broker leads, per-partition answers with the current leader, and applying acknowledgement batches.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

from kafkalite.broker.context import RequestContext
from kafkalite.broker.coordinators import groups as _groups
from kafkalite.broker.coordinators.groups import ShareSettings
from kafkalite.cluster.errors import ReplicaError, UnknownTopicOrPartition
from kafkalite.cluster.partition import Partition
from kafkalite.coordinator.share_partition import AckBatch
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.share_groups import ShareAcknowledgeRequest, ShareFetchRequest
from kafkalite.security.acl import AclOperation, ResourceType

E = ErrorCode
RENEW = 4  # KIP-1222 (ShareFetch / ShareAcknowledge v2): extend the lock, keep the record
_V1_TYPES = frozenset({0, 1, 2, 3})  # GAP, ACCEPT, RELEASE, REJECT


def settings(ctx: RequestContext, group_id: str) -> ShareSettings:
    return _groups.share_partition_settings(ctx.broker.config, ctx.broker.group_configs, group_id)


def invalid(request: ShareFetchRequest | ShareAcknowledgeRequest, *, fetch: bool) -> str | None:
    """Kafka's checks before a share session is touched."""
    if not request.group_id:
        return "GroupId can't be empty."
    if not request.member_id:
        return "MemberId can't be empty."
    epoch = request.share_session_epoch
    if epoch < -1:
        return f"ShareSessionEpoch is invalid: {epoch}"
    has_acks = any(p.acknowledgement_batches for t in request.topics for p in t.partitions)
    if epoch == 0 and has_acks:
        return "Acknowledgements are not allowed when opening a share session (epoch 0)."
    if (
        fetch
        and isinstance(request, ShareFetchRequest)
        and epoch == -1
        and request.max_records > 0
        and request.topics
        and not has_acks
    ):
        return "A final ShareFetch (epoch -1) can only acknowledge, not fetch."
    return None


def group_denied(ctx: RequestContext, group_id: str) -> ErrorCode | None:
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, group_id):
        return E.GROUP_AUTHORIZATION_FAILED
    return None


def resolve(
    ctx: RequestContext, topic_id: uuid.UUID, index: int
) -> tuple[str, Partition] | ErrorCode:
    """The partition this broker leads for a share fetch, or the error for it."""
    info = ctx.broker.metadata_cache.topic_by_id(topic_id)
    if info is None:
        return E.UNKNOWN_TOPIC_ID
    if not ctx.authorize(AclOperation.READ, ResourceType.TOPIC, info.name):
        return E.TOPIC_AUTHORIZATION_FAILED
    if index < 0 or index >= len(info.partitions):
        return E.UNKNOWN_TOPIC_OR_PARTITION
    try:
        part = ctx.broker.replica_manager.leader_partition(info.name, index, -1)
    except ReplicaError as exc:
        if isinstance(exc, UnknownTopicOrPartition):
            return E.NOT_LEADER_OR_FOLLOWER
        return ErrorCode(exc.error_code)
    return info.name, part


class _Leader(Protocol):
    leader_id: int
    leader_epoch: int


class _PartAnswer(Protocol):
    """A ShareFetch or ShareAcknowledge partition answer, as Responses reads it."""

    @property
    def partition_index(self) -> int: ...
    @property
    def error_code(self) -> int: ...
    @property
    def current_leader(self) -> _Leader: ...


P = TypeVar("P", bound=_PartAnswer)
AckPartition = (
    ShareFetchRequest.FetchTopic.FetchPartition
    | ShareAcknowledgeRequest.AcknowledgeTopic.AcknowledgePartition
)


class Responses(Generic[P]):
    """The per-partition answers being built, grouped by topic, and the leaders' endpoints for the
    partitions answered NOT_LEADER_OR_FOLLOWER."""

    def __init__(self, ctx: RequestContext, make: Callable[[int], P]) -> None:
        self.ctx = ctx
        self._make = make
        self._parts: dict[uuid.UUID, dict[int, P]] = {}

    def part(self, topic_id: uuid.UUID, index: int) -> P:
        by_index = self._parts.setdefault(topic_id, {})
        pr = by_index.get(index)
        if pr is None:
            pr = by_index[index] = self._make(index)
        return pr

    def has_errors(self) -> bool:
        return any(pr.error_code for ps in self._parts.values() for pr in ps.values())

    def _leader(self, topic_id: uuid.UUID, index: int) -> tuple[int, int]:
        info = self.ctx.broker.metadata_cache.topic_by_id(topic_id)
        if info is None or index >= len(info.partitions):
            return -1, -1
        p = info.partitions[index]
        return p.leader, p.leader_epoch

    def topics(self) -> list[tuple[uuid.UUID, list[P]]]:
        out = []
        for topic_id, parts in self._parts.items():
            for index, pr in parts.items():
                if pr.error_code == E.NOT_LEADER_OR_FOLLOWER:
                    leader, epoch = self._leader(topic_id, index)
                    pr.current_leader.leader_id = leader
                    pr.current_leader.leader_epoch = epoch
            out.append((topic_id, sorted(parts.values(), key=lambda p: p.partition_index)))
        return out

    def endpoints(self) -> list[tuple[int, str, int, str | None]]:
        ids = {
            pr.current_leader.leader_id
            for ps in self._parts.values()
            for pr in ps.values()
            if pr.error_code == E.NOT_LEADER_OR_FOLLOWER and pr.current_leader.leader_id >= 0
        }
        out = []
        for node in sorted(ids):
            b = self.ctx.broker.metadata_cache.broker(node)
            if b is not None:
                out.append((node, b.host, b.port, getattr(b, "rack", None)))
        return out


async def acknowledge(
    ctx: RequestContext,
    group_id: str,
    member_id: str,
    topic_id: uuid.UUID,
    p: AckPartition,
    renew: bool = False,
) -> tuple[ErrorCode, str | None]:
    """Apply one partition's acknowledgement batches; the error (or NO_ERROR) and a message.
    RENEW is taken only when the request says it carries renewals (v2's IsRenewAck)."""
    allowed = _V1_TYPES | {RENEW} if renew else _V1_TYPES
    batches = []
    for b in p.acknowledgement_batches:
        types = tuple(int(t) for t in b.acknowledge_types)
        if not types or any(t not in allowed for t in types):
            return E.INVALID_REQUEST, f"invalid acknowledge types {list(types)}"
        batches.append(AckBatch(b.first_offset, b.last_offset, types))
    found = resolve(ctx, topic_id, p.partition_index)
    if isinstance(found, ErrorCode):
        return found, None
    topic, part = found
    manager = ctx.broker.share_partitions
    lp = await manager.get(group_id, topic_id, topic, part)
    if isinstance(lp, ErrorCode):
        return lp, None
    return await manager.acknowledge(lp, member_id, batches)
