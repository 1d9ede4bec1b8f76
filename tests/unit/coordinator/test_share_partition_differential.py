"""Differential test of the run-based SharePartition against the original per-record implementation
(share_partition_reference.py): random operation sequences must give identical results from every
call and identical observable state after every step."""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from share_partition_reference import ReferenceSharePartition

from kafkalite.coordinator.share_partition import (
    SharePartition,
)
from kafkalite.coordinator.share_partition_types import (
    AckBatch,
    SharePartitionConfig,
    StateBatch,
)

TOPIC = uuid.UUID(int=9)
MEMBERS = ("m1", "m2", "m3")
START_CONFIG = SharePartitionConfig(lock_duration_ms=100, delivery_count_limit=3, max_in_flight=25)


@dataclasses.dataclass(frozen=True)
class Acquire:
    member: str
    max_records: int
    shape: list[tuple[int, int]]  # (hole before, length - 1) of each batch, from `base`
    base: int  # relative to the next fetch offset (negative: below it, over in-flight records)


@dataclasses.dataclass(frozen=True)
class AckHeld:
    """Acknowledge a stretch of what some member holds, with one type or one per offset."""

    pick: int
    skip: int  # how many held offsets to pass over first
    length: int
    types: list[int]  # one type, or cycled to one per offset
    per_offset: bool


@dataclasses.dataclass(frozen=True)
class AckAny:
    member: str
    batches: list[tuple[int, int, list[int]]]  # (first relative to start, extra, types)


@dataclasses.dataclass(frozen=True)
class Tick:
    ms: int


@dataclasses.dataclass(frozen=True)
class Leave:
    member: str


@dataclasses.dataclass(frozen=True)
class SkipTo:
    delta: int  # relative to the end offset


@dataclasses.dataclass(frozen=True)
class Truncate:
    delta: int  # relative to the start offset


@dataclasses.dataclass(frozen=True)
class Reset:
    delta: int  # relative to the start offset


@dataclasses.dataclass(frozen=True)
class Configure:
    delivery_count_limit: int
    lock_duration_ms: int
    max_in_flight: int


@dataclasses.dataclass(frozen=True)
class Restart:
    """Reload both from their persisted view (a new leader)."""


Op = Acquire | AckHeld | AckAny | Tick | Leave | SkipTo | Truncate | Reset | Configure | Restart

_members = st.sampled_from(MEMBERS)
_types = st.sampled_from([0, 1, 2, 3, 4])
_acquire = st.builds(
    Acquire,
    _members,
    st.integers(-1, 30),
    st.lists(st.tuples(st.integers(0, 3), st.integers(0, 9)), min_size=1, max_size=4),
    st.sampled_from([0, 0, 0, -3, -8, 2]),
)
_ack_held = st.builds(
    AckHeld,
    st.integers(0, 2),
    st.integers(0, 6),
    st.integers(1, 12),
    st.lists(_types, min_size=1, max_size=4),
    st.booleans(),
)
_ack_held_long = st.builds(
    AckHeld,
    st.integers(0, 2),
    st.just(0),
    st.integers(1, 40),
    st.lists(st.sampled_from([1, 1, 2, 3]), min_size=1, max_size=1),
    st.just(False),
)
_ack_any = st.builds(
    AckAny,
    _members,
    st.lists(
        st.tuples(st.integers(-2, 40), st.integers(-1, 5), st.lists(st.integers(0, 4))),
        max_size=3,
    ),
)
_rare = st.one_of(
    st.builds(Leave, _members),
    st.builds(SkipTo, st.integers(-2, 6)),
    st.builds(Truncate, st.integers(-1, 12)),
    st.builds(Reset, st.integers(-3, 10)),
    st.builds(
        Configure,
        st.integers(0, 4),
        st.sampled_from([50, 100, 300]),
        st.sampled_from([3, 10, 25, 60]),
    ),
    st.just(Restart()),
)
_tick = st.builds(Tick, st.integers(0, 150))
# weighted: mostly acquisitions, acknowledgements and time passing (one_of would drop repeats)
_ops: st.SearchStrategy[Op] = st.sampled_from(
    [_acquire] * 6
    + [_ack_held] * 3
    + [_ack_held_long] * 2
    + [_ack_any] * 2
    + [_tick] * 4
    + [_rare] * 4
).flatmap(lambda strategy: strategy)


_state_batches = st.lists(
    st.builds(
        lambda first, extra, state, count: StateBatch(first, first + extra, state, count),
        st.integers(0, 30),
        st.integers(0, 8),
        st.sampled_from([0, 0, 1, 2, 4]),
        st.integers(0, 4),
    ),
    max_size=5,
)
_bad_state_batches = st.lists(
    st.builds(
        StateBatch,
        st.integers(0, 30),
        st.integers(0, 40),
        st.integers(-1, 5),
        st.integers(-1, 4),
    ),
    max_size=5,
)


def _build(cls: Any, start: int, batches: list[StateBatch], config: SharePartitionConfig) -> Any:
    return cls("g", TOPIC, 0, start_offset=start, state_epoch=2, batches=batches, config=config)


def _observe(sp: Any) -> dict[str, object]:
    low, high = max(0, sp.start_offset - 3), sp.end_offset + 3
    return {
        "start": sp.start_offset,
        "end": sp.end_offset,
        "epoch": sp.state_epoch,
        "changes": sp.changes,
        "dirty": sp.dirty,
        "next_fetch": sp.next_fetch_offset(),
        "next_deadline": sp.next_lock_deadline(),
        "state_batches": sp.state_batches(),
        "record_state": [sp.record_state(o) for o in range(low, high)],
        "record": [sp.record(o) for o in range(low, high)],
        "in_flight": sp.in_flight_count(),
        "acquired": sp.acquired_count(),
        "acquired_by": [sp.acquired_by(m) for m in (*MEMBERS, "nobody")],
        "holders": sp.members_holding_locks(),
        "lag": [sp.lag(sp.end_offset + 5), sp.lag(0)],
    }


