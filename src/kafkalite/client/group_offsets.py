"""The group's committed offsets on the wire, from the client: the OffsetCommit and OffsetFetch requests
a consumer sends and the offsets an OffsetFetch answer holds.
"""

from __future__ import annotations

from typing import Any

from kafkalite.client.structs import OffsetAndMetadata, TopicPartition
from kafkalite.protocol.errors import KafkaError
from kafkalite.protocol.messages.offsets import (
    OffsetCommitRequest,
    OffsetFetchRequest,
    OffsetFetchResponse,
)

OFFSET_COMMIT, OFFSET_FETCH = 8, 9


def offset_commit_request(
    offsets: dict[TopicPartition, OffsetAndMetadata],
    group_id: str,
    generation: int,
    member_id: str,
    instance_id: str | None,
) -> OffsetCommitRequest:
    """OffsetCommit of `offsets` (generation -1 and no member id: a commit from outside the group)."""
    req_cls = OffsetCommitRequest
    by_topic: dict[str, list[Any]] = {}
    for tp, om in offsets.items():
        by_topic.setdefault(tp.topic, []).append(
            req_cls.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                partition_index=tp.partition,
                committed_offset=om.offset,
                committed_leader_epoch=om.leader_epoch,
                committed_metadata=om.metadata if om.metadata is not None else "",
            )
        )
    return req_cls(
        group_id=group_id,
        generation_id_or_member_epoch=generation,
        member_id=member_id,
        group_instance_id=instance_id,
        topics=[
            req_cls.OffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in by_topic.items()
        ],
    )


def offset_fetch_request(group_id: str, partitions: list[TopicPartition]) -> OffsetFetchRequest:
    """OffsetFetch of `partitions`, asking for stable offsets (none of an open transaction)."""
    req_cls = OffsetFetchRequest
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return req_cls(
        group_id=group_id,
        topics=[
            req_cls.OffsetFetchRequestTopic(name=t, partition_indexes=ps)
            for t, ps in by_topic.items()
        ],
        require_stable=True,
    )


def committed_offsets(resp: OffsetFetchResponse) -> dict[TopicPartition, OffsetAndMetadata | None]:
    """The offsets of an OffsetFetch answer (None: none committed); KafkaError on a partition error."""
    out: dict[TopicPartition, OffsetAndMetadata | None] = {}
    for t in resp.topics or []:
        for p in t.partitions:
            if p.error_code:
                raise KafkaError(p.error_code, f"OffsetFetch {t.name}-{p.partition_index}")
            tp = TopicPartition(t.name, p.partition_index)
            out[tp] = (
                None
                if p.committed_offset < 0
                else OffsetAndMetadata(p.committed_offset, p.metadata, p.committed_leader_epoch)
            )
    return out
