"""ReplicaManager.fetch_messages: reads for consumers (below the high watermark, or the last stable offset
read_committed) and followers (up to the log end), with the delayed fetch (min bytes, max wait) inside.

Also KIP-392 (reads from a follower, the leader naming a preferred read replica) and the leader's
replication throttle; the handler keeps sessions, ACLs, quotas and the encoding of the answer.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from kafkalite.cluster.errors import NotLeaderOrFollower, ReplicaError, UnknownTopicOrPartition
from kafkalite.cluster.partition import Partition
from kafkalite.cluster.replica_selector import NO_PREFERRED_REPLICA, preferred_read_replica
from kafkalite.cluster.replication_quota import ReplicationQuota, leader_throttled
from kafkalite.protocol.errors import ErrorCode
from kafkalite.storage.types import FileSlice

if TYPE_CHECKING:
    from kafkalite.cluster.remote_log_manager import RemoteLogManager
    from kafkalite.cluster.replica_manager import ReplicaManager

log = logging.getLogger("kafkalite.cluster.fetch")

# how far a fetch may read (Kafka's FetchIsolation)
FOLLOWER = -1  # a follower broker: up to the log end
READ_UNCOMMITTED = 0  # a consumer: below the high watermark
READ_COMMITTED = 1  # a consumer: below the last stable offset


class FetchPartition:
    """One partition asked for: where and how much to read; `error` set by the caller (ACLs,
    metadata) or by the lookup; `part` the replica read. KIP-392: `follower` when read from this
    broker's follower (at `served_epoch`); `preferred` a broker id to send the consumer to."""

    __slots__ = (
        "epoch",
        "error",
        "follower",
        "log_start_offset",
        "max_bytes",
        "offset",
        "part",
        "partition",
        "preferred",
        "served_epoch",
        "topic",
        "topic_id",
    )

    def __init__(
        self,
        topic: str | None,
        topic_id: uuid.UUID | None,
        partition: int,
        offset: int,
        max_bytes: int,
        epoch: int,
        log_start_offset: int = -1,
    ) -> None:
        self.topic = topic
        self.topic_id = topic_id
        self.partition = partition
        self.offset = offset
        self.max_bytes = max_bytes
        self.epoch = epoch
        self.log_start_offset = log_start_offset  # a follower's, as its Fetch says (v5+)
        self.part: Partition | None = None
        self.error = ErrorCode.NO_ERROR
        self.follower = False
        self.served_epoch = -1
        self.preferred = NO_PREFERRED_REPLICA


class PartitionReadResult:
    """One partition's answer, named as the Fetch response names them (the handler sends it as it
    is): the records read are `region` (a file slice), which the handler turns into `records`."""

    __slots__ = (
        "aborted_transactions",
        "error_code",
        "high_watermark",
        "last_stable_offset",
        "log_start_offset",
        "partition_index",
        "preferred_read_replica",
        "records",
        "region",
    )

    def __init__(self, partition_index: int, error_code: int) -> None:
        self.partition_index = partition_index
        self.error_code = error_code
        self.high_watermark = -1
        self.last_stable_offset = -1
        self.log_start_offset = -1
        self.preferred_read_replica = -1  # v11+: KIP-392, the replica to fetch from instead
        # an empty record set, never a null one (as Kafka): librdkafka cannot parse a null set
        self.records: object = b""
        self.region: FileSlice | None = None
        # read_committed: (producer id, first offset) of aborted transactions in the returned range
        self.aborted_transactions: list[tuple[int, int]] | None = None


class FetchCounters(Protocol):
    """One topic's fetch counters (the broker's TopicStats)."""

    fetch_requests: int
    failed_fetch_requests: int
    bytes_out: int
    replication_bytes_out: int


class FetchStats(Protocol):
    """The counters a fetch bumps (the broker's stats, read by the metrics)."""

    @property
    def topics(self) -> Mapping[str, FetchCounters]: ...

    def topic(self, name: str) -> FetchCounters: ...

    @property
    def consumer_fetches(self) -> MutableMapping[tuple[str, int], int]: ...

    @property
    def preferred_replica_redirects(self) -> MutableMapping[tuple[str, int], int]: ...