def _ack_held_batches(sp: Any, op: AckHeld) -> tuple[str, list[AckBatch]] | None:
    holders = sp.members_holding_locks()
    if not holders:
        return None
    member = holders[op.pick % len(holders)]
    held = sp.acquired_by(member)
    held = held[min(op.skip, len(held) - 1) :]
    first = last = held[0]
    for offset in held[1:]:
        if offset != last + 1 or last - first + 1 >= op.length:
            break
        last = offset
    if op.per_offset:
        types = tuple(op.types[i % len(op.types)] for i in range(last - first + 1))
    else:
        types = (op.types[0],)
    return member, [AckBatch(first, last, types)]


def _step(sp: Any, op: Op, now: int, plan: Any) -> tuple[object, int]:
    """Apply `op` to one implementation; what it returned, and the new time. `plan` is the
    reference's view, from which offsets are chosen, so both get exactly the same call."""
    if isinstance(op, Acquire):
        base = max(0, plan.next_fetch_offset() + op.base)
        batches = []
        for hole, extra in op.shape:
            batches.append((base + hole, base + hole + extra))
            base += hole + extra + 1
        return sp.acquire(op.member, batches, op.max_records, now), now
    if isinstance(op, AckHeld):
        chosen = _ack_held_batches(plan, op)
        if chosen is None:
            return None, now
        return sp.acknowledge(chosen[0], chosen[1], now), now
    if isinstance(op, AckAny):
        batches = [
            AckBatch(plan.start_offset + first, plan.start_offset + first + extra, tuple(types))
            for first, extra, types in op.batches
        ]
        return sp.acknowledge(op.member, batches, now), now
    if isinstance(op, Tick):
        now += op.ms
        return (sp.release_expired(now), sp.next_lock_deadline()), now
    if isinstance(op, Leave):
        return sp.release_member(op.member), now
    if isinstance(op, SkipTo):
        return sp.skip_to(plan.end_offset + op.delta), now
    if isinstance(op, Truncate):
        return sp.truncate_before(plan.start_offset + op.delta), now
    if isinstance(op, Reset):
        return sp.reset(max(0, plan.start_offset + op.delta)), now
    if isinstance(op, Configure):
        sp.config = SharePartitionConfig(
            lock_duration_ms=op.lock_duration_ms,
            delivery_count_limit=op.delivery_count_limit,
            max_in_flight=op.max_in_flight,
        )
        return None, now
    raise AssertionError(op)  # Restart is done by the caller


def _restart(sp: Any, cls: Any) -> Any:
    again = cls(
        sp.group_id,
        sp.topic_id,
        sp.partition,
        start_offset=sp.start_offset,
        state_epoch=sp.state_epoch,
        batches=sp.state_batches(),
        config=sp.config,
    )
    again.take_dead_letters()
    return again


def _outcome(cls: Any, start: int, batches: list[StateBatch]) -> Any:
    try:
        return _build(cls, start, batches, START_CONFIG)
    except ValueError as exc:
        return f"ValueError: {exc}"


@settings(derandomize=True, max_examples=300, deadline=None)
@given(
    st.integers(0, 12),
    st.one_of(_state_batches, _state_batches, _state_batches, _bad_state_batches),
    st.lists(_ops, min_size=20, max_size=80),
)
def test_runs_match_the_per_record_reference(
    start: int, loaded: list[StateBatch], ops: list[Op]
) -> None:
    sp = _outcome(SharePartition, start, loaded)
    ref = _outcome(ReferenceSharePartition, start, loaded)
    if isinstance(ref, str):
        assert sp == ref
        return
    assert isinstance(sp, SharePartition)
    assert _observe(sp) == _observe(ref)
    now = 0
    for step, op in enumerate(ops):
        if isinstance(op, Restart):
            sp, ref = _restart(sp, SharePartition), _restart(ref, ReferenceSharePartition)
        else:
            got, _ = _step(sp, op, now, ref)
            want, now = _step(ref, op, now, ref)
            assert got == want, (step, op)
        assert sp.take_dead_letters() == ref.take_dead_letters(), (step, op)
        assert _observe(sp) == _observe(ref), (step, op)
        if step % 7 == 3:
            sp.mark_persisted(sp.changes)
            ref.mark_persisted(ref.changes)


def test_a_large_window_stays_a_few_runs() -> None:
    n = 50_000
    sp = SharePartition("g", TOPIC, 0, start_offset=0, config=SharePartitionConfig(max_in_flight=n))
    for base in range(0, n, 500):
        sp.acquire("m1", [(base, base + 499)], 500, 0)
    assert len(sp._runs) == 1  # one member, one deadline, one delivery count
    sp.acknowledge("m1", [AckBatch(1000, n - 1, (1,))], 0)
    sp.acknowledge("m1", [AckBatch(10, 19, (2,))], 0)
    assert len(sp._runs) == 4
    # ACQUIRED is persisted as AVAILABLE: 0-999 is one persisted batch
    assert sp.state_batches() == [StateBatch(0, 999, 0, 1), StateBatch(1000, n - 1, 2, 1)]
    assert sp.next_fetch_offset() == 10
