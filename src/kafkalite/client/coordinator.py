"""ConsumerCoordinator: the client side of group membership — FindCoordinator, JoinGroup (KIP-394 retry),
leader assignment, SyncGroup, background heartbeats, eager/cooperative rebalances, and offset commits.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

from kafkalite.client.assignors import (
    COOPERATIVE,
    Assignment,
    Subscription,
    resolve_assignor,
    select_rebalance_protocol,
    withhold_transfers,
)
from kafkalite.client.errors import (
    CommitFailedError,
    KafkaConnectionError,
    KafkaTimeoutError,
    NoBrokersAvailable,
)
from kafkalite.client.find_coordinator import COORDINATOR_BASE, FIND_COORDINATOR
from kafkalite.client.group_offsets import (
    committed_offsets,
    offset_commit_request,
    offset_fetch_request,
)
from kafkalite.client.network import NetworkClient
from kafkalite.client.structs import OffsetAndMetadata, TopicPartition
from kafkalite.client.subscription import SubscriptionState
from kafkalite.protocol.errors import ErrorCode as E
from kafkalite.protocol.errors import KafkaError
from kafkalite.protocol.messages.groups import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    FindCoordinatorRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    SyncGroupRequest,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from kafkalite.protocol.schema import Request, Response

_Resp = TypeVar("_Resp", bound=Response)

log = logging.getLogger("kafkalite.client.coordinator")
JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 11, 12, 13, 14
_COORD_ERRORS = {E.COORDINATOR_NOT_AVAILABLE, E.NOT_COORDINATOR}
_RESET_ERRORS = {E.UNKNOWN_MEMBER_ID, E.ILLEGAL_GENERATION, E.FENCED_INSTANCE_ID}
SUBSCRIPTION_VERSION = 3
ASSIGNMENT_VERSION = 1


class ConsumerCoordinator:
    def __init__(self, client: NetworkClient, subs: SubscriptionState, config: dict[str, Any]):
        self.client = client
        self.io = client.io
        self.subs = subs
        self.group_id: str = config["group.id"]
        self.instance_id: str | None = config["group.instance.id"]
        self.session_timeout_ms = int(config["session.timeout.ms"])
        self.rebalance_timeout_ms = int(config["max.poll.interval.ms"])
        self.heartbeat_interval = int(config["heartbeat.interval.ms"]) / 1000
        self.max_poll_interval = int(config["max.poll.interval.ms"]) / 1000
        self.retry_backoff = int(config["retry.backoff.ms"]) / 1000
        self.rack = config.get("client.rack") or None
        strategies = config["partition.assignment.strategy"]
        if isinstance(strategies, str):
            strategies = [s for s in strategies.split(",") if s.strip()]
        elif not isinstance(strategies, (list, tuple)):
            strategies = [strategies]
        self.assignors = [resolve_assignor(s) for s in strategies]
        self.protocol = select_rebalance_protocol(self.assignors)
        self.coordinator: int | None = None
        self.member_id = ""
        self.generation = -1
        self.protocol_name: str | None = None
        self.rejoin_needed = True
        self.lost_pending = False
        self.last_poll = time.monotonic()
        self._hb_task: asyncio.Future[None] | None = None
        self._joined_topics: set[str] = set()
        self._assigned_counts: dict[str, int] = {}  # partition counts the leader assigned from
        self.closed = False

    # -- plumbing
    def _run(self, coro: Any, timeout: float | None = None) -> Any:
        return self.io.run(coro, timeout)

    async def _send(
        self, request: Request[_Resp], version_cap: int | None = None, timeout: float | None = None
    ) -> _Resp:
        if self.coordinator is None:
            raise KafkaError(E.COORDINATOR_NOT_AVAILABLE, "coordinator unknown")
        conn = await self.client.connection(self.coordinator)
        v = conn.version(request.API_KEY, version_cap)
        return await conn.send(request, version=v, timeout=timeout)

    def coordinator_unknown(self) -> bool:
        return self.coordinator is None or (
            not self.client.connected(self.coordinator) and self.coordinator in self.client._backoff
        )

    def mark_coordinator_dead(self) -> None:
        if self.coordinator is not None:
            log.info("group %s: coordinator %s marked dead", self.group_id, self.coordinator)
        self.coordinator = None

    async def _find(self) -> None:
        req_cls = FindCoordinatorRequest
        node = self.client.least_loaded_node()
        conn = await self.client.connection(node)
        v = conn.version(FIND_COORDINATOR)
        if v >= 4:
            resp = await conn.send(req_cls(key_type=0, coordinator_keys=[self.group_id]), version=v)
            c = resp.coordinators[0]
            code, node_id, host, port = c.error_code, c.node_id, c.host, c.port
        else:
            resp = await conn.send(req_cls(key=self.group_id, key_type=0), version=v)
            code, node_id, host, port = resp.error_code, resp.node_id, resp.host, resp.port
        if code:
            raise KafkaError(code, f"FindCoordinator({self.group_id})")
        pseudo = COORDINATOR_BASE + node_id
        self.client.extra_nodes[pseudo] = (host, port)
        self.coordinator = pseudo

    def ensure_coordinator_ready(self, deadline: float) -> None:
        while self.coordinator is None:
            try:
                self._run(self._find(), max(0.05, deadline - time.monotonic()))
                return
            except (KafkaError, KafkaConnectionError, NoBrokersAvailable, KafkaTimeoutError) as exc:
                if isinstance(exc, KafkaError) and not exc.retriable:
                    raise
                if time.monotonic() > deadline:
                    raise KafkaTimeoutError(f"no coordinator for group {self.group_id}") from exc
                time.sleep(self.retry_backoff)

    # -- poll-thread driver
    def poll(self, deadline: float) -> None:
        """Keep membership current; runs rebalances (and the listener callbacks) on the polling thread."""
        self.last_poll = time.monotonic()
        if self.lost_pending:
            self._lose_partitions()
        if self.subs.pattern is not None:
            self._update_pattern_topics()
        if self.subs.manual or not self.subs.subscribed:
            return
        if self._joined_topics != self._wanted_topics() or self._partition_counts_changed():
            self.rejoin_needed = True
        while self.rejoin_needed and not self.closed:
            try:
                self.ensure_coordinator_ready(deadline)
            except KafkaTimeoutError:
                return  # no coordinator yet: poll() returns what it has and tries again next time
            try:
                self._join_and_sync(deadline)
            except KafkaError as exc:
                if exc.code in _COORD_ERRORS:
                    self.mark_coordinator_dead()
                elif (
                    not exc.retriable
                    and exc.code not in _RESET_ERRORS
                    and exc.code
                    not in (
                        E.REBALANCE_IN_PROGRESS,
                        E.MEMBER_ID_REQUIRED,
                    )
                ):
                    raise
            except (KafkaConnectionError, KafkaTimeoutError, NoBrokersAvailable) as exc:
                log.info("group %s: join failed (%s), retrying", self.group_id, exc)
                self.mark_coordinator_dead()
            if self.rejoin_needed:
                if time.monotonic() > deadline:
                    return
                time.sleep(self.retry_backoff)
        self._ensure_heartbeat()

    def _partition_counts_changed(self) -> bool:
        """The leader rebalances when a subscribed topic gains partitions (or disappears)."""
        if not self._assigned_counts or self.rejoin_needed:
            return False
        md = self.client.metadata
        for topic, n in self._assigned_counts.items():
            parts = md.partitions_for(topic)
            if parts is not None and len(parts) != n:
                log.info(
                    "group %s: %s now has %d partitions, rebalancing",
                    self.group_id,
                    topic,
                    len(parts),
                )
                return True
        return False

    def _wanted_topics(self) -> set[str]:
        return set(self.subs.topics)

    def _update_pattern_topics(self) -> None:
        md = self.client.metadata
        md.want_all = True
        self.subs.topics = {
            n for n, t in md.topics.items() if not t.is_internal and self.subs.matches(n)
        }

    def _listener(self, method: str, parts: list[TopicPartition]) -> None:
        lst = self.subs.listener
        if lst is None:
            return
        fn = getattr(lst, method, None)
        if fn is None:
            return
        try:
            fn(sorted(parts))
        except Exception:
            log.exception("rebalance listener %s raised", method)

    def _lose_partitions(self) -> None:
        self.lost_pending = False
        lost = list(self.subs.assignment)
        if lost:
            self._listener("on_partitions_lost", lost)
            self.subs.set_assignment([])

    def _join_and_sync(self, deadline: float) -> None:
        owned = sorted(self.subs.assignment)
        if self.protocol != COOPERATIVE and owned:
            self._before_revoke(owned)
            self._listener("on_partitions_revoked", owned)
            self.subs.set_assignment([])
            owned = []
        topics = self._wanted_topics()
        self.client.metadata.set_topics(topics | set(self.client.metadata.wanted))
        self._joined_topics = set(topics)
        join_timeout = self.rebalance_timeout_ms / 1000 + self.client.request_timeout + 5
        resp = self._run(self._join(topics, owned), join_timeout)
        if resp is None:
            return
        self._assigned_counts = {}
        assignments: list[Any] = []
        if resp.leader == resp.member_id:
            assignments = self._perform_assignment(resp)
        sync = self._run(self._sync(assignments), self.client.request_timeout + 5)
        code = sync.error_code
        if code:
            if code in _RESET_ERRORS:
                self._reset_member()
            if code in _COORD_ERRORS:
                self.mark_coordinator_dead()
            self.rejoin_needed = True
            raise KafkaError(code, "SyncGroup")
        data = decode_assignment(sync.assignment) if sync.assignment else None
        new = []
        user_data = None
        if data is not None:
            new = sorted(
                TopicPartition(t.topic, p) for t in data.assigned_partitions for p in t.partitions
            )
            user_data = data.user_data
        self.rejoin_needed = False
        self._apply_assignment(owned, new)
        for a in self.assignors:
            if a.name == self.protocol_name:
                a.on_assignment(
                    Assignment([(tp.topic, tp.partition) for tp in new], user_data), self.generation
                )

    def _apply_assignment(self, owned: list[TopicPartition], new: list[TopicPartition]) -> None:
        if self.protocol == COOPERATIVE:
            revoked = sorted(set(owned) - set(new))
            added = sorted(set(new) - set(owned))
            if revoked:
                self._before_revoke(revoked)
                self._listener("on_partitions_revoked", revoked)
                self.subs.remove(revoked)
                self.rejoin_needed = True  # second phase: give them to their new owner
            self.subs.add(added)
            self._listener("on_partitions_assigned", added)
        else:
            self.subs.set_assignment(new)
            self._listener("on_partitions_assigned", new)
        log.info(
            "group %s generation %d: member %s owns %s",
            self.group_id,
            self.generation,
            self.member_id,
            sorted(self.subs.assignment),
        )

    # hook: the consumer commits before revoking (auto commit)
    before_revoke: Callable[[list[TopicPartition]], None] | None = None

    def _before_revoke(self, parts: list[TopicPartition]) -> None:
        if self.before_revoke is not None:
            try:
                self.before_revoke(parts)
            except Exception as exc:
                log.warning("commit before revoking %s failed: %s", parts, exc)

    async def _join(self, topics: set[str], owned: list[TopicPartition]) -> Any:
        req_cls = JoinGroupRequest
        by_topic: dict[str, list[int]] = {}
        for tp in owned:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        protocols = []
        for a in self.assignors:
            meta = encode_subscription(
                SUBSCRIPTION_VERSION,
                topics=sorted(topics),
                user_data=a.subscription_user_data(set(topics)),
                owned_partitions=[
                    ConsumerProtocolSubscription.TopicPartition(topic=t, partitions=ps)
                    for t, ps in sorted(by_topic.items())
                ],
                generation_id=self.generation,
                rack_id=self.rack,
            )
            protocols.append(req_cls.JoinGroupRequestProtocol(name=a.name, metadata=meta))
        timeout = self.rebalance_timeout_ms / 1000 + self.client.request_timeout
        for _ in range(3):
            req = req_cls(
                group_id=self.group_id,
                session_timeout_ms=self.session_timeout_ms,
                rebalance_timeout_ms=self.rebalance_timeout_ms,
                member_id=self.member_id,
                group_instance_id=self.instance_id,
                protocol_type="consumer",
                protocols=protocols,
                reason=None,
            )
            resp = await self._send(req, timeout=timeout)
            code = resp.error_code
            if code == E.MEMBER_ID_REQUIRED:  # KIP-394: rejoin at once with the id we were given
                self.member_id = resp.member_id
                continue
            if code:
                if code in _RESET_ERRORS:
                    self._reset_member()
                elif code in _COORD_ERRORS:
                    self.mark_coordinator_dead()
                raise KafkaError(code, "JoinGroup")
            self.member_id = resp.member_id
            self.generation = resp.generation_id
            self.protocol_name = resp.protocol_name
            return resp
        raise KafkaError(E.MEMBER_ID_REQUIRED, "JoinGroup kept asking for a member id")

    def _perform_assignment(self, resp: Any) -> list[Any]:
        assignor = next((a for a in self.assignors if a.name == resp.protocol_name), None)
        if assignor is None:
            raise KafkaError(E.INCONSISTENT_GROUP_PROTOCOL, f"no assignor {resp.protocol_name!r}")
        subscriptions: dict[str, Subscription] = {}
        all_topics: set[str] = set()
        for m in resp.members:
            s = decode_subscription(m.metadata)
            owned = [(t.topic, p) for t in (s.owned_partitions or []) for p in t.partitions]
            subscriptions[m.member_id] = Subscription(
                list(s.topics),
                s.user_data,
                owned,
                s.generation_id,
                m.group_instance_id,
                s.rack_id,
            )
            all_topics.update(s.topics)
        md = self.client.metadata
        if not all_topics <= set(md.topics):
            md.add_topics(*all_topics)
            md.request_update()
            self._run(
                self.client.refresh_metadata(sorted(all_topics)), self.client.request_timeout + 5
            )
        counts = {}
        for t in all_topics:
            parts = md.partitions_for(t)
            if parts:
                counts[t] = len(parts)
        self._assigned_counts = dict(counts)
        result = assignor.assign(counts, subscriptions)
        if self.protocol == COOPERATIVE and COOPERATIVE in assignor.supported_protocols:
            adjusted = withhold_transfers(
                {m: list(a.partitions) for m, a in result.items()}, subscriptions
            )
            result = {m: Assignment(adjusted[m], a.user_data) for m, a in result.items()}
        self._joined_topics |= all_topics & self._wanted_topics()
        out = []
        req_cls = SyncGroupRequest
        for member, a in result.items():
            by_topic: dict[str, list[int]] = {}
            for t, p in a.partitions:
                by_topic.setdefault(t, []).append(p)
            blob = encode_assignment(
                ASSIGNMENT_VERSION,
                assigned_partitions=[
                    ConsumerProtocolAssignment.TopicPartition(topic=t, partitions=sorted(ps))
                    for t, ps in sorted(by_topic.items())
                ],
                user_data=a.user_data,
            )
            out.append(req_cls.SyncGroupRequestAssignment(member_id=member, assignment=blob))
        return out

    async def _sync(self, assignments: list[Any]) -> Any:
        req_cls = SyncGroupRequest
        req = req_cls(
            group_id=self.group_id,
            generation_id=self.generation,
            member_id=self.member_id,
            group_instance_id=self.instance_id,
            protocol_type="consumer",
            protocol_name=self.protocol_name,
            assignments=assignments,
        )
        return await self._send(req)

    def _reset_member(self) -> None:
        self.member_id = ""
        self.generation = -1
        self.rejoin_needed = True
        if self.subs.assignment:
            self.lost_pending = True

    # -- heartbeats (I/O thread)
    def _ensure_heartbeat(self) -> None:
        if self._hb_task is None or self._hb_task.done():
            self._hb_task = self.io.submit(self._heartbeat_loop())  # type: ignore[assignment]

    async def _heartbeat_loop(self) -> None:
        req_cls = HeartbeatRequest
        while not self.closed:
            await asyncio.sleep(self.heartbeat_interval)
            if self.closed or self.rejoin_needed or self.generation < 0 or self.coordinator is None:
                if self.rejoin_needed and self.generation < 0:
                    return
                continue
            if time.monotonic() - self.last_poll > self.max_poll_interval:
                log.warning(
                    "group %s: poll() not called for max.poll.interval.ms (%d s): leaving the group",
                    self.group_id,
                    self.max_poll_interval,
                )
                await self._leave("consumer poll timeout expired")
                self.lost_pending = bool(self.subs.assignment)
                return
            try:
                resp = await self._send(
                    req_cls(
                        group_id=self.group_id,
                        generation_id=self.generation,
                        member_id=self.member_id,
                        group_instance_id=self.instance_id,
                    ),
                    timeout=self.session_timeout_ms / 1000,
                )
            except (KafkaConnectionError, KafkaTimeoutError, NoBrokersAvailable, KafkaError) as exc:
                log.debug("heartbeat failed: %s", exc)
                self.mark_coordinator_dead()
                self.rejoin_needed = True
                continue
            code = resp.error_code
            if code == E.REBALANCE_IN_PROGRESS:
                self.rejoin_needed = True
            elif code in _RESET_ERRORS:
                self._reset_member()
            elif code in _COORD_ERRORS:
                self.mark_coordinator_dead()
                self.rejoin_needed = True
            elif code:
                log.warning("heartbeat error %s", E.name_of(code))

    async def _leave(self, reason: str) -> None:
        if self.instance_id is not None or not self.member_id or self.coordinator is None:
            self.member_id, self.generation = (self.member_id, -1) if self.instance_id else ("", -1)
            self.rejoin_needed = True
            return
        req_cls = LeaveGroupRequest
        conn = await self.client.connection(self.coordinator)
        v = conn.version(LEAVE_GROUP)
        if v >= 3:
            req = req_cls(
                group_id=self.group_id,
                members=[
                    req_cls.MemberIdentity(
                        member_id=self.member_id, group_instance_id=None, reason=reason
                    )
                ],
            )
        else:
            req = req_cls(group_id=self.group_id, member_id=self.member_id)
        try:
            await conn.send(req, version=v, timeout=5)
        except Exception as exc:
            log.debug("LeaveGroup failed: %s", exc)
        self.member_id = ""
        self.generation = -1
        self.rejoin_needed = True

    def leave_group(self) -> None:
        try:
            self._run(self._leave("the consumer is being closed"), 10)
        except Exception as exc:
            log.debug("leave failed: %s", exc)

    # -- offsets
    async def commit_offsets(self, offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
        if not offsets:
            return
        manual = self.subs.manual or self.generation < 0
        req = offset_commit_request(
            offsets,
            self.group_id,
            -1 if manual else self.generation,
            "" if manual else self.member_id,
            None if manual else self.instance_id,
        )
        resp = await self._send(req, version_cap=8)
        for t in resp.topics:
            for p in t.partitions:
                code = p.error_code
                if not code:
                    continue
                if code in _COORD_ERRORS:
                    self.mark_coordinator_dead()
                    raise KafkaError(code, "OffsetCommit")
                if code in (
                    E.UNKNOWN_MEMBER_ID,
                    E.ILLEGAL_GENERATION,
                    E.REBALANCE_IN_PROGRESS,
                    E.FENCED_INSTANCE_ID,
                ):
                    if code != E.REBALANCE_IN_PROGRESS:
                        self._reset_member()
                    self.rejoin_needed = True
                    raise CommitFailedError(
                        f"commit failed: {E.name_of(code)}; the group rebalanced and the partitions "
                        "may be owned by another member now"
                    )
                raise KafkaError(code, f"OffsetCommit {t.name}-{p.partition_index}")

    async def fetch_committed(
        self, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        req = offset_fetch_request(self.group_id, partitions)
        resp = await self._send(req, version_cap=7)
        if resp.error_code:
            if resp.error_code in _COORD_ERRORS:
                self.mark_coordinator_dead()
            raise KafkaError(resp.error_code, "OffsetFetch")
        return committed_offsets(resp)

    def call_with_retry(self, make: Callable[[], Any], deadline: float) -> Any:
        """Run a coordinator coroutine, rediscovering the coordinator on retriable errors until deadline."""
        while True:
            self.ensure_coordinator_ready(deadline)
            try:
                return self._run(make(), max(0.05, deadline - time.monotonic()))
            except (KafkaError, KafkaConnectionError, KafkaTimeoutError, NoBrokersAvailable) as exc:
                if isinstance(exc, KafkaError) and not exc.retriable:
                    raise
                if isinstance(exc, KafkaConnectionError):
                    self.mark_coordinator_dead()
                if time.monotonic() > deadline:
                    raise
                time.sleep(self.retry_backoff)

    def close(self) -> None:
        self.closed = True
        if self._hb_task is not None:
            self._hb_task.cancel()
