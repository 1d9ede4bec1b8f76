"""ShareConsumer (KIP-932): a share-group member that heartbeats with ShareGroupHeartbeat, acquires records
with ShareFetch in one share session per leader, and acknowledges them implicitly or explicitly.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import logging
import threading
import time
import uuid
from collections.abc import Iterable
from typing import Any

from kafkalite.client.config import COMMON, make_config
from kafkalite.client.errors import IllegalStateError, KafkaConnectionError, KafkaTimeoutError
from kafkalite.client.find_coordinator import GROUP_KEY, find_coordinator
from kafkalite.client.io_thread import IOThread
from kafkalite.client.network import NetworkClient
from kafkalite.client.serialization import make_deserializer
from kafkalite.client.share_requests import (
    FINAL_EPOCH,
    GAP,
    AcknowledgeType,
    Acks,
    PartitionKey,
    ShareConsumerRecord,
    ShareSession,
    acquired_records,
    share_acknowledge_request,
    share_fetch_request,
)
from kafkalite.client.structs import TopicPartition
from kafkalite.filters import CompiledFilter, compile_filter
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.messages.share_groups import ShareGroupHeartbeatRequest

log = logging.getLogger("kafkalite.client.share_consumer")

SHARE_GROUP_HEARTBEAT, SHARE_FETCH, SHARE_ACKNOWLEDGE = 76, 78, 79

SHARE_CONSUMER: dict[str, Any] = {
    **COMMON,
    "group.id": None,
    "share.acknowledgement.mode": "implicit",
    "max.poll.records": 500,
    "fetch.min.bytes": 1,
    "fetch.max.bytes": 52428800,
    "fetch.max.wait.ms": 500,
    "check.crcs": False,
    "key.deserializer": None,
    "value.deserializer": None,
    "default.api.timeout.ms": 60000,
    "allow.auto.create.topics": True,
    # kafkalite's fetch filter (issue 35): the broker delivers only matching records and archives
    # the rest; against a broker that does not filter, the same selection is made here
    "filter": None,
}

_SESSION_LOST = {ErrorCode.SHARE_SESSION_NOT_FOUND, ErrorCode.INVALID_SHARE_SESSION_EPOCH}
_REJOIN = {ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_MEMBER_EPOCH}
_COORDINATOR_MOVED = {
    ErrorCode.NOT_COORDINATOR,
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
}


class ShareConsumer:
    """A member of a share group: `ShareConsumer("topic", bootstrap_servers=..., group_id=...)`.

    `share.acknowledgement.mode` is `implicit` (default: what a poll delivered is ACCEPTED by the
    next poll, commit_sync/commit_async or close) or `explicit` (acknowledge every delivered record
    with acknowledge() before the next poll). Not thread-safe, like KafkaConsumer. `filter=` takes a
    fetch-filter expression (docs/fetch-filter.md): it rides on every ShareFetch, the broker delivers
    only matching records and archives the others; when an answer does not say it filtered (another
    broker), the client drops the non-matching records itself and acknowledges them as GAP, which
    archives them the same way. No wakeup(), no renew acknowledgements
    (KIP-1222) and no record-limit acquire mode (ShareFetch v2) yet.
    """

    def __init__(self, *topics: str, config: dict[str, Any] | None = None, **kwargs: Any) -> None:
        self.config = cfg = make_config(SHARE_CONSUMER, config, kwargs)
        if not cfg["group.id"]:
            raise ValueError("a ShareConsumer needs group.id")
        mode = str(cfg["share.acknowledgement.mode"]).lower()
        if mode not in ("implicit", "explicit"):
            raise ValueError(
                f"share.acknowledgement.mode must be implicit or explicit, not {mode!r}"
            )
        self.group_id = str(cfg["group.id"])
        # compiled first, so a bad expression fails before any thread starts (FilterError)
        self._filter = compile_filter(str(cfg["filter"])) if cfg["filter"] else None
        self._explicit = mode == "explicit"
        self._io = IOThread(f"kafkalite-share-consumer-{cfg['client.id']}")
        self._client = NetworkClient(cfg, self._io)
        self._key_des = make_deserializer(cfg["key.deserializer"])
        self._value_des = make_deserializer(cfg["value.deserializer"])
        self._max_poll_records = int(cfg["max.poll.records"])
        self._max_wait_ms = int(cfg["fetch.max.wait.ms"])
        self._api_timeout = int(cfg["default.api.timeout.ms"]) / 1000
        self.member_id = str(uuid.uuid4())
        self.member_epoch = 0
        self._topics: list[str] = []
        self._assignment: set[PartitionKey] = set()
        self._heartbeat_interval = 1.0
        self._coordinator: int | None = None
        self._hb_task: asyncio.Task[None] | None = None
        self._hb_wake: asyncio.Event | None = None
        self._sessions: dict[int, ShareSession] = {}
        # delivered by the last poll and not yet acknowledged: {tp: {offset: record}}
        self._in_flight: dict[TopicPartition, dict[int, ShareConsumerRecord]] = {}
        self._buffered: collections.deque[ShareConsumerRecord] = collections.deque()
        # acknowledged, not yet sent: {tp: {offset: type}}
        self._pending: dict[TopicPartition, dict[int, int]] = {}
        # _pending is filled on the polling thread and sent from the I/O one
        self._lock = threading.Lock()
        self.acknowledgement_errors: dict[TopicPartition, KafkaError] = {}
        self._fatal: KafkaError | None = None  # a heartbeat error poll() raises (not retriable)
        self._closed = False
        self._io.call_soon(self._start_heartbeat)
        if topics:
            self.subscribe(list(topics))

    # -- membership (I/O thread)
    def _start_heartbeat(self) -> None:
        self._hb_wake = asyncio.Event()
        self._hb_task = asyncio.get_running_loop().create_task(self._heartbeat_loop())

    def _wake_heartbeat(self) -> None:
        if self._hb_wake is not None:
            self._hb_wake.set()

    async def _heartbeat_loop(self) -> None:
        assert self._hb_wake is not None
        while True:
            self._hb_wake.clear()
            if self._topics:
                try:
                    await self._heartbeat(self.member_epoch)
                except (KafkaConnectionError, KafkaTimeoutError, KafkaError, OSError) as exc:
                    log.debug("share group heartbeat failed: %s", exc)
                    self._coordinator = None
                except Exception:
                    log.exception("share group heartbeat failed")
            try:
                await asyncio.wait_for(self._hb_wake.wait(), self._heartbeat_interval)
            except TimeoutError:
                pass

    async def _heartbeat(self, epoch: int) -> None:
        if self._coordinator is None:
            self._coordinator = await find_coordinator(self._client, self.group_id, GROUP_KEY)
        conn = await self._client.connection(self._coordinator)
        req = ShareGroupHeartbeatRequest(
            group_id=self.group_id,
            member_id=self.member_id,
            member_epoch=epoch,
            rack_id=self.config.get("client.rack") or None,
            subscribed_topic_names=None if epoch == FINAL_EPOCH else list(self._topics),
        )
        resp = await conn.send(req, version=conn.version(SHARE_GROUP_HEARTBEAT, 1))
        code = resp.error_code
        if code in _COORDINATOR_MOVED:
            self._coordinator = None
            return
        if code in _REJOIN:
            log.info("share group %s: %s, rejoining", self.group_id, ErrorCode(code).name)
            self.member_epoch = 0
            self._assignment = set()
            self._wake_heartbeat()  # rejoin at once, not after an interval
            return
        if code:
            err = KafkaError(code, resp.error_message or f"ShareGroupHeartbeat {self.group_id}")
            if not err.retriable and epoch != FINAL_EPOCH:
                self._fatal = err  # e.g. GROUP_AUTHORIZATION_FAILED: the user must hear of it
            raise err
        if epoch == FINAL_EPOCH:
            return
        if resp.member_id:
            self.member_id = resp.member_id
        self.member_epoch = resp.member_epoch
        if resp.heartbeat_interval_ms > 0:
            self._heartbeat_interval = resp.heartbeat_interval_ms / 1000
        if resp.assignment is not None:
            self._assignment = {
                (tp.topic_id, p) for tp in resp.assignment.topic_partitions for p in tp.partitions
            }
            names = self._topic_names()
            if any(t not in names for t, _p in self._assignment):  # a topic id to learn
                self._client.metadata.request_update()
                await self._client.ensure_metadata(self._api_timeout)

    # -- subscription
    def subscribe(self, topics: Iterable[str]) -> None:
        """Join the share group for these topics (replacing the subscription); empty leaves it."""
        if isinstance(topics, str):
            topics = [topics]
        topics = sorted(set(topics))
        if not topics:
            self.unsubscribe()
            return
        self._topics = topics
        self._client.metadata.set_topics(set(topics))
        self._client.metadata.request_update()
        self._io.call_soon(self._wake_heartbeat)

    def subscription(self) -> set[str]:
        return set(self._topics)

    def unsubscribe(self) -> None:
        topics, self._topics = self._topics, []
        if topics:
            self._io.run(self._leave(self._prepare_commit()), self._api_timeout)
        self._assignment = set()
        self._in_flight = {}
        self._buffered.clear()

    def assignment(self) -> set[TopicPartition]:
        """The partitions the group's assignor gave this member (several members share each one)."""
        names = self._topic_names()
        return {TopicPartition(names[t], p) for t, p in self._assignment if t in names}

    def _topic_names(self) -> dict[uuid.UUID, str]:
        return {
            t.topic_id: name
            for name, t in list(self._client.metadata.topics.items())
            if t.topic_id is not None
        }

    # -- acknowledgement
    def acknowledge(self, record: Any, type: AcknowledgeType = AcknowledgeType.ACCEPT) -> None:
        """Explicit mode: say how this record (delivered by the last poll) was handled."""
        if not self._explicit:
            raise IllegalStateError(
                "acknowledge() needs share.acknowledgement.mode=explicit; in implicit mode the "
                "next poll, commit or close accepts what was delivered"
            )
        ack = AcknowledgeType(type)
        tp = TopicPartition(record.topic, record.partition)
        held = self._in_flight.get(tp)
        if held is None or held.pop(record.offset, None) is None:
            raise IllegalStateError(
                f"{tp} offset {record.offset} was not delivered by the last poll, or is "
                "already acknowledged"
            )
        if not held:
            del self._in_flight[tp]
        with self._lock:
            self._pending.setdefault(tp, {})[record.offset] = int(ack)

    def _acknowledge_delivered(self) -> None:
        """Implicit mode: everything the last poll delivered is ACCEPTED."""
        with self._lock:
            for tp, recs in self._in_flight.items():
                pend = self._pending.setdefault(tp, {})
                for off in recs:
                    pend[off] = int(AcknowledgeType.ACCEPT)
        self._in_flight = {}

    def _take_pending(self) -> dict[TopicPartition, dict[int, int]]:
        with self._lock:
            out, self._pending = self._pending, {}
        return out

    # -- polling
    def poll(self, timeout_ms: float = 0) -> dict[TopicPartition, list[ShareConsumerRecord]]:
        """Records acquired for this member (waiting up to timeout_ms for some); sends the
        acknowledgements made since the last poll on the same ShareFetch."""
        if self._closed:
            raise IllegalStateError("share consumer is closed")
        if not self._topics:
            raise IllegalStateError("share consumer is not subscribed to any topic")
        if self._fatal is not None:
            err, self._fatal = self._fatal, None
            raise err
        if self._explicit:
            left = sum(len(r) for r in self._in_flight.values())
            if left:
                raise IllegalStateError(
                    f"{left} records delivered by the last poll are not acknowledged "
                    "(share.acknowledgement.mode=explicit)"
                )
        else:
            self._acknowledge_delivered()
        if self._buffered:  # acquired by an earlier fetch beyond max.poll.records
            if self._pending:  # acknowledgements do not wait for the next ShareFetch
                self._io.submit(self._send_acks(self._prepare_commit(), final=False))
            return self._deliver()
        deadline = time.monotonic() + max(0.0, timeout_ms) / 1000
        while True:
            wait = max(0.0, deadline - time.monotonic())
            got = self._io.run(
                self._fetch_round(min(self._max_wait_ms, int(wait * 1000))),
                wait + self._client.request_timeout + 1,
            )
            if got:
                for recs in got.values():
                    self._buffered.extend(recs)
                return self._deliver()
            if time.monotonic() >= deadline:
                return {}
            if not self._assignment:
                time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))

    def _deliver(self) -> dict[TopicPartition, list[ShareConsumerRecord]]:
        """Up to max.poll.records of the buffered records; they are the ones to acknowledge next."""
        out: dict[TopicPartition, list[ShareConsumerRecord]] = {}
        buf = self._buffered
        for _ in range(min(len(buf), self._max_poll_records)):
            r = buf.popleft()
            out.setdefault(TopicPartition(r.topic, r.partition), []).append(r)
        self._in_flight = {tp: {r.offset: r for r in recs} for tp, recs in out.items()}
        return out

    async def _fetch_round(
        self, max_wait_ms: int
    ) -> dict[TopicPartition, list[ShareConsumerRecord]]:
        client = self._client
        md = client.metadata
        if md.needs_update():
            try:
                await client.ensure_metadata(self._api_timeout)
            except (TimeoutError, KafkaConnectionError) as exc:
                log.debug("metadata refresh failed: %s", exc)
        names = self._topic_names()
        if any(t not in names for t, _p in self._assignment):
            md.request_update()
        wanted: dict[int, set[PartitionKey]] = {}
        for t, p in self._assignment:
            name = names.get(t)
            leader = -1 if name is None else md.leader_for(name, p)
            if leader >= 0:
                wanted.setdefault(leader, set()).add((t, p))
        acks_by_node: dict[int, Acks] = {}
        ids = {name: t for t, name in names.items()}
        for tp, acks in self._take_pending().items():
            topic_id = ids.get(tp.topic)
            leader = md.leader_for(tp.topic, tp.partition)
            if topic_id is None or leader < 0 or leader not in self._sessions:
                log.warning("%s: acknowledgements dropped, no share session on its leader", tp)
                continue
            acks_by_node.setdefault(leader, {})[(topic_id, tp.partition)] = acks
        nodes = set(wanted) | set(self._sessions) | set(acks_by_node)
        budget = self._max_poll_records
        results = await asyncio.gather(
            *(
                self._share_fetch(
                    n, wanted.get(n, set()), acks_by_node.get(n, {}), max_wait_ms, budget, names
                )
                for n in nodes
            ),
            return_exceptions=True,
        )
        out: dict[TopicPartition, list[ShareConsumerRecord]] = {}
        for res in results:
            if isinstance(res, BaseException):
                log.debug("share fetch failed: %s", res)
                md.request_update()
                continue
            out.update(res)
        return out

    async def _share_fetch(
        self,
        node: int,
        wanted: set[PartitionKey],
        acks: Acks,
        max_wait_ms: int,
        max_records: int,
        names: dict[uuid.UUID, str],
    ) -> dict[TopicPartition, list[ShareConsumerRecord]]:
        session = self._sessions.get(node)
        if session is None:
            if not wanted:
                return {}
            session = self._sessions[node] = ShareSession()
        if not wanted and not acks:
            if session.partitions:  # nothing assigned here any more: close the session
                await self._close_session(node, {})
            return {}
        conn = await self._client.connection(node)
        req = share_fetch_request(
            self.group_id,
            self.member_id,
            session,
            wanted,
            acks,
            max_wait_ms=max_wait_ms,
            max_records=max_records,
            min_bytes=int(self.config["fetch.min.bytes"]),
            max_bytes=int(self.config["fetch.max.bytes"]),
            filter=self._filter.expression if self._filter is not None else None,
        )
        session.epoch += 1
        session.partitions = wanted | set(acks)  # listed to acknowledge: the broker adds it too
        try:
            resp = await conn.send(
                req,
                version=conn.version(SHARE_FETCH, 1),
                timeout=max_wait_ms / 1000 + self._client.request_timeout,
            )
        except BaseException:  # unknown whether the broker saw it: open a new session next time
            self._sessions.pop(node, None)
            raise
        if resp.error_code:
            if resp.error_code in _SESSION_LOST:
                del self._sessions[node]
            raise KafkaError(resp.error_code, resp.error_message or f"ShareFetch to node {node}")
        local_filter = self._filter if not resp.filtered else None
        out: dict[TopicPartition, list[ShareConsumerRecord]] = {}
        for t in resp.responses:
            name = names.get(t.topic_id)
            if name is None:
                continue
            for p in t.partitions:
                tp = TopicPartition(name, p.partition_index)
                self._ack_result(tp, p.acknowledge_error_code, p.acknowledge_error_message)
                if p.error_code:
                    log.debug("ShareFetch %s: %s", tp, ErrorCode(p.error_code).name)
                    self._client.metadata.request_update()
                    continue
                recs = self._records(tp, p.records, p.acquired_records, local_filter)
                if recs:
                    out[tp] = recs
        return out

    def _ack_result(self, tp: TopicPartition, code: int, message: str | None) -> None:
        if code:
            err = KafkaError(code, message or f"acknowledgement of {tp}")
            log.warning("acknowledgement of %s failed: %s", tp, err)
            self.acknowledgement_errors[tp] = err

    def _records(
        self,
        tp: TopicPartition,
        blob: bytes | None,
        acquired: list[Any],
        local_filter: CompiledFilter | None,
    ) -> list[ShareConsumerRecord]:
        recs, gaps = acquired_records(
            tp,
            blob,
            [(a.first_offset, a.last_offset, a.delivery_count) for a in acquired],
            self._key_des,
            self._value_des,
            bool(self.config["check.crcs"]),
            local_filter,
        )
        # acquired, never handed to the user (control records; records the filter left out when
        # the broker did not filter): acknowledged as GAP, which archives them
        if gaps:
            with self._lock:
                pend = self._pending.setdefault(tp, {})
                for o in gaps:
                    pend[o] = GAP
        return recs

    # -- commits
    def commit_sync(
        self, timeout_ms: float | None = None
    ) -> dict[TopicPartition, KafkaError | None]:
        """Send the acknowledgements made so far (implicit mode: ACCEPT what the last poll delivered)
        now, and wait for the answer: {partition: None or its error}."""
        if self._closed:
            raise IllegalStateError("share consumer is closed")
        timeout = self._api_timeout if timeout_ms is None else timeout_ms / 1000
        return self._io.run(self._send_acks(self._prepare_commit(), final=False), timeout)

    def commit_async(self) -> concurrent.futures.Future[dict[TopicPartition, KafkaError | None]]:
        """As commit_sync, without waiting: a future of the same result."""
        if self._closed:
            raise IllegalStateError("share consumer is closed")
        return self._io.submit(self._send_acks(self._prepare_commit(), final=False))

    def _prepare_commit(self) -> dict[int, Acks]:
        if not self._explicit:
            self._acknowledge_delivered()
        md = self._client.metadata
        ids = {name: t for t, name in self._topic_names().items()}
        by_node: dict[int, Acks] = {}
        for tp, acks in self._take_pending().items():
            leader = md.leader_for(tp.topic, tp.partition)
            topic_id = ids.get(tp.topic)
            if topic_id is None or leader not in self._sessions:
                log.warning("%s: acknowledgements dropped, no share session on its leader", tp)
                continue
            by_node.setdefault(leader, {})[(topic_id, tp.partition)] = acks
        return by_node

    async def _send_acks(
        self, by_node: dict[int, Acks], final: bool
    ) -> dict[TopicPartition, KafkaError | None]:
        nodes = set(self._sessions) if final else set(by_node)
        out: dict[TopicPartition, KafkaError | None] = {}
        for res in await asyncio.gather(
            *(self._acknowledge(n, by_node.get(n, {}), final) for n in nodes)
        ):
            out.update(res)
        return out

    async def _acknowledge(
        self, node: int, acks: Acks, final: bool
    ) -> dict[TopicPartition, KafkaError | None]:
        """One ShareAcknowledge on the node's share session (final: epoch -1 closes it)."""
        session = self._sessions.get(node)
        if session is None or session.epoch == 0:
            return {}
        epoch = FINAL_EPOCH if final else session.epoch
        req = share_acknowledge_request(self.group_id, self.member_id, epoch, acks)
        if final:
            del self._sessions[node]
        else:
            session.epoch += 1
        try:
            conn = await self._client.connection(node)
            resp = await conn.send(req, version=conn.version(SHARE_ACKNOWLEDGE, 1))
        except BaseException:
            self._sessions.pop(node, None)
            raise
        names = self._topic_names()
        out: dict[TopicPartition, KafkaError | None] = {}
        if resp.error_code:
            if resp.error_code in _SESSION_LOST:
                self._sessions.pop(node, None)
            err = KafkaError(resp.error_code, resp.error_message or "ShareAcknowledge")
            for t, p in acks:
                if t in names:
                    out[TopicPartition(names[t], p)] = err
            return out
        for rt in resp.responses:
            for rp in rt.partitions:
                if rt.topic_id not in names:
                    continue
                tp = TopicPartition(names[rt.topic_id], rp.partition_index)
                self._ack_result(tp, rp.error_code, rp.error_message)
                out[tp] = (
                    KafkaError(rp.error_code, rp.error_message or "") if rp.error_code else None
                )
        return out

    async def _close_session(self, node: int, acks: Acks) -> None:
        await self._acknowledge(node, acks, final=True)

    async def _leave(self, by_node: dict[int, Acks]) -> None:
        """Acknowledge what is pending and close every share session, then leave the group."""
        try:
            await self._send_acks(by_node, final=True)
        except Exception as exc:
            log.warning("final acknowledgement failed: %s", exc)
        if self.member_epoch > 0 or self._coordinator is not None:
            try:
                await self._heartbeat(FINAL_EPOCH)
            except Exception as exc:
                log.warning("leaving share group %s failed: %s", self.group_id, exc)
        self.member_epoch = 0

    # -- lifecycle
    def close(self, timeout: float = 30) -> None:
        """Acknowledge what is pending (implicit mode: ACCEPT the last poll's records), close the
        share sessions and leave the group (ShareGroupHeartbeat with MemberEpoch -1)."""
        if self._closed:
            return
        self._closed = True
        try:
            topics, self._topics = self._topics, []
            if topics:
                self._io.run(self._leave(self._prepare_commit()), timeout)
        except Exception as exc:
            log.warning("share consumer close: %s", exc)
        finally:
            try:
                self._io.run(self._client.close(), 5)
            except Exception:
                pass
            self._io.stop()

    def __enter__(self) -> ShareConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
