"""Coordinator test helpers: a fake clock, an in-memory `__consumer_offsets`, a harness to join and sync.

Everything runs on the fake clock; nothing sleeps.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kafkalite.coordinator import CoordinatorConfig, CoordinatorRecord, Deferred, GroupCoordinator
from kafkalite.coordinator.types import JoinGroupResult, SyncGroupResult
from kafkalite.protocol import primitives as p
from kafkalite.protocol.errors import ErrorCode


class FakeClock:
    def __init__(self, start: int = 1_000_000) -> None:
        self.ms = start

    def __call__(self) -> int:
        return self.ms


@dataclass
class MemoryOffsetsTopic:
    """Stands in for the `__consumer_offsets` log: keeps what was appended, per partition.

    `mode` "ok" completes appends at once; "fail" completes with `fail_code`; "hold" keeps them
    pending until `release()`.
    """

    mode: str = "ok"
    fail_code: ErrorCode = ErrorCode.NOT_LEADER_OR_FOLLOWER
    logs: dict[int, list[tuple[bytes, bytes | None]]] = field(default_factory=dict)
    held: list[tuple[int, list[CoordinatorRecord], Deferred[ErrorCode]]] = field(
        default_factory=list
    )

    def append(self, partition: int, records: list[CoordinatorRecord]) -> Deferred[ErrorCode]:
        d: Deferred[ErrorCode] = Deferred()
        if self.mode == "fail":
            d.complete(self.fail_code)
        elif self.mode == "hold":
            self.held.append((partition, records, d))
        else:
            self._store(partition, records)
            d.complete(ErrorCode.NO_ERROR)
        return d

    def _store(self, partition: int, records: list[CoordinatorRecord]) -> None:
        self.logs.setdefault(partition, []).extend((r.key, r.value) for r in records)

    def release(self, code: ErrorCode = ErrorCode.NO_ERROR) -> int:
        held, self.held = self.held, []
        for partition, records, d in held:
            if code == ErrorCode.NO_ERROR:
                self._store(partition, records)
            d.complete(code)
        return len(held)

    def count(self) -> int:
        return sum(len(v) for v in self.logs.values())


class Harness:
    """A coordinator that owns every partition, on a fake clock, with deterministic member ids."""

    def __init__(self, **config: Any) -> None:
        config.setdefault("group_initial_rebalance_delay_ms", 0)
        self.config = CoordinatorConfig(**config)
        self.clock = FakeClock()
        self.topic = MemoryOffsetsTopic()
        self._ids = 0
        self.coord = self.new_coordinator()

    def _next_id(self, client_id: str) -> str:
        self._ids += 1
        return f"{client_id or 'member'}-{self._ids}"

    def new_coordinator(self, *, load: bool = True) -> GroupCoordinator:
        coord = GroupCoordinator(
            self.topic.append, config=self.config, clock=self.clock, new_member_id=self._next_id
        )
        if load:
            for partition in range(self.config.offsets_topic_num_partitions):
                coord.load_partition(partition, self.topic.logs.get(partition, []))
        return coord

    def advance(self, ms: int) -> None:
        """Move the clock forward, firing timers at every deadline on the way (like a broker would)."""
        target = self.clock.ms + ms
        for _ in range(10_000):
            nxt = self.coord.next_deadline()
            if nxt is None or nxt > target:
                break
            self.clock.ms = max(self.clock.ms, nxt)
            self.coord.tick()
        self.clock.ms = target
        self.coord.tick()

    # -- convenience wrappers -------------------------------------------------------------

    def join(
        self,
        group: str,
        member_id: str = "",
        protocols: list[tuple[str, bytes]] | None = None,
        *,
        session: int = 10_000,
        rebalance: int = 30_000,
        instance: str | None = None,
        client_id: str = "c",
        protocol_type: str = "consumer",
        require_known: bool = False,
        skip: bool = False,
    ) -> Deferred[JoinGroupResult]:
        return self.coord.join_group(
            group,
            member_id,
            protocol_type,
            protocols if protocols is not None else [("range", subscription(["t"]))],
            session_timeout_ms=session,
            rebalance_timeout_ms=rebalance,
            group_instance_id=instance,
            client_id=client_id,
            client_host="/127.0.0.1",
            require_known_member_id=require_known,
            supports_skip_assignment=skip,
        )

    def sync(
        self,
        group: str,
        result: JoinGroupResult,
        assignments: dict[str, bytes] | None = None,
        instance: str | None = None,
    ) -> Deferred[SyncGroupResult]:
        return self.coord.sync_group(
            group,
            result.generation_id,
            result.member_id,
            group_instance_id=instance,
            protocol_type="consumer",
            protocol_name=result.protocol_name,
            assignments=assignments,
        )

    def stable_group(
        self,
        group: str,
        n: int,
        *,
        instances: list[str | None] | None = None,
        session: int = 10_000,
    ) -> list[JoinGroupResult]:
        """Bring up a group of n members through join + sync; returns their join results."""
        instances = instances or [None] * n
        pending = [self.join(group, instance=instances[i], session=session) for i in range(n)]
        self.advance(0)
        results = [done(d) for d in pending]
        assert all(r.error == ErrorCode.NO_ERROR for r in results), results
        leader = next(r for r in results if r.leader == r.member_id)
        assignment = {r.member_id: f"assign-{r.member_id}".encode() for r in results}
        syncs = [
            self.sync(group, r, assignment if r is leader else None, instance=instances[i])
            for i, r in enumerate(results)
        ]
        assert all(done(s).error == ErrorCode.NO_ERROR for s in syncs)
        return results


def done(d: Deferred[Any]) -> Any:
    assert d.done(), "expected the operation to have completed"
    return d.result()


def subscription(topics: list[str], user_data: bytes | None = None, version: int = 0) -> bytes:
    """A ConsumerProtocolSubscription (v0 layout, or v1 with no owned partitions)."""
    out = bytearray()
    p.write_int16(out, version)
    p.write_int32(out, len(topics))
    for t in topics:
        p.write_string(out, t)
    if user_data is None:
        p.write_int32(out, -1)
    else:
        p.write_int32(out, len(user_data))
        out += user_data
    if version >= 1:
        p.write_int32(out, 0)
    return bytes(out)
