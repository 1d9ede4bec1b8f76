"""OffsetFetch (key 9) v0-9: a group's committed offsets, for listed partitions or all (v2+), several groups (v8+).

Partitions without a commit answer offset -1; group-level errors go where each version carries them.
"""

from __future__ import annotations

from collections.abc import Sequence

from kafkalite.broker.context import RequestContext
from kafkalite.broker.coordinators import groups as _groups
from kafkalite.coordinator.types import OffsetFetchPartition, OffsetFetchResult, TopicPartition
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.offsets import (
    OFFSET_FETCH,
    OffsetFetchRequest,
    OffsetFetchResponse,
)
from kafkalite.security.acl import AclOperation, ResourceType

API = OFFSET_FETCH
R = OffsetFetchResponse


def _fetch(
    ctx: RequestContext, group_id: str, tps: list[TopicPartition] | None, require_stable: bool
) -> OffsetFetchResult:
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, group_id):
        return OffsetFetchResult(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    coord = _groups.coordinator_of(ctx)
    if coord is None:
        return OffsetFetchResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    r = coord.fetch_offsets(group_id, tps, require_stable=require_stable)
    if ctx.broker.authorizer is not None:
        # Kafka: DESCRIBE on each topic; named partitions answer TOPIC_AUTHORIZATION_FAILED,
        # a fetch of every offset leaves unauthorized topics out
        allowed: dict[str, bool] = {}
        kept: list[OffsetFetchPartition] = []
        for p in r.partitions:
            ok = allowed.get(p.topic)
            if ok is None:
                ok = allowed[p.topic] = ctx.authorize(
                    AclOperation.DESCRIBE, ResourceType.TOPIC, p.topic
                )
            if ok:
                kept.append(p)
            elif tps is not None:
                kept.append(
                    OffsetFetchPartition(
                        p.topic, p.partition, error=ErrorCode.TOPIC_AUTHORIZATION_FAILED
                    )
                )
        r.partitions = kept
    return r


def _requested(
    topics: Sequence[
        OffsetFetchRequest.OffsetFetchRequestTopic
        | OffsetFetchRequest.OffsetFetchRequestGroup.OffsetFetchRequestTopics
    ]
    | None,
) -> list[TopicPartition] | None:
    if topics is None:
        return None
    return [TopicPartition(t.name, p) for t in topics for p in t.partition_indexes]


def _by_topic(parts: list[OffsetFetchPartition]) -> dict[str, list[OffsetFetchPartition]]:
    out: dict[str, list[OffsetFetchPartition]] = {}
    for p in parts:
        out.setdefault(p.topic, []).append(p)
    return out


async def handle(ctx: RequestContext, request: OffsetFetchRequest) -> OffsetFetchResponse:
    version = ctx.api_version
    if version >= 8:
        groups = []
        for g in request.groups:
            r = _fetch(ctx, g.group_id, _requested(g.topics), request.require_stable)
            groups.append(
                R.OffsetFetchResponseGroup(
                    group_id=g.group_id,
                    error_code=r.error,
                    topics=[
                        R.OffsetFetchResponseGroup.OffsetFetchResponseTopics(
                            name=name,
                            partitions=[
                                R.OffsetFetchResponseGroup.OffsetFetchResponseTopics.OffsetFetchResponsePartitions(
                                    partition_index=p.partition,
                                    committed_offset=p.offset,
                                    committed_leader_epoch=p.leader_epoch,
                                    metadata=p.metadata,
                                    error_code=p.error,
                                )
                                for p in parts
                            ],
                        )
                        for name, parts in _by_topic(r.partitions).items()
                    ],
                )
            )
        return OffsetFetchResponse(throttle_time_ms=0, groups=groups)

    requested = _requested(request.topics)
    r = _fetch(ctx, request.group_id, requested, request.require_stable if version >= 7 else False)
    parts = r.partitions
    if r.error != ErrorCode.NO_ERROR and version < 2:
        # no top-level error before v2: every requested partition carries it
        parts = [
            OffsetFetchPartition(tp.topic, tp.partition, error=r.error) for tp in requested or []
        ]
    topic_cls = R.OffsetFetchResponseTopic
    return OffsetFetchResponse(
        throttle_time_ms=0,
        error_code=r.error if version >= 2 else 0,
        topics=[
            topic_cls(
                name=name,
                partitions=[
                    topic_cls.OffsetFetchResponsePartition(
                        partition_index=p.partition,
                        committed_offset=p.offset,
                        committed_leader_epoch=p.leader_epoch if version >= 5 else -1,
                        metadata=p.metadata,
                        error_code=p.error,
                    )
                    for p in ps
                ],
            )
            for name, ps in _by_topic(parts).items()
        ],
    )
