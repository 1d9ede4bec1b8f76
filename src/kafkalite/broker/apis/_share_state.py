"""What the five share-state handlers (keys 83-87) share: the CLUSTER_ACTION check and running one share
coordinator operation per requested share-partition, concurrently, keeping the request's order.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from kafkalite.broker.context import RequestContext
from kafkalite.coordinator.share_records import SharePartitionKey
from kafkalite.coordinator.share_state import ShareStateResult
from kafkalite.protocol.errors import ErrorCode
from kafkalite.security.acl import AclOperation

# (the request's partition entry, the share coordinator's answer), per topic id in request order
Answers = list[tuple[uuid.UUID, list[tuple[Any, ShareStateResult]]]]


async def run_per_partition(
    ctx: RequestContext,
    request: Any,
    operation: Callable[[SharePartitionKey, Any], Awaitable[ShareStateResult]],
) -> Answers:
    """Run `operation(key, partition entry)` for every partition of the request; a principal
    without CLUSTER_ACTION on the cluster gets CLUSTER_AUTHORIZATION_FAILED for each."""
    allowed = ctx.authorize_cluster(AclOperation.CLUSTER_ACTION)
    denied = ShareStateResult(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    entries = [(t.topic_id, p) for t in request.topics for p in t.partitions]

    async def one(topic_id: uuid.UUID, entry: Any) -> ShareStateResult:
        if not allowed:
            return denied
        return await operation(
            SharePartitionKey(request.group_id, topic_id, entry.partition), entry
        )

    results = await asyncio.gather(*(one(t, p) for t, p in entries))
    answers: Answers = []
    for (topic_id, entry), result in zip(entries, results, strict=True):
        if not answers or answers[-1][0] != topic_id:
            answers.append((topic_id, []))
        answers[-1][1].append((entry, result))
    return answers
