"""The consumer's Fetcher: pipelined Fetch requests per leader on the I/O thread (one in flight per node,
raw record blobs buffered ahead), record decoding on the polling thread, and ListOffsets lookups.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import struct
import time
from typing import Any

from kafkalite.client.errors import KafkaConnectionError, KafkaTimeoutError, NoBrokersAvailable
from kafkalite.client.network import NetworkClient, retrieve_auth_error
from kafkalite.client.structs import ConsumerRecord, TopicPartition
from kafkalite.client.subscription import SubscriptionState
from kafkalite.filters import CompiledFilter, compile_filter, select_records
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.exceptions import DecodeError
from kafkalite.protocol.messages.fetch import FetchRequest
from kafkalite.protocol.messages.offsets import ListOffsetsRequest
from kafkalite.records.batch import RecordBatch, iter_batches
from kafkalite.records.control import ControlRecordType, control_type_of

log = logging.getLogger("kafkalite.client.consumer")
FETCH = 1
LIST_OFFSETS = 2
_Q = struct.Struct(">q")
_I = struct.Struct(">i")
MAX_BUFFERED = 2  # completed fetches held per partition (the pipeline depth)
_LEADER_ERRORS = {
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.REPLICA_NOT_AVAILABLE,
}


def next_offset_of(blob: bytes) -> tuple[int, int]:
    """(offset after the last complete batch, bytes of complete batches) of a fetched records blob."""
    pos = 0
    end = len(blob)
    nxt = -1
    while pos + 17 <= end:
        size = _I.unpack_from(blob, pos + 8)[0] + 12
        if size < 12 or pos + size > end:
            break
        base = _Q.unpack_from(blob, pos)[0]
        # a legacy message set entry's offset is its last (inner) offset
        nxt = base + _I.unpack_from(blob, pos + 23)[0] + 1 if blob[pos + 16] == 2 else base + 1
        pos += size
    return nxt, pos


def _is_abort(batch: RecordBatch) -> bool:
    """A control batch holding an ABORT marker (a malformed control key counts as not)."""
    for r in batch.records:
        try:
            return control_type_of(r) == ControlRecordType.ABORT
        except DecodeError:
            return False
    return False


class CompletedFetch:
    __slots__ = (
        "tp",
        "fetch_offset",
        "epoch",
        "blob",
        "next_offset",
        "aborted",
        "records",
        "index",
        "filtered",
    )

    def __init__(
        self,
        tp: TopicPartition,
        fetch_offset: int,
        epoch: int,
        blob: bytes,
        nxt: int,
        aborted: Any,
        filtered: bool = False,
    ) -> None:
        self.filtered = filtered  # the broker applied the fetch filter to this blob
        self.tp = tp
        self.fetch_offset = fetch_offset
        self.epoch = epoch
        self.blob = blob
        self.next_offset = nxt
        self.aborted = aborted
        self.records: list[ConsumerRecord] | None = None
        self.index = 0


class Fetcher:
    def __init__(
        self,
        client: NetworkClient,
        subs: SubscriptionState,
        config: dict[str, Any],
        key_deserializer: Any,
        value_deserializer: Any,
    ) -> None:
        self.client = client
        self.subs = subs
        self.min_bytes = int(config["fetch.min.bytes"])
        self.max_bytes = int(config["fetch.max.bytes"])
        self.max_wait_ms = int(config["fetch.max.wait.ms"])
        self.partition_max_bytes = int(config["max.partition.fetch.bytes"])
        isolation = str(config["isolation.level"]).lower()
        if isolation not in ("read_uncommitted", "read_committed"):
            raise ValueError(
                f"isolation.level must be read_uncommitted or read_committed, not {isolation!r}"
            )
        self.read_committed = isolation == "read_committed"
        self.check_crcs = bool(config["check.crcs"])
        self.rack = config.get("client.rack") or ""
        # the fetch filter, compiled here first so a bad expression fails before any fetch (FilterError)
        expr = config.get("filter")
        self.filter: CompiledFilter | None = compile_filter(expr) if expr else None
        self.key_des = key_deserializer
        self.value_des = value_deserializer
        self.completed: collections.deque[CompletedFetch] = collections.deque()
        self._current: CompletedFetch | None = None
        self._inflight: set[int] = set()
        self._tasks: set[asyncio.Future[Any]] = set()
        self._event: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._wake_pending = False
        self.data_ready: Any = None  # threading.Condition set by the consumer
        self.errors: collections.deque[BaseException] = collections.deque()

    # -- I/O thread
    def start(self) -> None:
        self.client.io.call_soon(self._start)

    def _start(self) -> None:
        self._event = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._run())

    def wakeup(self) -> None:
        if not self._wake_pending:
            self._wake_pending = True
            self.client.io.call_soon(self._set)

    def _set(self) -> None:
        self._wake_pending = False
        if self._event is not None:
            self._event.set()

    async def _run(self) -> None:
        assert self._event is not None
        md = self.client.metadata
        while True:
            self._event.clear()
            try:
                if md.needs_update():
                    self._spawn(self.client.ensure_metadata())
                for node, parts in self._fetchable_by_node().items():
                    if node in self._inflight:
                        continue
                    self._inflight.add(node)
                    self._spawn(self._fetch(node, parts))
            except Exception:
                log.exception("fetcher iteration failed")
            try:
                await asyncio.wait_for(self._event.wait(), 0.2)
            except TimeoutError:
                pass

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(retrieve_auth_error)

    def _fetchable_by_node(self) -> dict[int, list[tuple[TopicPartition, int, int]]]:
        md = self.client.metadata
        out: dict[int, list[tuple[TopicPartition, int, int]]] = {}
        unknown = False
        for tp, st in list(self.subs.assignment.items()):
            if not st.fetchable or st.buffered >= MAX_BUFFERED:
                continue
            leader = md.leader_for(tp.topic, tp.partition)
            if leader < 0:
                unknown = True
                continue
            assert st.fetch_offset is not None
            out.setdefault(leader, []).append((tp, st.fetch_offset, st.epoch))
        if unknown:
            md.add_topics(*{tp.topic for tp in self.subs.assignment})
            md.request_update()
        return out

    async def _fetch(self, node: int, parts: list[tuple[TopicPartition, int, int]]) -> None:
        try:
            await self._fetch_inner(node, parts)
        except (KafkaConnectionError, KafkaTimeoutError, NoBrokersAvailable) as exc:
            log.debug("fetch from node %s failed: %s", node, exc)
            self.client.metadata.request_update()
            await asyncio.sleep(0.05)
        except Exception as exc:
            log.exception("fetch from node %s failed", node)
            self.errors.append(exc)
            await asyncio.sleep(0.1)
        finally:
            self._inflight.discard(node)
            self._set()

    async def _fetch_inner(self, node: int, parts: list[tuple[TopicPartition, int, int]]) -> None:
        conn = await self.client.connection(node)
        version = conn.version(FETCH, 12)
        req_cls = FetchRequest
        by_topic: dict[str, list[Any]] = {}
        epochs: dict[TopicPartition, tuple[int, int]] = {}
        for tp, offset, epoch in parts:
            epochs[tp] = (offset, epoch)
            by_topic.setdefault(tp.topic, []).append(
                req_cls.FetchTopic.FetchPartition(
                    partition=tp.partition,
                    fetch_offset=offset,
                    partition_max_bytes=self.partition_max_bytes,
                )
            )
        req = req_cls(
            replica_id=-1,
            max_wait_ms=self.max_wait_ms,
            min_bytes=self.min_bytes,
            max_bytes=self.max_bytes,
            isolation_level=1 if self.read_committed else 0,
            session_id=0,
            session_epoch=-1,
            topics=[req_cls.FetchTopic(topic=t, partitions=ps) for t, ps in by_topic.items()],
            forgotten_topics_data=[],
            rack_id=self.rack,
            filter=self.filter.expression if self.filter is not None else None,
        )
        resp = await conn.send(
            req, version=version, timeout=self.max_wait_ms / 1000 + self.client.request_timeout
        )
        if resp.error_code:
            raise KafkaError(resp.error_code, resp.filter_error or "fetch")
        filtered = resp.filtered and self.filter is not None
        got = False
        subs = self.subs
        for t in resp.responses:
            for p in t.partitions:
                tp = TopicPartition(t.topic, p.partition_index)
                sent = epochs.get(tp)
                st = subs.assignment.get(tp)
                if sent is None or st is None or st.epoch != sent[1]:
                    continue  # unassigned or seeked meanwhile: stale
                code = p.error_code
                if code:
                    self._partition_error(tp, code)
                    continue
                st.high_watermark = p.high_watermark
                st.last_stable_offset = p.last_stable_offset
                st.log_start_offset = p.log_start_offset
                blob = p.records
                if not blob:
                    continue
                nxt, _complete = next_offset_of(blob)
                if nxt < 0:
                    log.warning(
                        "%s: a batch at offset %d is larger than max.partition.fetch.bytes (%d)",
                        tp,
                        sent[0],
                        self.partition_max_bytes,
                    )
                    continue
                aborted = p.aborted_transactions if self.read_committed else None
                with subs.lock:
                    if st.epoch != sent[1]:
                        continue
                    st.fetch_offset = nxt
                    st.buffered += 1
                    self.completed.append(
                        CompletedFetch(tp, sent[0], sent[1], blob, nxt, aborted, filtered)
                    )
                got = True
        if got and self.data_ready is not None:
            with self.data_ready:
                self.data_ready.notify_all()

    def _partition_error(self, tp: TopicPartition, code: int) -> None:
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            policy = self.subs.default_reset
            if policy == "none":
                self.errors.append(
                    KafkaError(code, f"{tp}: offset out of range, auto.offset.reset=none")
                )
                self.subs.request_reset(tp, -3)  # parked until the user seeks
            else:
                self.subs.request_reset(tp, -2 if policy == "earliest" else -1)
            if self.data_ready is not None:
                with self.data_ready:
                    self.data_ready.notify_all()
        elif code in _LEADER_ERRORS:
            self.client.metadata.request_update()
        else:
            self.errors.append(KafkaError(code, f"fetch {tp}"))

    # -- polling thread
    def has_buffered(self) -> bool:
        return self._current is not None or bool(self.completed)

    def fetched_records(self, max_records: int) -> dict[TopicPartition, list[ConsumerRecord]]:
        out: dict[TopicPartition, list[ConsumerRecord]] = {}
        left = max_records
        subs = self.subs
        freed = False
        while left > 0:
            cf = self._current
            if cf is None:
                if not self.completed:
                    break
                cf = self.completed.popleft()
                st = subs.assignment.get(cf.tp)
                if st is None or st.epoch != cf.epoch:
                    continue
                if st.paused or st.position != cf.fetch_offset:
                    with subs.lock:  # refetch from the position once resumed
                        st.fetch_offset = st.position
                        st.epoch += 1
                        st.buffered = 0
                    freed = True
                    continue
                try:
                    cf.records = self._decode(cf, st.position)
                except Exception as exc:
                    with subs.lock:
                        st.buffered = max(0, st.buffered - 1)
                    raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"{cf.tp}: {exc}") from exc
                self._current = cf
            st = subs.assignment.get(cf.tp)
            if st is None or st.epoch != cf.epoch or st.paused:
                self._current = None
                if st is not None and st.epoch == cf.epoch:
                    with subs.lock:
                        st.fetch_offset = st.position
                        st.epoch += 1
                        st.buffered = 0
                freed = True
                continue
            recs = cf.records
            assert recs is not None
            i = cf.index
            take = recs[i : i + left] if i or len(recs) > left else recs
            if take:
                got = out.get(cf.tp)
                if got is None:
                    out[cf.tp] = take
                else:
                    got.extend(take)
                left -= len(take)
            cf.index = i + len(take)
            if cf.index >= len(recs):
                st.position = cf.next_offset
                with subs.lock:
                    if st.epoch == cf.epoch:
                        st.buffered = max(0, st.buffered - 1)
                self._current = None
                freed = True
            else:
                st.position = take[-1].offset + 1
        if freed:
            self.wakeup()
        return out

    def _decode(self, cf: CompletedFetch, position: int | None) -> list[ConsumerRecord]:
        topic, partition = cf.tp
        kd = self.key_des
        vd = self.value_des
        out: list[ConsumerRecord] = []
        extend = out.extend
        start = position if position is not None else -1
        # read_committed, as Kafka's consumer: a producer's batches are aborted from the first offset of
        # its aborted transaction (the fetch response lists them) until its ABORT marker
        aborted_pids: set[int] = set()
        flt = self.filter if not cf.filtered else None
        listed = cf.aborted if self.read_committed else None
        pending = sorted(((a.first_offset, a.producer_id) for a in listed or ()), reverse=True)
        for batch in iter_batches(cf.blob, verify_crc=self.check_crcs, allow_truncated_tail=True):
            if pending:
                while pending and pending[-1][0] <= batch.last_offset:
                    aborted_pids.add(pending.pop()[1])
            if batch.is_control:  # never handed to the user; the position still moves past it
                if aborted_pids and batch.producer_id in aborted_pids and _is_abort(batch):
                    aborted_pids.discard(batch.producer_id)
                continue
            if aborted_pids and batch.is_transactional and batch.producer_id in aborted_pids:
                continue
            tt = batch.timestamp_type
            recs = batch.records
            if recs and recs[0].offset < start:
                recs = [r for r in recs if r.offset >= start]
            if flt is not None:  # the broker did not filter: the same selection, here
                recs = select_records(flt, recs)
            if kd is None and vd is None:
                extend(
                    [
                        ConsumerRecord(
                            topic, partition, r.offset, r.timestamp, tt, r.key, r.value, r.headers
                        )
                        for r in recs
                    ]
                )
            else:
                extend(
                    [
                        ConsumerRecord(
                            topic,
                            partition,
                            r.offset,
                            r.timestamp,
                            tt,
                            r.key if kd is None else kd(topic, r.key),
                            r.value if vd is None else vd(topic, r.value),
                            r.headers,
                        )
                        for r in recs
                    ]
                )
        return out

    # -- offsets lookups (coroutines for the I/O loop)
    async def list_offsets(
        self, timestamps: dict[TopicPartition, int], timeout: float
    ) -> dict[TopicPartition, tuple[int, int]]:
        """ListOffsets to each leader: {tp: timestamp or -1 latest / -2 earliest} -> {tp: (offset, ts)}."""
        md = self.client.metadata
        deadline = time.monotonic() + timeout
        result: dict[TopicPartition, tuple[int, int]] = {}
        todo = dict(timestamps)
        while todo:
            md.add_topics(*{tp.topic for tp in todo})
            by_node: dict[int, dict[TopicPartition, int]] = {}
            missing = False
            for tp, ts in todo.items():
                leader = md.leader_for(tp.topic, tp.partition)
                if leader < 0:
                    missing = True
                    continue
                by_node.setdefault(leader, {})[tp] = ts
            if missing:
                md.request_update()
            outcomes = await asyncio.gather(
                *(self._list_offsets_node(n, tps) for n, tps in by_node.items()),
                return_exceptions=True,
            )
            for res in outcomes:
                if isinstance(res, BaseException):
                    if not getattr(res, "retriable", False):
                        raise res
                    md.request_update()
                    continue
                for tp, val in res.items():
                    if isinstance(val, KafkaError):
                        if not val.retriable:
                            raise val
                        md.request_update()
                        continue
                    result[tp] = val
                    todo.pop(tp, None)
            if todo:
                if time.monotonic() > deadline:
                    raise KafkaTimeoutError(f"ListOffsets for {sorted(todo)} did not finish")
                await asyncio.sleep(0.05)
                try:
                    await self.client.ensure_metadata(max(0.01, deadline - time.monotonic()))
                except TimeoutError:
                    pass
        return result

    async def _list_offsets_node(
        self, node: int, tps: dict[TopicPartition, int]
    ) -> dict[TopicPartition, Any]:
        conn = await self.client.connection(node)
        version = conn.version(LIST_OFFSETS)
        req_cls = ListOffsetsRequest
        by_topic: dict[str, list[Any]] = {}
        for tp, ts in tps.items():
            by_topic.setdefault(tp.topic, []).append(
                req_cls.ListOffsetsTopic.ListOffsetsPartition(
                    partition_index=tp.partition, timestamp=ts
                )
            )
        req = req_cls(
            replica_id=-1,
            isolation_level=1 if self.read_committed else 0,
            topics=[req_cls.ListOffsetsTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
        )
        resp = await conn.send(req, version=version)
        out: dict[TopicPartition, Any] = {}
        for t in resp.topics:
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition_index)
                if p.error_code:
                    out[tp] = KafkaError(p.error_code, f"ListOffsets {tp}")
                elif version == 0:
                    offs = p.old_style_offsets or [-1]
                    out[tp] = (offs[0], -1)
                else:
                    out[tp] = (p.offset, p.timestamp)
        return out
