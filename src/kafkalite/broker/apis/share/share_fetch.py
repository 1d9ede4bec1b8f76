"""ShareFetch (key 78, KIP-932): in one share session, acknowledge what the member finished and acquire
the next records for it, up to MaxRecords, waiting up to MaxWaitMs when nothing is available.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid

from kafkalite.broker.apis.data._fetch_filter import compile_request_filter
from kafkalite.broker.apis.share import _share, _share_filter
from kafkalite.broker.context import RequestContext, SlicedResponse
from kafkalite.broker.coordinators.share_partitions import Acquired, LoadedSharePartition
from kafkalite.broker.coordinators.share_sessions import ShareSession
from kafkalite.cluster.partition import Partition
from kafkalite.filters import CompiledFilter, FilterStats, NotFilterable
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.exceptions import DecodeError
from kafkalite.protocol.messages.share_groups import (
    SHARE_FETCH,
    ShareFetchRequest,
    ShareFetchResponse,
)
from kafkalite.records.compression import CompressionError

log = logging.getLogger("kafkalite.broker.share")

API = SHARE_FETCH
E = ErrorCode
_Topic = ShareFetchResponse.ShareFetchableTopicResponse
_Part = _Topic.PartitionData
_Acq = _Part.AcquiredRecords
_Node = ShareFetchResponse.NodeEndpoint

MAX_WAIT_MS = 30000


def _answer(
    code: ErrorCode, message: str | None = None, *, lock_ms: int = 0,
    topics: list[tuple[uuid.UUID, list[_Part]]] | None = None,
    endpoints: list[tuple[int, str, int, str | None]] | None = None,
    filtered: bool = False, filter_error: str | None = None,
) -> ShareFetchResponse:  # fmt: skip
    return ShareFetchResponse(
        throttle_time_ms=0,
        error_code=int(code),
        error_message=message,
        acquisition_lock_timeout_ms=lock_ms,
        responses=[_Topic(topic_id=t, partitions=ps) for t, ps in topics or []],
        node_endpoints=[_Node(node_id=n, host=h, port=p, rack=r) for n, h, p, r in endpoints or []],
        filtered=filtered,
        filter_error=filter_error,
    )


def _part(index: int, leader: tuple[int, int] = (-1, -1)) -> _Part:
    return _Part(
        partition_index=index,
        error_code=0,
        error_message=None,
        acknowledge_error_code=0,
        acknowledge_error_message=None,
        current_leader=_Part.LeaderIdAndEpoch(leader_id=leader[0], leader_epoch=leader[1]),
        records=b"",
        acquired_records=[],
    )


async def handle(
    ctx: RequestContext, request: ShareFetchRequest
) -> ShareFetchResponse | SlicedResponse:
    broker = ctx.broker
    manager = broker.share_partitions
    group_id = request.group_id or ""
    member_id = request.member_id or ""
    epoch = request.share_session_epoch
    settings = _share.settings(ctx, group_id)
    lock_ms = settings.record_lock_duration_ms
    why = _share.invalid(request, fetch=True)
    renew = ctx.api_version >= 2 and request.is_renew_ack
    if why is None and ctx.api_version >= 2:
        if request.share_acquire_mode not in (0, 1):
            why = f"ShareAcquireMode {request.share_acquire_mode} is not 0 or 1"
        elif renew and (request.max_records or request.max_bytes or request.max_wait_ms):
            why = "A ShareFetch that renews locks (IsRenewAck) must not fetch: MaxRecords, "
            why += "MaxBytes and MaxWaitMs must be 0."
    if why is not None:
        return _answer(E.INVALID_REQUEST, why, lock_ms=lock_ms)
    flt: CompiledFilter | None = None
    if (
        request.filter is not None
    ):  # kafkalite's tag 10035 (issue 35): checked before anything moves
        flt, why = compile_request_filter(request.filter, ctx.quota_client_id)
        if flt is None:
            return _answer(E.INVALID_REQUEST, why, lock_ms=lock_ms, filter_error=why)
    denied = _share.group_denied(ctx, group_id)
    if denied is not None:
        return _answer(denied, lock_ms=lock_ms)
    # the session first: a bad epoch changes nothing
    if epoch == 0:
        session: ShareSession | None = manager.sessions.open(group_id, member_id)
    else:
        session, code, message = manager.sessions.existing(group_id, member_id, epoch)
    if session is None:
        return _answer(code, message, lock_ms=lock_ms)
    out = _share.Responses(ctx, _part)
    requested: list[tuple[uuid.UUID, int]] = []
    for t in request.topics:
        for p in t.partitions:
            requested.append((t.topic_id, p.partition_index))
            if p.acknowledgement_batches:
                code, message = await _share.acknowledge(
                    ctx, group_id, member_id, t.topic_id, p, renew
                )
                pr = out.part(t.topic_id, p.partition_index)
                pr.acknowledge_error_code = int(code)
                pr.acknowledge_error_message = message
    for ft in request.forgotten_topics_data:
        for index in ft.partitions:
            session.partitions.pop((ft.topic_id, index), None)
    if epoch == -1:  # the member is done on this broker: what it holds goes back
        manager.sessions.close(group_id, member_id)
        await manager.release_session(session)
        return _answer(E.NO_ERROR, lock_ms=lock_ms, topics=out.topics(), endpoints=out.endpoints())
    for key in requested:
        session.partitions[key] = None
    budget = request.max_records if ctx.api_version >= 1 else 500
    sliced = SlicedResponse(None)  # acquired batches go out from the log files as they are
    filtering = _Filtering(flt) if flt is not None else None
    if budget > 0 and session.partitions and not renew:
        await _fetch(ctx, request, session, out, budget, sliced, filtering)
    answer = _answer(
        E.NO_ERROR, lock_ms=lock_ms, topics=out.topics(), endpoints=out.endpoints(),
        filtered=filtering is not None and filtering.all_filtered,
    )  # fmt: skip
    if not sliced.regions:
        return answer
    sliced.response = answer
    return sliced


class _Filtering:
    """A filtered ShareFetch's filter, and whether every acquisition could be filtered."""

    def __init__(self, flt: CompiledFilter) -> None:
        self.flt = flt
        self.all_filtered = True