class Closable(Protocol):
    @property
    def closed(self) -> bool: ...


@dataclass(slots=True)
class ReplicaSelection:
    """KIP-392 on the leader: the replica.selector.class in force and how to see the brokers."""

    selector: str | None
    client_rack: str
    rack_of: Callable[[int], str | None]
    is_alive: Callable[[int], bool]


@dataclass(slots=True)
class FetchParams:
    """What a Fetch request asks as a whole (Kafka's FetchParams)."""

    replica_id: int  # a follower broker's id, or -1 for a consumer
    isolation: int  # FOLLOWER, READ_UNCOMMITTED or READ_COMMITTED
    max_wait_ms: int
    min_bytes: int
    max_bytes: int  # the answer's byte budget (the first partition with data gets one batch)
    follower_ok: bool = False  # KIP-392: a v11+ consumer may read from a follower here
    selection: ReplicaSelection | None = None
    throttle_quota: ReplicationQuota | None = None  # the leader replication quota (followers)
    connection: Closable | None = None  # a closed connection after the wait gets no reads


@dataclass(slots=True)
class FetchMessagesResult:
    results: list[list[PartitionReadResult]]
    parked_ns: int  # time spent in the delayed fetch


class LeaderThrottle:
    """leader.replication.throttled.rate applied to one follower's fetch (Kafka's
    shouldLeaderThrottle): a partition listed in leader.replication.throttled.replicas for this
    broker sends that follower nothing while it is out of the ISR and the rate is over the quota."""

    __slots__ = ("broker_id", "quota", "replica_id")

    def __init__(self, quota: ReplicationQuota, broker_id: int, replica_id: int) -> None:
        self.quota = quota
        self.broker_id = broker_id
        self.replica_id = replica_id

    def throttled(self, part: Partition) -> bool:
        return leader_throttled(part.config, part.partition, self.broker_id)

    def holds_back(self, part: Partition) -> bool:
        if not self.quota.enabled:
            return False
        return self.quota.should_throttle(
            self.throttled(part), self.replica_id in part.isr, _now_ms()
        )

    def record(self, part: Partition, nbytes: int) -> None:
        """Throttled replicas' bytes are measured with or without a rate (the byte-rate metric)."""
        if self.throttled(part):
            self.quota.record(nbytes, _now_ms())


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


def _consumer_replica(rm: ReplicaManager, topic: str, partition: int, epoch: int) -> Partition:
    """KIP-392: the replica a v11+ consumer fetch may read here — the leader, or a follower that the
    controller made one (a replica found on disk and not yet assigned a role is not readable)."""
    p = rm.get_partition(topic, partition)
    if p is None:
        raise UnknownTopicOrPartition(f"{topic}-{partition} is not hosted on this broker")
    p.check_leader_epoch(epoch)
    if not p.is_leader and p.leader_epoch < 0:
        raise NotLeaderOrFollower(f"{topic}-{partition} has no leader or follower role here yet")
    return p


def serving(rm: ReplicaManager, tgt: FetchPartition, part: Partition) -> bool:
    """Whether this broker may still answer the partition: as its leader, or as the follower it was
    (same leader epoch, still hosted) when the fetch arrived."""
    if not tgt.follower:
        return part.is_leader
    return part.leader_epoch == tgt.served_epoch and rm.get_partition(*part.key) is part


def resolve(rm: ReplicaManager, params: FetchParams, tgt: FetchPartition) -> None:
    """Find the replica to read (or the error to answer); a follower's fetch moves its state."""
    topic = tgt.topic
    assert topic is not None
    try:
        if params.follower_ok:
            part = _consumer_replica(rm, topic, tgt.partition, tgt.epoch)
            tgt.follower = not part.is_leader
            tgt.served_epoch = part.leader_epoch
        else:
            part = rm.leader_partition(topic, tgt.partition, tgt.epoch)
        if params.replica_id >= 0:
            rm.update_follower_fetch_state(
                part, params.replica_id, tgt.offset, tgt.log_start_offset
            )
        tgt.part = part
    except ReplicaError as exc:
        tgt.error = (
            ErrorCode.NOT_LEADER_OR_FOLLOWER
            if isinstance(exc, UnknownTopicOrPartition)
            else exc.error_code
        )


