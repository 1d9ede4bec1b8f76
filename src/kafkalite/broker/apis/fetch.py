"""Fetch (key 1): consumers read below the high watermark (read_committed: below the last stable offset,
with the aborted transactions of the range), follower brokers up to the log end (their fetch offset moves
the leader's high watermark); long-polls until min_bytes or max_wait. KIP-392: v11+ consumers may read
from a follower (up to its high watermark), and a leader with a replica selector names their replica.

Data leaves as file regions (sendfile) for v4+; v0-3 get message sets down-converted to magic 0/1.
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

from kafkalite.broker.context import RequestContext, SlicedResponse
from kafkalite.broker.fastpath import (
    FetchPartitionResult,
    FetchResult,
    FetchTopicResult,
    decode_fetch,
    encode_fetch_response,
)
from kafkalite.broker.stats import BrokerStats
from kafkalite.cluster.errors import NotLeaderOrFollower, ReplicaError, UnknownTopicOrPartition
from kafkalite.cluster.partition import Partition
from kafkalite.cluster.replica_manager import ReplicaManager
from kafkalite.cluster.replica_selector import NO_PREFERRED_REPLICA, preferred_read_replica
from kafkalite.cluster.replication_quota import ReplicationQuota, leader_throttled
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.fetch import FETCH, FetchResponse
from kafkalite.security.acl import AclOperation, ResourceType

API = FETCH
log = logging.getLogger("kafkalite.broker.fetch")

_SchemaTopic = FetchResponse.FetchableTopicResponse
_SchemaPart = _SchemaTopic.PartitionData
ZERO_UUID = uuid.UUID(int=0)
MAX_WAIT_MS = 30_000


class _Target:
    __slots__ = (
        "topic",
        "topic_id",
        "partition",
        "offset",
        "max_bytes",
        "part",
        "error",
        "epoch",
        "follower",
        "served_epoch",
        "preferred",
    )

    def __init__(
        self,
        topic: str | None,
        topic_id: Any,
        partition: int,
        offset: int,
        max_bytes: int,
        epoch: int,
    ) -> None:
        self.topic = topic
        self.topic_id = topic_id
        self.partition = partition
        self.offset = offset
        self.max_bytes = max_bytes
        self.epoch = epoch
        self.part: Partition | None = None
        self.error = ErrorCode.NO_ERROR
        # KIP-392: read from this broker's follower replica (at `served_epoch`), or answered with
        # a preferred read replica elsewhere (a broker id; -1 = none)
        self.follower = False
        self.served_epoch = -1
        self.preferred = NO_PREFERRED_REPLICA


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


def _serving(rm: ReplicaManager, tgt: _Target, part: Partition) -> bool:
    """Whether this broker may still answer the partition: as its leader, or as the follower it was
    (same leader epoch, still hosted) when the fetch arrived."""
    if not tgt.follower:
        return part.is_leader
    return part.leader_epoch == tgt.served_epoch and rm.get_partition(*part.key) is part


def _resolve(
    ctx: RequestContext, topics: list[Any], replica_id: int, follower_ok: bool = False
) -> list[list[_Target]]:
    """Each requested partition with the hosted Partition to read, or the error to answer.
    Consumers read from the leader, or (`follower_ok`: Fetch v11+, KIP-392) from a follower too;
    a follower broker (replica_id >= 0) from its leader."""
    broker = ctx.broker
    cache = broker.metadata_cache
    rm = broker.replica_manager
    by_id = ctx.api_version >= 13
    out: list[list[_Target]] = []
    # ACLs (one attribute check when off): a follower needs CLUSTER_ACTION, a consumer READ per topic
    checked = broker.authorizer is not None
    follower_denied = (
        checked and replica_id >= 0 and not ctx.authorize_cluster(AclOperation.CLUSTER_ACTION)
    )
    for t in topics:
        if by_id:
            info = cache.topic_by_id(t.topic_id)
            name = info.name if info is not None else None
        else:
            name = t.topic
            info = cache.topic(name)
        denied = checked and (
            follower_denied
            or (
                replica_id < 0
                and name is not None
                and not ctx.authorize(AclOperation.READ, ResourceType.TOPIC, name)
            )
        )
        group: list[_Target] = []
        for p in t.partitions:
            tgt = _Target(
                name,
                t.topic_id if by_id else None,
                p.partition,
                p.fetch_offset,
                p.partition_max_bytes,
                p.current_leader_epoch,
            )
            if denied:
                tgt.error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif info is None:
                tgt.error = (
                    ErrorCode.UNKNOWN_TOPIC_ID if by_id else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                )
            elif info.partition(p.partition) is None:
                tgt.error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                try:
                    if follower_ok:
                        part = _consumer_replica(rm, info.name, p.partition, p.current_leader_epoch)
                        tgt.follower = not part.is_leader
                        tgt.served_epoch = part.leader_epoch
                    else:
                        part = rm.leader_partition(info.name, p.partition, p.current_leader_epoch)
                    if replica_id >= 0:
                        rm.update_follower_fetch_state(
                            part, replica_id, p.fetch_offset, p.log_start_offset
                        )
                    tgt.part = part
                except ReplicaError as exc:
                    tgt.error = (
                        ErrorCode.NOT_LEADER_OR_FOLLOWER
                        if isinstance(exc, UnknownTopicOrPartition)
                        else exc.error_code
                    )
            group.append(tgt)
        out.append(group)
    return out


FOLLOWER = -1  # the fetch "isolation" of a follower broker: up to the log end
READ_UNCOMMITTED = 0
READ_COMMITTED = 1


def _limit(part: Partition, isolation: int) -> int:
    """Followers read up to the log end; consumers below the high watermark, or the last stable
    offset when read_committed."""
    lg = part.log
    if isolation == FOLLOWER:
        return lg.log_end_offset
    if isolation == READ_COMMITTED:
        return lg.last_stable_offset
    return lg.high_watermark


def _redirect(ctx: RequestContext, targets: list[_Target], client_rack: str) -> None:
    """KIP-392 on the leader: the replica selector may send a consumer in `client_rack` to an in-sync
    follower of its rack; such partitions are answered at once, without records."""
    broker = ctx.broker
    selector = broker.replica_selector
    cache = broker.metadata_cache
    now = broker.replica_manager.clock()

    def rack_of(broker_id: int) -> str | None:
        ep = cache.broker(broker_id)
        return ep.rack if ep is not None else None

    for tgt in targets:
        part = tgt.part
        if part is not None and not tgt.error and part.is_leader:
            tgt.preferred = preferred_read_replica(
                selector, part, client_rack, tgt.offset, rack_of, cache.is_alive, now
            )


def _has_data(
    targets: list[_Target],
    min_bytes: int,
    isolation: int,
    rm: ReplicaManager | None = None,
    throttle: _LeaderThrottle | None = None,
) -> bool:
    """Whether the partitions hold at least `min_bytes` new bytes (or any error to report); a
    follower's partitions held back by the leader's replication throttle count for nothing."""
    total = 0
    for tgt in targets:
        part = tgt.part
        if part is None or tgt.error or tgt.preferred >= 0:
            return True
        if not part.is_leader and not (tgt.follower and rm is not None and _serving(rm, tgt, part)):
            return True
        if throttle is not None and throttle.holds_back(part):
            continue
        lg = part.log
        hw = _limit(part, isolation)
        if tgt.offset > hw or tgt.offset < lg.log_start_offset:
            if tgt.follower and hw < tgt.offset <= lg.log_end_offset:
                continue  # KIP-392: the follower holds it but has not learnt the HW yet: wait
            return True  # out of range: answer now
        if tgt.offset < hw:
            if min_bytes <= 1:
                return True
            try:
                info = lg.read(tgt.offset, tgt.max_bytes, max_offset=hw, min_one_message=True)
            except Exception:
                return True
            if info.slice is not None:
                total += info.slice.length
                if total >= min_bytes:
                    return True
    return False


class _LeaderThrottle:
    """leader.replication.throttled.rate applied to one follower's fetch (Kafka's
    shouldLeaderThrottle): a partition listed in leader.replication.throttled.replicas for this
    broker sends that follower nothing while it is out of the ISR and the rate is over the quota."""

    __slots__ = ("broker_id", "quota", "replica_id")

    def __init__(self, quota: ReplicationQuota, broker_id: int, replica_id: int) -> None:
        self.quota = quota
        self.broker_id = broker_id
        self.replica_id = replica_id

    def throttled(self, part: Partition) -> bool:
        return leader_throttled(part.log.config, part.partition, self.broker_id)

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


async def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    broker = ctx.broker
    session = None
    full = True
    if version >= 7:
        session, full, err = broker.fetch_sessions.begin(request, version >= 13)
        if err:
            return FetchResult([], error_code=err)
    topics = request.topics if session is None or full else session.as_topics()
    replica_id = request.replica_id if version <= 14 else -1
    if replica_id >= 0:
        isolation = FOLLOWER
        ctx.quota_exempt = True
    else:
        isolation = READ_COMMITTED if version >= 4 and request.isolation_level == 1 else 0
    # KIP-392: a v11+ consumer fetch may be read from a follower, and sent to one by the leader
    follower_ok = replica_id < 0 and version >= 11
    rm = broker.replica_manager
    groups = _resolve(ctx, topics, replica_id, follower_ok)
    flat = [t for g in groups for t in g]
    throttle = None
    if replica_id >= 0:
        throttle = _LeaderThrottle(broker.replication_quotas.leader, broker.broker_id, replica_id)
    if follower_ok and request.rack_id and broker.replica_selector is not None:
        _redirect(ctx, flat, request.rack_id)
    max_wait = min(max(request.max_wait_ms, 0), MAX_WAIT_MS)
    if max_wait > 0 and flat and not _has_data(flat, request.min_bytes, isolation, rm, throttle):
        keys = [(t.topic, t.partition) for t in flat]
        parked = time.monotonic_ns()
        await broker.delayed.wait_until(
            keys,
            lambda: _has_data(flat, request.min_bytes, isolation, rm, throttle),
            max_wait / 1000,
        )
        ctx.parked_ns += time.monotonic_ns() - parked
        if ctx.connection.closed:
            return None
    sliced = SlicedResponse(None)
    budget = request.max_bytes if version >= 3 else 0x7FFFFFFF
    if budget <= 0:
        budget = 0x7FFFFFFF
    if broker.client_quotas.active and replica_id < 0:
        # a consumer under a byte-rate quota gets at most one window's allowance per answer
        cap = broker.client_quotas.fetch_max_bytes(ctx.principal.name, ctx.quota_client_id)
        if cap is not None:
            budget = min(budget, cap)
    first = True
    topics_out = []
    stats = broker.stats
    topic_stats = stats.topics
    down_magic = 0 if version <= 1 else 1
    for group in groups:
        parts_out: list[Any] = []
        t0 = group[0] if group else None
        topics_out.append(
            FetchTopicResult(
                t0.topic if t0 is not None and t0.topic is not None else "",
                t0.topic_id if t0 is not None and t0.topic_id is not None else ZERO_UUID,
                parts_out,
            )
        )
        for tgt in group:
            pr = FetchPartitionResult(tgt.partition, tgt.error)
            parts_out.append(pr)
            part = tgt.part
            if tgt.error or part is None:
                # an error answer carries an empty record set, never a null one (as Kafka):
                # librdkafka cannot parse a null set and would retry the same fetch forever
                pr.records = b""
                continue
            ts = topic_stats.get(part.topic) or stats.topic(part.topic)
            ts.fetch_requests += 1
            if not _serving(rm, tgt, part):  # leadership moved while the fetch waited
                pr.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
                pr.records = b""
                continue
            if isolation != FOLLOWER and _answer_consumer(stats, tgt, pr, part):
                continue  # KIP-392: sent to its preferred read replica
            lg = part.log
            hw = lg.high_watermark
            limit_offset = _limit(part, isolation)
            pr.high_watermark = hw
            pr.last_stable_offset = lg.last_stable_offset
            pr.log_start_offset = lg.log_start_offset
            limit = min(tgt.max_bytes, budget)
            if limit <= 0 and not first:
                continue
            if throttle is not None and throttle.holds_back(part):
                continue  # the answer carries the offsets, no records
            try:
                info = lg.read(
                    tgt.offset, max(limit, 0), max_offset=limit_offset, min_one_message=first
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
                    for a in lg.collect_aborted_transactions(tgt.offset, limit_offset)
                ]
            first = False
            budget -= region.length
            if isolation == FOLLOWER:
                ts.replication_bytes_out += region.length
                if throttle is not None:
                    throttle.record(part, region.length)
            else:
                ts.bytes_out += region.length
            if version >= 4:
                pr.records = sliced.placeholder(region)
            else:
                try:
                    pr.records = _downconvert(region.read_bytes(), down_magic)
                except Exception as exc:
                    code = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
                    if "compression" not in type(exc).__name__.lower():
                        code = ErrorCode.CORRUPT_MESSAGE
                        log.warning(
                            "down-conversion of %s-%d failed: %s", tgt.topic, tgt.partition, exc
                        )
                    pr.error_code = code
                    pr.records = b""
    if session is not None:
        topics_out = session.filter_response(topics_out, full=full)
    response = FetchResult(topics_out)
    if session is not None:
        response.session_id = session.id
    if not sliced.regions:
        return response
    sliced.response = response
    return sliced


def _answer_consumer(
    stats: BrokerStats, tgt: _Target, pr: FetchPartitionResult, part: Partition
) -> bool:
    """Count a consumer's fetch of the partition (per partition, KIP-392); True when it is answered
    with a preferred read replica instead of records (offsets as the leader knows them)."""
    key = part.key
    if tgt.preferred < 0:
        stats.consumer_fetches[key] = stats.consumer_fetches.get(key, 0) + 1
        return False
    stats.preferred_replica_redirects[key] = stats.preferred_replica_redirects.get(key, 0) + 1
    lg = part.log
    pr.high_watermark = lg.high_watermark
    pr.last_stable_offset = lg.last_stable_offset
    pr.log_start_offset = lg.log_start_offset
    pr.preferred_read_replica = tgt.preferred
    pr.records = b""  # empty, not null, as Kafka sends (librdkafka skips a null set as size -1)
    return True


def _downconvert(blob: bytes, magic: int) -> bytes:
    from kafkalite.records.legacy import downconvert

    return downconvert(blob, magic)


def decode_request(buf: bytes, pos: int, version: int) -> Any:
    """Hot-path decoder for v4-16; older versions go through the schema."""
    return decode_fetch(buf, pos, version) if version >= 4 else None


def encode_response(out: bytearray, result: FetchResult, version: int) -> None:
    if version >= 4:
        encode_fetch_response(out, result, version)
    else:
        to_schema(result).encode_into(out, version)


def to_schema(result: FetchResult) -> Any:
    return FetchResponse(
        throttle_time_ms=result.throttle_time_ms,
        error_code=result.error_code,
        session_id=result.session_id,
        responses=[
            _SchemaTopic(
                topic=t.topic,
                topic_id=t.topic_id,
                partitions=[
                    _SchemaPart(
                        partition_index=p.partition_index,
                        error_code=int(p.error_code),
                        high_watermark=p.high_watermark,
                        last_stable_offset=p.last_stable_offset,
                        log_start_offset=p.log_start_offset,
                        aborted_transactions=None
                        if p.aborted_transactions is None
                        else [
                            _SchemaPart.AbortedTransaction(producer_id=pid, first_offset=first)
                            for pid, first in p.aborted_transactions
                        ],
                        preferred_read_replica=p.preferred_read_replica,
                        records=p.records,
                    )
                    for p in t.partitions
                ],
            )
            for t in result.responses
        ],
    )
