"""Dead letters of share groups (KIP-932 DLQ): the batch of archived records with the headers that
say where each came from and why, written to the dead-letter topic before a record is archived.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from kafkalite.broker.network.inter_broker import InterBrokerSettings
from kafkalite.cluster.append_records import AppendEntry, AppendOrigin
from kafkalite.cluster.channel import ChannelManager
from kafkalite.cluster.metadata import TopicInfo
from kafkalite.cluster.metadata_cache import MetadataCache
from kafkalite.cluster.partition import Partition
from kafkalite.cluster.replica_manager import ReplicaManager
from kafkalite.coordinator.share_partition import DeadLetter
from kafkalite.protocol.errors import ErrorCode
from kafkalite.records import iter_batches
from kafkalite.records.batch import Record
from kafkalite.records.builder import RecordBatchBuilder

log = logging.getLogger("kafkalite.broker.share")
E = ErrorCode
_READ_CHUNK = 1024 * 1024

# headers a dead-lettered record carries (beside its own)
DLQ_HEADER_TOPIC = "__dlq.errors.topic"
DLQ_HEADER_PARTITION = "__dlq.errors.partition"
DLQ_HEADER_OFFSET = "__dlq.errors.offset"
DLQ_HEADER_DELIVERY_COUNT = "__dlq.errors.delivery.count"
DLQ_HEADER_REASON = "__dlq.errors.reason"
DLQ_HEADER_GROUP = "__dlq.errors.group.id"


def _dead_letter_batch(
    letters: Sequence[DeadLetter],
    records: dict[int, Record],
    group_id: str,
    topic: str,
    partition: int,
) -> bytes:
    builder = RecordBatchBuilder()
    for letter in letters:
        r = records.get(letter.offset)
        headers: list[tuple[str, bytes | None]] = []
        if r is not None:
            headers.extend((h[0], h[1]) for h in (r.headers or ()))
        headers += [
            (DLQ_HEADER_TOPIC, topic.encode()),
            (DLQ_HEADER_PARTITION, str(partition).encode()),
            (DLQ_HEADER_OFFSET, str(letter.offset).encode()),
            (DLQ_HEADER_DELIVERY_COUNT, str(letter.delivery_count).encode()),
            (DLQ_HEADER_REASON, letter.reason.encode()),
            (DLQ_HEADER_GROUP, group_id.encode()),
        ]
        builder.append(
            r.key if r is not None else None,
            r.value if r is not None else None,
            headers,
            r.timestamp if r is not None else None,
        )
    return builder.build()


def _read_records(part: Partition, offsets: Iterable[int]) -> dict[int, Record]:
    """The records at these offsets (runs in a worker thread)."""
    wanted = sorted(set(offsets))
    out: dict[int, Record] = {}
    for off in wanted:
        if off in out:
            continue
        info = part.read(off, _READ_CHUNK, max_offset=part.log_end_offset, min_one_message=True)
        region = info.slice
        if region is None:
            continue
        for batch in iter_batches(region.read_bytes(), allow_truncated_tail=True):
            for r in batch.records:
                if r.offset in wanted:
                    out[r.offset] = r
    return out


class DeadLetterHost(Protocol):
    """What writing dead letters reads of the broker (BrokerServer is one): the ReplicaManager (made
    in its start()), the metadata cache, topic creation, and how to reach the other brokers."""

    @property
    def replica_manager(self) -> ReplicaManager: ...

    @property
    def metadata_cache(self) -> MetadataCache: ...

    @property
    def inter_broker(self) -> InterBrokerSettings: ...

    def create_topic(self, name: str) -> TopicInfo: ...


async def write_dead_letters(
    broker: DeadLetterHost,
    channels: Callable[[], ChannelManager],
    dlq_topic: str,
    group_id: str,
    topic: str,
    partition: int,
    letters: Sequence[DeadLetter],
) -> None:
    """Append the archived records, with headers saying where they came from and why, to the
    dead-letter topic (created on first need); answers once the ISR has them."""
    source = broker.replica_manager.get_partition(topic, partition)
    records = (
        await asyncio.to_thread(_read_records, source, [x.offset for x in letters])
        if source
        else {}
    )
    blob = _dead_letter_batch(letters, records, group_id, topic, partition)
    info = broker.metadata_cache.topic(dlq_topic)
    if info is None:
        from kafkalite.cluster.metadata import MetadataError

        with contextlib.suppress(MetadataError):
            await asyncio.to_thread(broker.create_topic, dlq_topic)
        for _ in range(50):
            info = broker.metadata_cache.topic(dlq_topic)
            if info is not None and info.partitions and all(p.leader >= 0 for p in info.partitions):
                break
            await asyncio.sleep(0.1)
    if info is None or not info.partitions:
        raise RuntimeError(f"dead-letter topic {dlq_topic} does not exist and could not be created")
    target = partition % len(info.partitions)
    await _produce(broker, channels, dlq_topic, target, blob)


async def _produce(
    broker: DeadLetterHost,
    channels: Callable[[], ChannelManager],
    topic: str,
    partition: int,
    blob: bytes,
) -> None:
    """acks=all append: locally when this broker leads the partition, else a Produce to its leader."""
    part = broker.replica_manager.get_partition(topic, partition)
    if part is not None and part.is_leader:
        appended = broker.replica_manager.append_records(
            [(topic, (AppendEntry(partition, blob),))], -1, 30_000, AppendOrigin.COORDINATOR
        )
        if appended.delayed is not None:
            await appended.delayed.complete()
        result = appended.results[0][0]
        if result.error_code:
            raise RuntimeError(
                f"append to {topic}-{partition}: not replicated ({int(result.error_code)})"
                + (f": {result.error_message}" if result.error_message else "")
            )
        return
    info = broker.metadata_cache.topic(topic)
    meta = info.partitions[partition] if info is not None else None
    endpoint = broker.metadata_cache.broker(meta.leader) if meta is not None else None
    if meta is None or endpoint is None:
        raise RuntimeError(f"{topic}-{partition} has no leader")
    from kafkalite.protocol.messages.produce import ProduceRequest

    T = ProduceRequest.TopicProduceData
    request = ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=30000,
        topic_data=[
            T(name=topic, partition_data=[T.PartitionProduceData(index=partition, records=blob)])
        ],
    )
    channel = channels().get(meta.leader, endpoint.host, endpoint.port)
    response = await channel.send(request, 8)
    for t in response.responses:
        for p in t.partition_responses:
            if p.error_code:
                raise RuntimeError(
                    f"produce to {topic}-{partition}: {ErrorCode(p.error_code).name}"
                )
