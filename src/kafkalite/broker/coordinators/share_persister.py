"""SharePersister: what a share-partition calls to keep its state durable — the share coordinator of its
key, on this broker directly or on the leader of the key's `__share_group_state` partition over the wire.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeVar

from kafkalite.broker.network.inter_broker import InterBrokerSettings
from kafkalite.cluster.channel import ChannelError, ChannelManager
from kafkalite.cluster.metadata_cache import MetadataCache
from kafkalite.coordinator.share_records import (
    DEFAULT_STATE_EPOCH,
    SHARE_GROUP_STATE_TOPIC,
    UNINITIALIZED_START_OFFSET,
    PersisterStateBatch,
    SharePartitionKey,
)
from kafkalite.coordinator.share_state import ShareStateResult
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.share_state import (
    DeleteShareGroupStateRequest,
    InitializeShareGroupStateRequest,
    ReadShareGroupStateRequest,
    ReadShareGroupStateResponse,
    ReadShareGroupStateSummaryRequest,
    ReadShareGroupStateSummaryResponse,
    WriteShareGroupStateRequest,
)
from kafkalite.protocol.schema import Message

if TYPE_CHECKING:
    from kafkalite.broker.coordinators.share_coordinator import ShareCoordinatorComponent

log = logging.getLogger("kafkalite.broker.share_persister")

E = ErrorCode
# answers after which the coordinator may soon be found (moved, loading, topic being created)
RETRIABLE = frozenset(
    {E.NOT_COORDINATOR, E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE}
)
RETRY_TIMEOUT_S = 10.0
_BACKOFF_S = 0.05
_BACKOFF_MAX_S = 0.5

__all__ = ["PersisterStateBatch", "SharePersister", "ShareStateRead"]


@dataclass(frozen=True, slots=True)
class ShareStateRead:
    """A read (or summary read) of one share-partition's state; `batches` is empty for a summary."""

    error: ErrorCode
    message: str | None = None
    state_epoch: int = DEFAULT_STATE_EPOCH
    start_offset: int = UNINITIALIZED_START_OFFSET
    batches: tuple[PersisterStateBatch, ...] = ()


def _read_of(result: ShareStateResult) -> ShareStateRead:
    return ShareStateRead(
        result.error, result.message, result.state_epoch, result.start_offset, result.batches
    )


class _PartitionAnswer(Protocol):
    """What every share-state answer says of one partition."""

    @property
    def partition(self) -> int: ...
    @property
    def error_code(self) -> int: ...
    @property
    def error_message(self) -> str | None: ...


P = TypeVar("P", bound=_PartitionAnswer)
P_co = TypeVar("P_co", bound=_PartitionAnswer, covariant=True)


class _TopicAnswer(Protocol[P_co]):
    @property
    def topic_id(self) -> uuid.UUID: ...
    @property
    def partitions(self) -> Sequence[P_co]: ...


class _Answer(Protocol[P_co]):
    """A share-state response: its results per topic, each with its partitions' answers."""

    @property
    def results(self) -> Sequence[_TopicAnswer[P_co]]: ...


# what the local share coordinator is asked instead when it leads the key
LocalCall = Callable[["ShareCoordinatorComponent"], Awaitable[ShareStateResult]]


def _partition_result(response: _Answer[P], topic_id: uuid.UUID, partition: int) -> P | None:
    for topic in response.results:
        if topic.topic_id != topic_id:
            continue
        for p in topic.partitions:
            if p.partition == partition:
                return p
    return None


def _batches_of(
    raw: Sequence[ReadShareGroupStateResponse.ReadStateResult.PartitionResult.StateBatch],
) -> tuple[PersisterStateBatch, ...]:
    return tuple(
        PersisterStateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
        for b in raw
    )


