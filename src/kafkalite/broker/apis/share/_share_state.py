"""What the five share-state handlers (keys 83-87) share: the CLUSTER_ACTION check and running one share
coordinator operation per requested share-partition, concurrently, keeping the request's order.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol, TypeVar

from kafkalite.broker.context import RequestContext
from kafkalite.coordinator.share_records import SharePartitionKey
from kafkalite.coordinator.share_state import ShareStateResult
from kafkalite.protocol.errors import ErrorCode
from kafkalite.security.acl import AclOperation


class _Entry(Protocol):
    @property
    def partition(self) -> int: ...


E = TypeVar("E", bound=_Entry)
E_co = TypeVar("E_co", bound=_Entry, covariant=True)


class _Topic(Protocol[E_co]):
    @property
    def topic_id(self) -> uuid.UUID: ...
    @property
    def partitions(self) -> Sequence[E_co]: ...


class _Request(Protocol[E_co]):
    """A share-state request: a group id, and per topic id its partition entries."""

    @property
    def group_id(self) -> str: ...
    @property
    def topics(self) -> Sequence[_Topic[E_co]]: ...


# (the request's partition entry, the share coordinator's answer), per topic id in request order
Answers = list[tuple[uuid.UUID, list[tuple[E, ShareStateResult]]]]


async def run_per_partition(
    ctx: RequestContext,
    request: _Request[E],
    operation: Callable[[SharePartitionKey, E], Awaitable[ShareStateResult]],
) -> Answers[E]:
    """Run `operation(key, partition entry)` for every partition of the request; a principal
    without CLUSTER_ACTION on the cluster gets CLUSTER_AUTHORIZATION_FAILED for each."""
    allowed = ctx.authorize_cluster(AclOperation.CLUSTER_ACTION)
    denied = ShareStateResult(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    entries = [(t.topic_id, p) for t in request.topics for p in t.partitions]

    async def one(topic_id: uuid.UUID, entry: E) -> ShareStateResult:
        if not allowed:
            return denied
        return await operation(
            SharePartitionKey(request.group_id, topic_id, entry.partition), entry
        )

    results = await asyncio.gather(*(one(t, p) for t, p in entries))
    answers: Answers[E] = []
    for (topic_id, entry), result in zip(entries, results, strict=True):
        if not answers or answers[-1][0] != topic_id:
            answers.append((topic_id, []))
        answers[-1][1].append((entry, result))
    return answers
