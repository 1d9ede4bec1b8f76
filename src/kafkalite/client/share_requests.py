"""The share consumer's pure parts: AcknowledgeType, ShareConsumerRecord, acknowledgement batches, the
per-leader share session, ShareFetch / ShareAcknowledge requests, and acquired records from a fetched blob.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from kafkalite.client.structs import TopicPartition
from kafkalite.filters import CompiledFilter
from kafkalite.protocol.messages.share_groups import ShareAcknowledgeRequest, ShareFetchRequest
from kafkalite.records.batch import iter_batches

GAP = 0  # an acquired offset with no record for the user (a control record, a compacted gap)
FINAL_EPOCH = -1  # ShareSessionEpoch / MemberEpoch that closes the session / leaves the group

PartitionKey = tuple[uuid.UUID, int]  # (topic id, partition) as share requests name partitions
Acks = dict[PartitionKey, dict[int, int]]  # {partition: {offset: acknowledge type}}


class AcknowledgeType(enum.IntEnum):
    """How a consumer finished with a record, as Kafka's AcknowledgeType (the wire values)."""

    ACCEPT = 1  # processed: the record is done for the group
    RELEASE = 2  # not processed: another delivery, to this or another member
    REJECT = 3  # unprocessable: archived (and sent to the group's dead-letter topic if it has one)


class ShareConsumerRecord(NamedTuple):
    """A ConsumerRecord plus how many times the share group has delivered it (1 the first time)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: Any
    value: Any
    headers: list[tuple[str, bytes | None]]
    delivery_count: int = 1
    leader_epoch: int = -1


# -- pure logic: acknowledgement batches and acquired ranges


def ack_batches(acks: dict[int, int]) -> list[tuple[int, int, list[int]]]:
    """{offset: type} as AcknowledgementBatches: runs of consecutive offsets with one type each."""
    out: list[tuple[int, int, list[int]]] = []
    for off in sorted(acks):
        t = acks[off]
        if out and out[-1][1] == off - 1 and out[-1][2][0] == t:
            first, _last, types = out[-1]
            out[-1] = (first, off, types)
        else:
            out.append((off, off, [t]))
    return out


def delivery_counts(acquired: Iterable[tuple[int, int, int]]) -> dict[int, int]:
    """AcquiredRecords ranges (first, last, delivery count) as {offset: delivery count}."""
    return {o: dc for first, last, dc in acquired for o in range(first, last + 1)}


@dataclass
class ShareSession:
    """A member's share session on one leader: the epoch of the next request (0 opens it) and the
    partitions it holds."""

    epoch: int = 0
    partitions: set[PartitionKey] = field(default_factory=set)


def share_fetch_request(
    group_id: str,
    member_id: str,
    session: ShareSession,
    wanted: set[PartitionKey],
    acks: Acks,
    *,
    max_wait_ms: int,
    max_records: int,
    min_bytes: int,
    max_bytes: int,
    filter: str | None = None,
) -> ShareFetchRequest:
    """One ShareFetch: partitions new to the session or carrying acknowledgements, those no longer
    wanted forgotten; no wait and no records when nothing is wanted (acknowledging only). `filter`:
    kafkalite's fetch filter, a tagged field other brokers ignore."""
    req_cls = ShareFetchRequest
    part_cls = req_cls.FetchTopic.FetchPartition
    by_topic: dict[uuid.UUID, list[Any]] = {}
    for key in sorted(set(wanted - session.partitions) | set(acks), key=str):
        batches = [
            part_cls.AcknowledgementBatch(first_offset=f, last_offset=last, acknowledge_types=ts)
            for f, last, ts in ack_batches(acks.get(key, {}))
        ]
        by_topic.setdefault(key[0], []).append(
            part_cls(partition_index=key[1], acknowledgement_batches=batches)
        )
    forgotten: dict[uuid.UUID, list[int]] = {}
    for t, p in sorted(session.partitions - wanted, key=str):
        forgotten.setdefault(t, []).append(p)
    return req_cls(
        group_id=group_id,
        member_id=member_id,
        share_session_epoch=session.epoch,
        max_wait_ms=max_wait_ms if wanted else 0,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        max_records=max_records if wanted else 0,
        batch_size=max_records,
        filter=filter,
        topics=[req_cls.FetchTopic(topic_id=t, partitions=ps) for t, ps in by_topic.items()],
        forgotten_topics_data=[
            req_cls.ForgottenTopic(topic_id=t, partitions=ps) for t, ps in forgotten.items()
        ],
    )


def share_acknowledge_request(
    group_id: str, member_id: str, epoch: int, acks: Acks
) -> ShareAcknowledgeRequest:
    """One ShareAcknowledge (epoch -1: the last one, closing the share session)."""
    req_cls = ShareAcknowledgeRequest
    part_cls = req_cls.AcknowledgeTopic.AcknowledgePartition
    by_topic: dict[uuid.UUID, list[Any]] = {}
    for (t, p), offsets in acks.items():
        batches = [
            part_cls.AcknowledgementBatch(first_offset=f, last_offset=last, acknowledge_types=ts)
            for f, last, ts in ack_batches(offsets)
        ]
        by_topic.setdefault(t, []).append(
            part_cls(partition_index=p, acknowledgement_batches=batches)
        )
    return req_cls(
        group_id=group_id,
        member_id=member_id,
        share_session_epoch=epoch,
        topics=[req_cls.AcknowledgeTopic(topic_id=t, partitions=ps) for t, ps in by_topic.items()],
    )


def acquired_records(
    tp: TopicPartition,
    blob: bytes | None,
    acquired: Iterable[tuple[int, int, int]],
    key_deserializer: Any,
    value_deserializer: Any,
    verify_crc: bool,
    local_filter: CompiledFilter | None = None,
) -> tuple[list[ShareConsumerRecord], list[int]]:
    """The records of `blob` this member acquired (with their delivery counts), and the acquired
    offsets with no record for the user (control records, gaps, and with `local_filter` the records
    it does not select): those are acknowledged as GAP."""
    match = local_filter.match if local_filter is not None else None
    counts = delivery_counts(acquired)
    if not counts:
        return [], []
    kd, vd = key_deserializer, value_deserializer
    topic, partition = tp
    out: list[ShareConsumerRecord] = []
    seen: set[int] = set()
    for batch in iter_batches(blob or b"", verify_crc=verify_crc, allow_truncated_tail=True):
        if batch.is_control:
            continue
        for r in batch.records:
            dc = counts.get(r.offset)
            if dc is None:
                continue
            if match is not None and not match(r.offset, r.timestamp, r.key, r.headers):
                continue
            seen.add(r.offset)
            out.append(
                ShareConsumerRecord(
                    topic,
                    partition,
                    r.offset,
                    r.timestamp,
                    batch.timestamp_type,
                    r.key if kd is None else kd(topic, r.key),
                    r.value if vd is None else vd(topic, r.value),
                    r.headers,
                    dc,
                    batch.partition_leader_epoch,
                )
            )
    return out, [o for o in counts if o not in seen]