class SharePersister:
    """Initialize, read, write, delete and summarize share-partition state through the share
    coordinator. NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE and
    unreachable brokers are retried with backoff for `retry_timeout_s`; then the last error is
    returned."""

    def __init__(
        self,
        share_coordinator: ShareCoordinatorComponent,
        metadata_cache: MetadataCache,
        inter_broker: InterBrokerSettings,
        *,
        retry_timeout_s: float = RETRY_TIMEOUT_S,
    ) -> None:
        self.share_coordinator = share_coordinator
        self.metadata_cache = metadata_cache
        self.inter_broker = inter_broker
        self.retry_timeout_s = retry_timeout_s
        self._channels: ChannelManager | None = None

    async def close(self) -> None:
        if self._channels is not None:
            await self._channels.close_all()
            self._channels = None

    # -- the operations --------------------------------------------------------------------------
    async def initialize(
        self,
        group_id: str,
        topic_id: uuid.UUID,
        partition: int,
        state_epoch: int,
        start_offset: int,
    ) -> ErrorCode:
        key = SharePartitionKey(group_id, topic_id, partition)
        request = InitializeShareGroupStateRequest(
            group_id=group_id,
            topics=[
                InitializeShareGroupStateRequest.InitializeStateData(
                    topic_id=topic_id,
                    partitions=[
                        InitializeShareGroupStateRequest.InitializeStateData.PartitionData(
                            partition=partition, state_epoch=state_epoch, start_offset=start_offset
                        )
                    ],
                )
            ],
        )
        result = await self._call(
            key, lambda c: c.initialize(key, state_epoch, start_offset), lambda: request, _plain
        )
        return result.error

    async def read(
        self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int
    ) -> ShareStateRead:
        key = SharePartitionKey(group_id, topic_id, partition)
        data = ReadShareGroupStateRequest.ReadStateData
        request = ReadShareGroupStateRequest(
            group_id=group_id,
            topics=[
                data(
                    topic_id=topic_id,
                    partitions=[data.PartitionData(partition=partition, leader_epoch=leader_epoch)],
                )
            ],
        )
        result = await self._call(key, lambda c: c.read(key, leader_epoch), lambda: request, _read)
        return _read_of(result)

    async def write(
        self,
        group_id: str,
        topic_id: uuid.UUID,
        partition: int,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        batches: Sequence[PersisterStateBatch],
    ) -> ErrorCode:
        key = SharePartitionKey(group_id, topic_id, partition)
        batches = tuple(batches)
        data = WriteShareGroupStateRequest.WriteStateData

        def request() -> WriteShareGroupStateRequest:  # built only for a remote coordinator
            return WriteShareGroupStateRequest(
                group_id=group_id,
                topics=[
                    data(
                        topic_id=topic_id,
                        partitions=[
                            data.PartitionData(
                                partition=partition,
                                state_epoch=state_epoch,
                                leader_epoch=leader_epoch,
                                start_offset=start_offset,
                                state_batches=[
                                    data.PartitionData.StateBatch(
                                        first_offset=b.first_offset,
                                        last_offset=b.last_offset,
                                        delivery_state=b.delivery_state,
                                        delivery_count=b.delivery_count,
                                    )
                                    for b in batches
                                ],
                            )
                        ],
                    )
                ],
            )

        result = await self._call(
            key,
            lambda c: c.write(key, state_epoch, leader_epoch, start_offset, batches),
            request,
            _plain,
        )
        return result.error

    async def delete(self, group_id: str, topic_id: uuid.UUID, partition: int) -> ErrorCode:
        key = SharePartitionKey(group_id, topic_id, partition)
        data = DeleteShareGroupStateRequest.DeleteStateData
        request = DeleteShareGroupStateRequest(
            group_id=group_id,
            topics=[data(topic_id=topic_id, partitions=[data.PartitionData(partition=partition)])],
        )
        result = await self._call(key, lambda c: c.delete(key), lambda: request, _plain)
        return result.error

    async def read_summary(
        self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int
    ) -> ShareStateRead:
        key = SharePartitionKey(group_id, topic_id, partition)
        data = ReadShareGroupStateSummaryRequest.ReadStateSummaryData
        request = ReadShareGroupStateSummaryRequest(
            group_id=group_id,
            topics=[
                data(
                    topic_id=topic_id,
                    partitions=[data.PartitionData(partition=partition, leader_epoch=leader_epoch)],
                )
            ],
        )
        result = await self._call(
            key, lambda c: c.read_summary(key, leader_epoch), lambda: request, _summary
        )
        return _read_of(result)

    # -- finding the coordinator and retrying ------------------------------------------------------
    async def _call(
        self,
        key: SharePartitionKey,
        local: LocalCall,
        request: Callable[[], Message],
        parse: Callable[[P], ShareStateResult],
    ) -> ShareStateResult:
        deadline = time.monotonic() + self.retry_timeout_s
        backoff = _BACKOFF_S
        attempt = 0
        while True:
            attempt += 1
            result = await self._attempt(key, local, request, parse)
            if result.error not in RETRIABLE or time.monotonic() + backoff > deadline:
                if result.error in RETRIABLE:
                    log.warning(
                        "share state of %s: still %s after %d attempt(s)",
                        key.coordinator_key(), ErrorCode.name_of(result.error), attempt,
                    )  # fmt: skip
                return result
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, _BACKOFF_MAX_S)

    async def _attempt(
        self,
        key: SharePartitionKey,
        local: LocalCall,
        request: Callable[[], Message],
        parse: Callable[[P], ShareStateResult],
    ) -> ShareStateResult:
        coordinator = self.share_coordinator
        manager = coordinator.manager
        if manager is None:
            return ShareStateResult(
                E.COORDINATOR_NOT_AVAILABLE, "the share coordinator is not running"
            )
        await coordinator.ensure_ready()
        partition = manager.partition_for(key)
        if coordinator.leads(key):
            return await local(coordinator)
        meta = self.metadata_cache.partition(SHARE_GROUP_STATE_TOPIC, partition)
        leader = meta.leader if meta is not None else -1
        if leader < 0:
            return ShareStateResult(
                E.COORDINATOR_NOT_AVAILABLE,
                f"{SHARE_GROUP_STATE_TOPIC}-{partition} has no leader",
            )
        if leader == self.inter_broker.broker_id:  # leadership is arriving here: not loaded yet
            return ShareStateResult(E.NOT_COORDINATOR)
        endpoint = self.metadata_cache.broker(leader)
        if endpoint is None:
            return ShareStateResult(E.COORDINATOR_NOT_AVAILABLE, f"broker {leader} is unknown")
        if self._channels is None:
            self._channels = self.inter_broker.channels("share-persister")
        message = request()  # built here: a local coordinator takes the call without it
        try:
            channel = self._channels.get(leader, endpoint.host, endpoint.port)
            # the response of `message`, whose partition answers `parse` reads
            response: _Answer[P] = await channel.send(message)
        except (ChannelError, OSError) as exc:
            log.info("%s to broker %d failed: %s", type(message).__name__, leader, exc)
            return ShareStateResult(E.COORDINATOR_NOT_AVAILABLE, str(exc))
        found = _partition_result(response, key.topic_id, key.partition)
        if found is None:
            return ShareStateResult(E.UNKNOWN_SERVER_ERROR, "the response has no such partition")
        return parse(found)


def _code(value: int) -> ErrorCode:
    try:
        return ErrorCode(value)
    except ValueError:
        return E.UNKNOWN_SERVER_ERROR


def _plain(p: _PartitionAnswer) -> ShareStateResult:
    return ShareStateResult(_code(p.error_code), p.error_message)


def _read(p: ReadShareGroupStateResponse.ReadStateResult.PartitionResult) -> ShareStateResult:
    return ShareStateResult(
        _code(p.error_code),
        p.error_message,
        p.state_epoch,
        p.start_offset,
        _batches_of(p.state_batches),
    )


def _summary(
    p: ReadShareGroupStateSummaryResponse.ReadStateSummaryResult.PartitionResult,
) -> ShareStateResult:
    return ShareStateResult(_code(p.error_code), p.error_message, p.state_epoch, p.start_offset)