async def _filter_acquired(
    ctx: RequestContext, lp: LoadedSharePartition, member_id: str, res: Acquired,
    filtering: _Filtering,
) -> Acquired:  # fmt: skip
    """`res` with only the records the filter selects; the member's other acquired offsets are
    archived for it at once (persisted before the answer), so they are never delivered to anyone.
    Batches that cannot be rewritten (legacy message sets, a bad batch) go unfiltered and the answer
    does not claim `filtered`."""
    raw = res.region.read_bytes() if res.region is not None else res.records
    stats = FilterStats()
    try:
        split = _share_filter.split_acquired(raw, filtering.flt, res.ranges, stats)
    except (NotFilterable, DecodeError, CompressionError):
        filtering.all_filtered = False
        return res
    if split.archived:
        code, message = await ctx.broker.share_partitions.acknowledge(
            lp, member_id, _share_filter.archive_batches(split.archived)
        )
        if code != E.NO_ERROR:  # the locks stay; they expire and the records come back
            log.warning("share fetch filter could not archive on %s: %s", lp.topic, message)
    c = ctx.broker.stats.fetch_filter
    c.bytes_scanned += len(raw)
    c.bytes_sent += len(split.records)
    c.batches_kept += stats.batches_kept
    c.batches_dropped += stats.batches_dropped
    c.batches_decoded += stats.batches_decoded
    return Acquired(split.records, split.delivered)