def limit_offset(part: Partition, isolation: int) -> int:
    """Followers read up to the log end; consumers below the high watermark, or the last stable
    offset when read_committed."""
    if isolation == FOLLOWER:
        return part.log_end_offset
    if isolation == READ_COMMITTED:
        return part.last_stable_offset
    return part.high_watermark


def redirect(rm: ReplicaManager, targets: list[FetchPartition], sel: ReplicaSelection) -> None:
    """KIP-392 on the leader: the replica selector may send a consumer in `client_rack` to an in-sync
    follower of its rack; such partitions are answered at once, without records."""
    now = rm.clock()
    for tgt in targets:
        part = tgt.part
        if part is not None and not tgt.error and part.is_leader:
            tgt.preferred = preferred_read_replica(
                sel.selector, part, sel.client_rack, tgt.offset, sel.rack_of, sel.is_alive, now
            )


def has_data(
    targets: list[FetchPartition],
    min_bytes: int,
    isolation: int,
    rm: ReplicaManager | None = None,
    throttle: LeaderThrottle | None = None,
) -> bool:
    """Whether the partitions hold at least `min_bytes` new bytes (or any error to report); a
    follower's partitions held back by the leader's replication throttle count for nothing."""
    total = 0
    for tgt in targets:
        part = tgt.part
        if part is None or tgt.error or tgt.preferred >= 0:
            return True
        if not part.is_leader and not (tgt.follower and rm is not None and serving(rm, tgt, part)):
            return True
        if throttle is not None and throttle.holds_back(part):
            continue
        hw = limit_offset(part, isolation)
        if tgt.offset > hw or tgt.offset < part.log_start_offset:
            if tgt.follower and hw < tgt.offset <= part.log_end_offset:
                continue  # KIP-392: the follower holds it but has not learnt the HW yet: wait
            return True  # out of range: answer now
        if tgt.offset < hw:
            if min_bytes <= 1:
                return True
            try:
                info = part.read(tgt.offset, tgt.max_bytes, max_offset=hw, min_one_message=True)
            except Exception:
                return True
            if info.slice is not None:
                total += info.slice.length
                if total >= min_bytes:
                    return True
    return False


