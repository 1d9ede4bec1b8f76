"""Transaction markers: writing COMMIT/ABORT control batches on the partition leaders — locally for
partitions this broker leads, with WriteTxnMarkers to the others — retried until every one is written.

`write_markers_locally` is also what the WriteTxnMarkers handler runs; a marker reaching a
`__consumer_offsets` partition completes the group coordinator's pending TxnOffsetCommits.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Protocol

from kafkalite.broker.network.inter_broker import InterBrokerSettings
from kafkalite.cluster.append_records import AppendEntry, AppendOrigin, EndTxnMarker
from kafkalite.cluster.channel import ChannelError, ChannelManager
from kafkalite.cluster.metadata_cache import MetadataCache
from kafkalite.cluster.replica_manager import ReplicaManager
from kafkalite.coordinator import OFFSETS_TOPIC, TopicPartition
from kafkalite.coordinator.txn_types import TxnMarkerRequest
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.txn import WriteTxnMarkersRequest

if TYPE_CHECKING:
    from kafkalite.broker.coordinators.groups import GroupCoordinatorComponent

log = logging.getLogger("kafkalite.broker.txn_markers")

E = ErrorCode
_Marker = WriteTxnMarkersRequest.WritableTxnMarker
_MarkerTopic = _Marker.WritableTxnMarkerTopic
# a partition answering one of these has its marker (or no longer needs one)
_DONE = frozenset({E.NO_ERROR, E.INVALID_PRODUCER_EPOCH})
_MARKER_TIMEOUT_MS = 30_000


class MarkerHost(Protocol):
    """What writing markers reads of the broker (BrokerServer is one): the ReplicaManager (made in
    its start()), the metadata cache, the group coordinator whose pending TxnOffsetCommits a
    `__consumer_offsets` marker completes, and how to reach the other brokers."""

    @property
    def replica_manager(self) -> ReplicaManager: ...

    @property
    def metadata_cache(self) -> MetadataCache: ...

    @property
    def groups(self) -> GroupCoordinatorComponent: ...

    @property
    def inter_broker(self) -> InterBrokerSettings: ...


async def write_markers_locally(
    broker: MarkerHost,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    commit: bool,
    partitions: Iterable[TopicPartition],
) -> dict[TopicPartition, ErrorCode]:
    """Append the marker to each partition this broker leads and wait until the ISR has it."""
    marker = EndTxnMarker(producer_id, producer_epoch, coordinator_epoch, commit)
    tps = list(partitions)
    by_topic: dict[str, list[tuple[TopicPartition, AppendEntry]]] = {}
    for tp in tps:
        by_topic.setdefault(tp.topic, []).append((tp, AppendEntry(tp.partition, marker)))
    appended = broker.replica_manager.append_records(
        [(topic, [e for _, e in items]) for topic, items in by_topic.items()],
        -1,
        _MARKER_TIMEOUT_MS,
        AppendOrigin.COORDINATOR,
    )
    if appended.delayed is not None:
        await appended.delayed.complete()
    results: dict[TopicPartition, ErrorCode] = {}
    for items, answers in zip(by_topic.values(), appended.results, strict=True):
        for (tp, _), r in zip(items, answers, strict=True):
            code = r.error_code
            if code == E.UNKNOWN_TOPIC_OR_PARTITION:  # not hosted here
                known = broker.metadata_cache.partition(tp.topic, tp.partition) is not None
                code = E.NOT_LEADER_OR_FOLLOWER if known else E.UNKNOWN_TOPIC_OR_PARTITION
            results[tp] = E(code)
            if not code and tp.topic == OFFSETS_TOPIC:
                broker.groups.on_txn_marker(tp.partition, producer_id, commit)
    return {tp: results[tp] for tp in tps}


class TransactionMarkerChannelManager:
    """Delivers each TxnMarkerRequest to the leaders of its partitions, retrying with backoff until
    every partition has its marker (or its topic is gone), then reports it complete."""

    def __init__(
        self,
        broker: MarkerHost,
        on_complete: Callable[[TxnMarkerRequest], None],
        still_wanted: Callable[[TxnMarkerRequest], bool],
    ) -> None:
        self.broker = broker
        self._on_complete = on_complete
        self._still_wanted = still_wanted
        self._tasks: set[asyncio.Task[None]] = set()
        self._channels: ChannelManager | None = None

    def send(self, request: TxnMarkerRequest) -> None:
        task = asyncio.get_running_loop().create_task(self._deliver(request))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def stop(self) -> None:
        tasks = list(self._tasks)
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        if self._channels is not None:
            await self._channels.close_all()

    async def _deliver(self, req: TxnMarkerRequest) -> None:
        broker = self.broker
        remaining = set(req.partitions)
        backoff = 0.02
        attempt = 0
        while remaining:
            if not self._still_wanted(req):
                log.info(
                    "markers for %r: no longer this coordinator's to write", req.transactional_id
                )
                return
            by_leader: dict[int, list[TopicPartition]] = {}
            for tp in list(remaining):
                if broker.metadata_cache.topic(tp.topic) is None:
                    remaining.discard(tp)  # deleted: nothing left to mark
                    continue
                meta = broker.metadata_cache.partition(tp.topic, tp.partition)
                leader = meta.leader if meta is not None else -1
                if leader >= 0:
                    by_leader.setdefault(leader, []).append(tp)
            for leader, tps in by_leader.items():
                if leader == broker.inter_broker.broker_id:
                    results = await write_markers_locally(
                        broker, req.producer_id, req.producer_epoch, req.coordinator_epoch,
                        req.commit, tps,
                    )  # fmt: skip
                else:
                    results = await self._write_remote(leader, req, tps)
                for tp, code in results.items():
                    if code in _DONE:
                        remaining.discard(tp)
                    elif code == E.TRANSACTION_COORDINATOR_FENCED:
                        log.warning(
                            "markers for %r: this coordinator is fenced", req.transactional_id
                        )
                        return
            if remaining:
                attempt += 1
                if attempt % 50 == 0:
                    log.warning(
                        "markers for %r still not written on %s after %d attempts",
                        req.transactional_id, sorted(remaining), attempt,
                    )  # fmt: skip
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 1.0)
        self._on_complete(req)

    async def _write_remote(
        self, leader: int, req: TxnMarkerRequest, tps: list[TopicPartition]
    ) -> dict[TopicPartition, ErrorCode]:
        endpoint = self.broker.metadata_cache.broker(leader)
        if endpoint is None:
            return dict.fromkeys(tps, E.NOT_LEADER_OR_FOLLOWER)
        if self._channels is None:
            self._channels = self.broker.inter_broker.channels("txn-markers")
        by_topic: dict[str, list[int]] = {}
        for tp in tps:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        request = WriteTxnMarkersRequest(
            markers=[
                _Marker(
                    producer_id=req.producer_id,
                    producer_epoch=req.producer_epoch,
                    transaction_result=req.commit,
                    topics=[
                        _MarkerTopic(name=t, partition_indexes=ps) for t, ps in by_topic.items()
                    ],
                    coordinator_epoch=req.coordinator_epoch,
                )
            ]
        )
        try:
            channel = self._channels.get(leader, endpoint.host, endpoint.port)
            response = await channel.send(request)
        except (ChannelError, OSError) as exc:
            log.info("WriteTxnMarkers to broker %d failed: %s", leader, exc)
            return dict.fromkeys(tps, E.NOT_LEADER_OR_FOLLOWER)
        out: dict[TopicPartition, ErrorCode] = {}
        for marker in response.markers:
            for t in marker.topics:
                for p in t.partitions:
                    out[TopicPartition(t.name, p.partition_index)] = E(p.error_code)
        for tp in tps:
            out.setdefault(tp, E.UNKNOWN_SERVER_ERROR)
        return out