async def _fetch(
    ctx: RequestContext,
    request: ShareFetchRequest,
    session: ShareSession,
    out: _share.Responses[_Part],
    budget: int,
    sliced: SlicedResponse,
    filtering: _Filtering | None = None,
) -> None:
    """Acquire up to `budget` records over the session's partitions (rotating, so no partition
    starves); when none is available, wait for produced or released records. With a filter, only
    selected records count and are answered; the loop goes on past non-matching ones until the
    wait ends."""
    broker = ctx.broker
    manager = broker.share_partitions
    group_id, member_id = session.group_id, session.member_id
    deadline = time.monotonic() + min(max(request.max_wait_ms, 0), MAX_WAIT_MS) / 1000
    max_bytes = request.max_bytes if request.max_bytes > 0 else 0x7FFFFFFF
    keys = list(session.partitions)
    # ShareAcquireMode 0 (and before v2): MaxRecords is a soft limit, to the end of a batch
    batch_optimized = ctx.api_version < 2 or request.share_acquire_mode == 0
    parked = manager.parked
    yielded = False
    while True:
        targets = []
        for topic_id, index in keys:
            found = _share.resolve(ctx, topic_id, index)
            if isinstance(found, ErrorCode):
                out.part(topic_id, index).error_code = int(found)
                continue
            topic, part = found
            lp = await manager.get(group_id, topic_id, topic, part)
            if isinstance(lp, ErrorCode):
                out.part(topic_id, index).error_code = int(lp)
                continue
            targets.append((topic_id, index, topic, part, lp))
        if not yielded and any(parked.get(t[4].key) for t in targets):
            # share fetches of other members wait on these partitions (woken by this request's
            # acknowledgements, say): they go first, so that a member that acknowledges and
            # fetches in one request cannot take every batch while the others starve
            yielded = True
            await asyncio.sleep(0)
        got = 0
        scanned = 0
        for topic_id, index, _topic, part, lp in targets:
            if budget <= 0 or max_bytes <= 0:
                break
            res = await manager.acquire(
                lp, part, member_id, budget, max_bytes, batch_optimized=batch_optimized
            )
            if isinstance(res, ErrorCode):
                out.part(topic_id, index).error_code = int(res)
                continue
            if filtering is not None and res.ranges:
                max_bytes -= res.size  # what was scanned, so one answer reads a bounded amount
                scanned += 1
                res = await _filter_acquired(ctx, lp, member_id, res, filtering)
                if not res.ranges:
                    continue
                max_bytes += res.size
            if res.ranges:
                pr = out.part(topic_id, index)
                pr.records = (
                    sliced.placeholder(res.region) if res.region is not None else res.records
                )
                pr.acquired_records = [
                    _Acq(
                        first_offset=r.first_offset,
                        last_offset=r.last_offset,
                        delivery_count=r.delivery_count,
                    )
                    for r in res.ranges
                ]
                n = sum(r.last_offset - r.first_offset + 1 for r in res.ranges)
                budget -= n
                got += n
                max_bytes -= res.size
        if got or out.has_errors() or not targets or max_bytes <= 0:
            break  # (MaxBytes spent with nothing got: a filter scanned that much in vain)
        if scanned:  # all filtered out: scan on (as the wait allows), letting others run first
            await asyncio.sleep(0)
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        watch = [(t[2], t[1]) for t in targets]

        def ready(
            targets: list[tuple[uuid.UUID, int, str, Partition, LoadedSharePartition]] = targets,
        ) -> bool:
            return any(manager.acquirable(t[4], t[3]) for t in targets)

        if not ready():
            waiting = [t[4].key for t in targets]
            for key in waiting:
                parked[key] = parked.get(key, 0) + 1
            try:
                await broker.delayed.wait_until(watch, ready, min(remaining, 1.0))
            finally:
                for key in waiting:
                    left = parked[key] - 1
                    if left:
                        parked[key] = left
                    else:
                        del parked[key]
            if ctx.connection.closed:
                return
        keys = keys[1:] + keys[:1]