async def fetch_messages(
    rm: ReplicaManager,
    params: FetchParams,
    topics: list[list[FetchPartition]],
    stats: FetchStats,
) -> FetchMessagesResult | None:
    """Resolve the partitions, wait (delayed fetch) until `min_bytes` are there or `max_wait_ms`
    passes, then read each in order within the byte budget. None: the connection closed meanwhile."""
    flat = [t for g in topics for t in g]
    for tgt in flat:
        if not tgt.error:
            resolve(rm, params, tgt)
    isolation = params.isolation
    throttle = None
    if params.replica_id >= 0 and params.throttle_quota is not None:
        throttle = LeaderThrottle(params.throttle_quota, rm.broker_id, params.replica_id)
    if params.selection is not None:
        redirect(rm, flat, params.selection)
    parked_ns = 0
    max_wait = params.max_wait_ms
    min_bytes = params.min_bytes
    if max_wait > 0 and flat and not has_data(flat, min_bytes, isolation, rm, throttle):
        keys = [(t.topic, t.partition) for t in flat]
        parked = time.monotonic_ns()
        await rm.delayed.wait_until(
            keys, lambda: has_data(flat, min_bytes, isolation, rm, throttle), max_wait / 1000
        )
        parked_ns = time.monotonic_ns() - parked
        if params.connection is not None and params.connection.closed:
            return None
    budget = params.max_bytes
    first = True
    out: list[list[PartitionReadResult]] = []
    topic_stats = stats.topics
    for group in topics:
        results: list[PartitionReadResult] = []
        out.append(results)
        for tgt in group:
            pr = PartitionReadResult(tgt.partition, tgt.error)
            results.append(pr)
            part = tgt.part
            if tgt.error or part is None:
                continue
            ts = topic_stats.get(part.topic) or stats.topic(part.topic)
            ts.fetch_requests += 1
            if not serving(rm, tgt, part):  # leadership moved while the fetch waited
                pr.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
                continue
            if isolation != FOLLOWER and _answer_consumer(stats, tgt, pr, part):
                continue  # KIP-392: sent to its preferred read replica
            lg = part._log  # (the cluster package reads its partitions' logs directly)
            hw = pr.high_watermark = lg.high_watermark
            lso = pr.last_stable_offset = lg.last_stable_offset
            pr.log_start_offset = lg.log_start_offset
            limit_at = (
                lg.log_end_offset
                if isolation == FOLLOWER
                else lso
                if isolation == READ_COMMITTED
                else hw
            )
            limit = min(tgt.max_bytes, budget)
            if limit <= 0 and not first:
                continue
            if throttle is not None and throttle.holds_back(part):
                continue  # the answer carries the offsets, no records
            rlm = rm.remote_log_manager  # KIP-405: below the local log start, the remote tier
            if rlm is not None and part.config.remote_storage_enable:
                pr.log_start_offset = rlm.log_start_offset(part)
                if rlm.serves(part, tgt.offset):
                    n = await _read_remote(rlm, part, tgt, pr, ts, max(limit, 0), first, limit_at)
                    first, budget = first and n == 0, budget - n
                    continue
            try:
                info = lg.read(
                    tgt.offset, max(limit, 0), max_offset=limit_at, min_one_message=first
                )
            except Exception as exc:
                ts.failed_fetch_requests += 1
                code = getattr(exc, "error_code", None)
                if code is None:
                    log.exception(
                        "read of %s-%d at %d failed", tgt.topic, tgt.partition, tgt.offset
                    )
                    code = ErrorCode.KAFKA_STORAGE_ERROR
                pr.error_code = code
                continue
            region = info.slice
            if region is None or region.length == 0:
                continue
            if isolation == READ_COMMITTED:
                pr.aborted_transactions = [
                    (a.producer_id, a.first_offset)
                    for a in lg.collect_aborted_transactions(tgt.offset, limit_at)
                ]
            first = False
            budget -= region.length
            if isolation == FOLLOWER:
                ts.replication_bytes_out += region.length
                if throttle is not None:
                    throttle.record(part, region.length)
            else:
                ts.bytes_out += region.length
            pr.region = region
    return FetchMessagesResult(out, parked_ns)


async def _read_remote(
    rlm: RemoteLogManager,
    part: Partition,
    tgt: FetchPartition,
    pr: PartitionReadResult,
    ts: FetchCounters,
    limit: int,
    first: bool,
    limit_at: int,
) -> int:
    """A read below the local log start from the remote tier into `pr.records` (bytes, no file
    region); returns the bytes read. A failed remote read answers KAFKA_STORAGE_ERROR."""
    try:
        data, aborted = await rlm.read(part, tgt.offset, limit, first, limit_at)
    except Exception as exc:
        ts.failed_fetch_requests += 1
        log.warning("remote read of %s-%d at %d: %s", tgt.topic, tgt.partition, tgt.offset, exc)
        pr.error_code = ErrorCode.KAFKA_STORAGE_ERROR
        return 0
    if data:
        pr.records = data
        pr.aborted_transactions = aborted
        ts.bytes_out += len(data)
    return len(data)


def _answer_consumer(
    stats: FetchStats, tgt: FetchPartition, pr: PartitionReadResult, part: Partition
) -> bool:
    """Count a consumer's fetch of the partition (per partition, KIP-392); True when it is answered
    with a preferred read replica instead of records (offsets as the leader knows them)."""
    key = part.key
    if tgt.preferred < 0:
        fetches = stats.consumer_fetches
        fetches[key] = fetches.get(key, 0) + 1
        return False
    redirects = stats.preferred_replica_redirects
    redirects[key] = redirects.get(key, 0) + 1
    pr.high_watermark = part.high_watermark
    pr.last_stable_offset = part.last_stable_offset
    pr.log_start_offset = part.log_start_offset
    pr.preferred_read_replica = tgt.preferred
    return True
