"""The KIP-932 share-partition state machine: acquisition, acknowledgement, lock expiry, delivery
limits, the start offset and the persisted view, driven without I/O on a fake clock."""

from __future__ import annotations

import dataclasses
import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.coordinator.share_partition import (
    SharePartition,
)
from kafkalite.coordinator.share_partition_types import (
    AckBatch,
    AcknowledgeType,
    AcquiredRange,
    DeadLetter,
    RecordState,
    SharePartitionConfig,
    StateBatch,
)
from kafkalite.protocol.errors import ErrorCode

TOPIC = uuid.UUID(int=7)
LOCK = 30_000
ACCEPT = AcknowledgeType.ACCEPT
RELEASE = AcknowledgeType.RELEASE
REJECT = AcknowledgeType.REJECT
GAP = AcknowledgeType.GAP
AVAILABLE = RecordState.AVAILABLE
ACQUIRED = RecordState.ACQUIRED
ACKNOWLEDGED = RecordState.ACKNOWLEDGED
ARCHIVED = RecordState.ARCHIVED


def make(start: int = 0, **config: int) -> SharePartition:
    return SharePartition("g", TOPIC, 0, start_offset=start, config=SharePartitionConfig(**config))


def ack(first: int, last: int, *types: int) -> AckBatch:
    return AckBatch(first, last, tuple(types))


def reload(sp: SharePartition) -> SharePartition:
    return SharePartition(
        sp.group_id,
        sp.topic_id,
        sp.partition,
        start_offset=sp.start_offset,
        state_epoch=sp.state_epoch,
        batches=sp.state_batches(),
        config=sp.config,
    )


# -- acquire --------------------------------------------------------------------------------------
def test_acquire_takes_new_records_in_order_and_locks_them() -> None:
    sp = make()
    assert sp.next_fetch_offset() == 0
    got = sp.acquire("m1", [(0, 4), (5, 9)], 100, now_ms=1000)
    assert got == [AcquiredRange(0, 9, 1)]
    assert sp.end_offset == 10
    assert sp.next_fetch_offset() == 10
    assert sp.acquired_by("m1") == list(range(10))
    assert sp.acquired_count() == 10
    assert sp.in_flight_count() == 10
    rec = sp.record(3)
    assert rec is not None
    assert (rec.state, rec.delivery_count, rec.member_id, rec.lock_deadline_ms) == (
        ACQUIRED,
        1,
        "m1",
        1000 + LOCK,
    )
    assert sp.next_lock_deadline() == 1000 + LOCK


def test_acquire_stops_at_max_records() -> None:
    sp = make()
    assert sp.acquire("m1", [(0, 9)], 4, now_ms=0) == [AcquiredRange(0, 3, 1)]
    assert sp.end_offset == 4
    assert sp.next_fetch_offset() == 4
    assert sp.acquire("m2", [(4, 9)], 4, now_ms=0) == [AcquiredRange(4, 7, 1)]
    assert sp.acquire("m2", [(8, 9)], 0, now_ms=0) == []
    assert sp.acquire("m2", [(8, 9)], -1, now_ms=0) == []
    assert sp.end_offset == 8


def test_acquire_respects_max_in_flight_for_new_offsets_only() -> None:
    sp = make(max_in_flight=5)
    assert sp.acquire("m1", [(0, 9)], 100, now_ms=0) == [AcquiredRange(0, 4, 1)]
    assert sp.end_offset == 5
    assert sp.acquire("m1", [(5, 9)], 100, now_ms=0) == []
    # completing records makes room
    assert sp.acknowledge("m1", [ack(0, 1, ACCEPT)], 0).error is ErrorCode.NO_ERROR
    assert sp.acquire("m2", [(5, 9)], 100, now_ms=0) == [AcquiredRange(5, 6, 1)]
    # a released record is re-acquired even when in flight is at its limit
    sp.acknowledge("m1", [ack(2, 2, RELEASE)], 0)
    assert sp.in_flight_count() == 5
    assert sp.acquire("m3", [(2, 9)], 100, now_ms=0) == [AcquiredRange(2, 2, 2)]


def test_finishing_a_batch_runs_past_max_in_flight_but_starts_nothing_new() -> None:
    """Kafka's acquisition: the in-flight limit gates new records, and the batch begun below it is
    acquired to its end (batch-optimized), so it is not sent again for its rest."""
    sp = make(max_in_flight=5)
    assert sp.acquire("m1", [(0, 9)], 100, now_ms=0) == [AcquiredRange(0, 4, 1)]
    got = sp.acquire("m1", [(5, 9)], 5, now_ms=0, finish_batch=True)
    assert got == [AcquiredRange(5, 9, 1)]
    assert sp.in_flight_count() == 10
    assert sp.acquire("m2", [(10, 12)], 100, now_ms=0) == []  # over the limit: nothing new
    assert sp.acknowledge("m1", [ack(0, 7, ACCEPT)], 0).error is ErrorCode.NO_ERROR
    assert sp.acquire("m2", [(10, 12)], 100, now_ms=0) == [AcquiredRange(10, 12, 1)]


def test_holes_between_batches_are_skipped_but_end_offset_moves_past_them() -> None:
    sp = make()
    got = sp.acquire("m1", [(0, 2), (5, 6), (9, 9)], 100, now_ms=0)
    assert got == [AcquiredRange(0, 2, 1), AcquiredRange(5, 6, 1), AcquiredRange(9, 9, 1)]
    assert sp.end_offset == 10
    assert sp.record_state(3) is None
    assert sp.in_flight_count() == 6
    # the holes are not records: acknowledging them is refused
    assert sp.acknowledge("m1", [ack(3, 3, GAP)], 0).error is ErrorCode.INVALID_RECORD_STATE
    # once 0-2 complete, the start offset jumps over the hole
    sp.acknowledge("m1", [ack(0, 2, ACCEPT)], 0)
    assert sp.start_offset == 5
    sp.acknowledge("m1", [ack(5, 6, ACCEPT), ack(9, 9, ACCEPT)], 0)
    assert sp.start_offset == 10 == sp.end_offset
    assert sp.in_flight_count() == 0


def test_a_batch_starting_below_the_start_offset_is_clipped() -> None:
    sp = make(start=10)
    assert sp.acquire("m1", [(5, 12)], 100, now_ms=0) == [AcquiredRange(10, 12, 1)]
    assert sp.record_state(7) is None


def test_acquired_records_are_not_acquired_again() -> None:
    sp = make()
    sp.acquire("m1", [(0, 4)], 100, now_ms=0)
    assert sp.acquire("m2", [(0, 6)], 100, now_ms=0) == [AcquiredRange(5, 6, 1)]
    assert sp.acquired_by("m1") == [0, 1, 2, 3, 4]


def test_released_records_come_back_with_a_higher_delivery_count() -> None:
    sp = make()
    sp.acquire("m1", [(0, 4)], 100, now_ms=0)
    result = sp.acknowledge("m1", [ack(1, 2, RELEASE)], 0)
    assert result.error is ErrorCode.NO_ERROR and result.changed
    assert sp.record_state(1) == (AVAILABLE, 1)
    assert sp.next_fetch_offset() == 1
    got = sp.acquire("m2", [(0, 6)], 100, now_ms=0)
    assert got == [AcquiredRange(1, 2, 2), AcquiredRange(5, 6, 1)]
    assert sp.acquired_by("m2") == [1, 2, 5, 6]


# -- locks ----------------------------------------------------------------------------------------
def test_an_expired_lock_redelivers_to_another_member() -> None:
    sp = make(lock_duration_ms=100)
    sp.acquire("m1", [(0, 1)], 100, now_ms=0)
    sp.acquire("m1", [(2, 2)], 100, now_ms=50)
    assert sp.next_lock_deadline() == 100
    assert sp.release_expired(99) == 0
    assert sp.release_expired(100) == 2
    assert sp.next_lock_deadline() == 150
    assert sp.record_state(0) == (AVAILABLE, 1)
    assert sp.acquired_by("m1") == [2]
    assert sp.acquire("m2", [(0, 2)], 100, now_ms=120) == [AcquiredRange(0, 1, 2)]
    # m1 lost the lock: its late acknowledgement is refused
    late = sp.acknowledge("m1", [ack(0, 0, ACCEPT)], 130)
    assert late.error is ErrorCode.INVALID_RECORD_STATE and not late.changed
    assert sp.release_expired(1000) == 3
    assert sp.next_lock_deadline() is None
    assert sp.acquired_count() == 0


def test_acknowledged_records_do_not_expire() -> None:
    sp = make(lock_duration_ms=100)
    sp.acquire("m1", [(0, 1)], 100, now_ms=0)
    sp.acknowledge("m1", [ack(0, 1, ACCEPT)], 10)
    assert sp.next_lock_deadline() is None
    assert sp.release_expired(1000) == 0


def test_release_member_frees_its_locks_only() -> None:
    sp = make()
    sp.acquire("m1", [(0, 2)], 100, now_ms=0)
    sp.acquire("m2", [(3, 4)], 100, now_ms=0)
    assert sp.release_member("m1") == 3
    assert sp.release_member("m1") == 0
    assert sp.release_member("nobody") == 0
    assert sp.acquired_by("m1") == []
    assert sp.acquired_by("m2") == [3, 4]
    assert sp.next_fetch_offset() == 0
    assert sp.record_state(2) == (AVAILABLE, 1)


# -- delivery limit and dead letters --------------------------------------------------------------
def test_the_delivery_limit_archives_with_a_dead_letter() -> None:
    sp = make(delivery_count_limit=3, lock_duration_ms=10)
    now = 0
    # release, expiry, member release: three deliveries, the third ends it
    sp.acquire("m1", [(0, 0)], 1, now)
    sp.acknowledge("m1", [ack(0, 0, RELEASE)], now)
    sp.acquire("m2", [(0, 0)], 1, now)
    assert sp.release_expired(now + 10) == 1
    assert sp.record_state(0) == (AVAILABLE, 2)
    assert sp.take_dead_letters() == []
    assert sp.acquire("m3", [(0, 0)], 1, now + 20) == [AcquiredRange(0, 0, 3)]
    assert sp.release_member("m3") == 1
    assert sp.take_dead_letters() == [DeadLetter(0, 3, "DELIVERY_COUNT_EXCEEDED")]
    assert sp.take_dead_letters() == []
    assert sp.start_offset == 1  # archived counts as done
    assert sp.record_state(0) is None


def test_release_at_the_limit_archives_and_expiry_at_the_limit_archives() -> None:
    sp = make(delivery_count_limit=1, lock_duration_ms=10)
    sp.acquire("m1", [(0, 1)], 100, 0)
    sp.acknowledge("m1", [ack(0, 0, RELEASE)], 0)
    sp.release_expired(10)
    assert sp.take_dead_letters() == [
        DeadLetter(0, 1, "DELIVERY_COUNT_EXCEEDED"),
        DeadLetter(1, 1, "DELIVERY_COUNT_EXCEEDED"),
    ]
    assert sp.start_offset == 2


def test_reject_is_a_dead_letter_and_gap_is_not() -> None:
    sp = make()
    sp.acquire("m1", [(0, 3)], 100, 0)
    result = sp.acknowledge("m1", [ack(0, 0, GAP), ack(1, 1, REJECT)], 0)
    assert result.error is ErrorCode.NO_ERROR
    assert sp.take_dead_letters() == [DeadLetter(1, 1, "REJECTED")]
    assert sp.start_offset == 2
    sp.acknowledge("m1", [ack(3, 3, REJECT)], 0)
    assert sp.record_state(3) == (ARCHIVED, 1)
    assert sp.start_offset == 2  # offset 2 is still held


def test_a_lowered_limit_archives_an_available_record_instead_of_acquiring_it() -> None:
    sp = make(delivery_count_limit=5)
    sp.acquire("m1", [(0, 1)], 100, 0)
    sp.acknowledge("m1", [ack(0, 1, RELEASE)], 0)
    sp.acquire("m1", [(0, 1)], 100, 0)
    sp.acknowledge("m1", [ack(0, 1, RELEASE)], 0)
    sp.config = dataclasses.replace(sp.config, delivery_count_limit=2)
    assert sp.acquire("m2", [(0, 3)], 100, 0) == [AcquiredRange(2, 3, 1)]
    assert sp.take_dead_letters() == [
        DeadLetter(0, 2, "DELIVERY_COUNT_EXCEEDED"),
        DeadLetter(1, 2, "DELIVERY_COUNT_EXCEEDED"),
    ]
    assert sp.start_offset == 2


# -- acknowledge validation -----------------------------------------------------------------------
def _snapshot(sp: SharePartition) -> tuple[object, ...]:
    return (
        sp.start_offset,
        sp.end_offset,
        sp.changes,
        [sp.record(o) for o in range(sp.start_offset, sp.end_offset)],
        sp.acquired_count(),
    )


def test_acknowledging_what_the_member_does_not_hold_changes_nothing() -> None:
    sp = make()
    sp.acquire("m1", [(0, 3)], 100, 0)
    sp.acquire("m2", [(4, 5)], 100, 0)
    sp.acknowledge("m1", [ack(3, 3, ACCEPT)], 0)
    before = _snapshot(sp)
    for batches in (
        [ack(0, 1, ACCEPT), ack(4, 4, ACCEPT)],  # 4 is m2's
        [ack(0, 3, ACCEPT)],  # 3 is already acknowledged
        [ack(0, 0, ACCEPT), ack(6, 6, ACCEPT)],  # 6 was never acquired
        [ack(100, 100, ACCEPT)],  # beyond the end
    ):
        result = sp.acknowledge("m1", batches, 0)
        assert result.error is ErrorCode.INVALID_RECORD_STATE
        assert int(result.error) == 121
        assert result.message and not result.changed
        assert _snapshot(sp) == before
    assert sp.acknowledge("m3", [ack(0, 0, ACCEPT)], 0).error is ErrorCode.INVALID_RECORD_STATE
    assert sp.take_dead_letters() == []


def test_malformed_acknowledgements_are_invalid_requests_and_change_nothing() -> None:
    sp = make()
    sp.acquire("m1", [(0, 3)], 100, 0)
    before = _snapshot(sp)
    for batches in (
        [ack(2, 1, ACCEPT)],  # first > last
        [ack(-1, 1, ACCEPT)],  # negative
        [ack(0, 2, ACCEPT, ACCEPT)],  # neither one type nor one per offset
        [ack(0, 1)],  # no type
        [ack(0, 1, 9)],  # unknown type
        [ack(0, 1, ACCEPT), ack(1, 2, ACCEPT)],  # overlapping
        [ack(3, 3, ACCEPT), ack(0, 1, 7)],  # the bad batch is not the first
    ):
        result = sp.acknowledge("m1", batches, 0)
        assert result.error is ErrorCode.INVALID_REQUEST, batches
        assert int(result.error) == 42
        assert _snapshot(sp) == before


def test_per_offset_acknowledge_types() -> None:
    sp = make()
    sp.acquire("m1", [(0, 4)], 100, 0)
    result = sp.acknowledge("m1", [ack(0, 4, ACCEPT, RELEASE, REJECT, GAP, ACCEPT)], 0)
    assert result.error is ErrorCode.NO_ERROR and result.changed
    assert sp.start_offset == 1
    assert [sp.record_state(o) for o in range(1, 5)] == [
        (AVAILABLE, 1),
        (ARCHIVED, 1),
        (ARCHIVED, 1),
        (ACKNOWLEDGED, 1),
    ]
    assert sp.take_dead_letters() == [DeadLetter(2, 1, "REJECTED")]


def test_an_empty_acknowledgement_is_fine() -> None:
    sp = make()
    result = sp.acknowledge("m1", [], 0)
    assert result.error is ErrorCode.NO_ERROR and not result.changed


# -- start offset, lag, counts --------------------------------------------------------------------
def test_the_start_offset_moves_only_over_completed_records() -> None:
    sp = make(start=100)
    sp.acquire("m1", [(100, 109)], 100, 0)
    sp.acknowledge("m1", [ack(102, 105, ACCEPT)], 0)
    assert sp.start_offset == 100
    assert sp.lag(110) == 6
    assert sp.in_flight_count() == 6
    sp.acknowledge("m1", [ack(101, 101, REJECT)], 0)
    assert sp.start_offset == 100
    sp.acknowledge("m1", [ack(100, 100, ACCEPT)], 0)
    assert sp.start_offset == 106
    assert all(sp.record_state(o) is None for o in range(100, 106))
    assert sp.lag(110) == 4
    assert sp.lag(120) == 14
    assert sp.lag(0) == 0
    sp.acknowledge("m1", [ack(106, 109, RELEASE)], 0)
    assert sp.start_offset == 106
    assert sp.acquired_count() == 0
    assert sp.in_flight_count() == 4


def test_changes_counter_and_dirty_flag() -> None:
    sp = make()
    assert not sp.dirty
    sp.acquire("m1", [(0, 1)], 100, 0)
    assert sp.dirty
    version = sp.changes
    sp.mark_persisted(version)
    assert not sp.dirty
    sp.acquire("m1", [(0, 1)], 100, 0)  # nothing to acquire
    assert sp.release_expired(0) == 0
    assert sp.acknowledge("m2", [ack(0, 0, ACCEPT)], 0).error
    assert not sp.dirty
    sp.acknowledge("m1", [ack(0, 0, ACCEPT)], 0)
    assert sp.dirty and sp.changes > version


# -- persistence ----------------------------------------------------------------------------------
def test_state_batches_coalesce_and_persist_locks_as_available() -> None:
    sp = make(start=10)
    sp.acquire("m1", [(10, 19), (22, 23)], 100, 0)
    sp.acknowledge("m1", [ack(12, 13, ACCEPT), ack(14, 14, REJECT), ack(15, 16, RELEASE)], 0)
    sp.acquire("m2", [(15, 15)], 100, 0)
    assert sp.state_batches() == [
        StateBatch(10, 11, 0, 1),
        StateBatch(12, 13, 2, 1),
        StateBatch(14, 14, 4, 1),
        StateBatch(15, 15, 0, 2),
        StateBatch(16, 19, 0, 1),
        StateBatch(22, 23, 0, 1),  # the hole 20-21 is not persisted
    ]
    again = reload(sp)
    assert again.start_offset == 10 and again.end_offset == 24
    assert again.acquired_count() == 0
    assert again.state_batches() == sp.state_batches()
    assert again.record_state(15) == (AVAILABLE, 2)
    assert again.next_fetch_offset() == 10
    assert again.acquire("m3", [(10, 23), (24, 24)], 100, 0) == [
        AcquiredRange(10, 11, 2),
        AcquiredRange(15, 15, 3),
        AcquiredRange(16, 19, 2),
        AcquiredRange(22, 23, 2),
        AcquiredRange(24, 24, 1),
    ]


def test_loading_state_batches() -> None:
    sp = SharePartition(
        "g",
        TOPIC,
        3,
        start_offset=5,
        state_epoch=4,
        batches=[
            StateBatch(8, 9, int(ACQUIRED), 2),  # should not occur: loads as AVAILABLE
            StateBatch(0, 6, int(ACKNOWLEDGED), 1),  # partly below the start offset
            StateBatch(12, 12, int(ARCHIVED), 5),
        ],
    )
    assert sp.state_epoch == 4
    # 5-6 are done and 7 is not a record: the start moves to the first open record
    assert sp.start_offset == 8
    assert sp.end_offset == 13
    assert sp.record_state(8) == (AVAILABLE, 2)
    assert sp.record_state(12) == (ARCHIVED, 5)
    assert sp.in_flight_count() == 2
    assert sp.acquired_count() == 0
    assert sp.next_fetch_offset() == 8
    assert not sp.dirty


def test_loading_nothing_starts_empty() -> None:
    sp = make(start=42)
    assert (sp.start_offset, sp.end_offset, sp.state_batches()) == (42, 42, [])
    assert sp.next_fetch_offset() == 42
    assert sp.next_lock_deadline() is None


def test_reset_drops_everything_and_bumps_the_state_epoch() -> None:
    sp = make()
    sp.acquire("m1", [(0, 9)], 100, 0)
    sp.acknowledge("m1", [ack(0, 0, REJECT)], 0)
    changes = sp.changes
    sp.reset(3)
    assert (sp.start_offset, sp.end_offset, sp.state_epoch) == (3, 3, 1)
    assert sp.changes > changes
    assert sp.state_batches() == []
    assert sp.acquired_count() == 0 and sp.in_flight_count() == 0
    assert sp.acquired_by("m1") == []
    assert sp.next_lock_deadline() is None
    assert sp.release_expired(10**9) == 0
    assert sp.next_fetch_offset() == 3
    assert sp.acquire("m2", [(0, 4)], 100, 0) == [AcquiredRange(3, 4, 1)]
    assert sp.take_dead_letters() == [DeadLetter(0, 1, "REJECTED")]  # archived before the reset


def test_tens_of_thousands_in_flight() -> None:
    n = 30_000
    sp = make(max_in_flight=n)
    assert sp.acquire("m1", [(0, n - 1)], n, 0) == [AcquiredRange(0, n - 1, 1)]
    # acknowledged from the top down, the start offset moves only at the very end
    for offset in range(n - 1, 0, -1):
        sp.acknowledge("m1", [ack(offset, offset, ACCEPT)], 0)
    assert sp.start_offset == 0 and sp.in_flight_count() == 1
    assert sp.state_batches() == [StateBatch(0, 0, 0, 1), StateBatch(1, n - 1, 2, 1)]
    sp.acknowledge("m1", [ack(0, 0, ACCEPT)], 0)
    assert sp.start_offset == sp.end_offset == n
    assert sp.state_batches() == []


# -- property ---------------------------------------------------------------------------------------
MEMBERS = ("m1", "m2", "m3")
LIMIT = 3
MAX_IN_FLIGHT = 10


@dataclasses.dataclass(frozen=True)
class Acquire:
    member: str
    max_records: int
    shape: list[tuple[int, int]]  # (hole before, length - 1) of each batch read from the log


@dataclasses.dataclass(frozen=True)
class Ack:
    member: str
    first: int
    extra: int
    types: list[int]


@dataclasses.dataclass(frozen=True)
class AckHeld:
    """Acknowledge up to four offsets some member really holds, so that acks mostly succeed."""

    pick: int  # which of the members holding locks
    type: int


@dataclasses.dataclass(frozen=True)
class Tick:
    ms: int


@dataclasses.dataclass(frozen=True)
class Leave:
    member: str


_members = st.sampled_from(MEMBERS)
_types = st.sampled_from([0, 1, 2, 3])
Op = Acquire | Ack | AckHeld | Tick | Leave
_acquire = st.builds(
    Acquire,
    _members,
    st.integers(-1, 8),
    st.lists(st.tuples(st.integers(0, 3), st.integers(0, 4)), min_size=1, max_size=3),
)
_ack_held = st.builds(AckHeld, st.integers(0, 2), _types)
_ack_any = st.builds(
    Ack, _members, st.integers(0, 40), st.integers(0, 3), st.lists(_types, max_size=4)
)
_tick = st.builds(Tick, st.integers(0, 250))
_leave = st.builds(Leave, _members)
_ops = st.one_of(_acquire, _ack_any, _ack_held, _tick, _leave)


def _check(sp: SharePartition, now: int) -> None:
    assert sp.start_offset <= sp.end_offset
    assert sp.next_fetch_offset() >= sp.start_offset
    holders: dict[int, str] = {}
    for member in MEMBERS:
        for offset in sp.acquired_by(member):
            assert offset not in holders, "an offset acquired by two members"
            holders[offset] = member
    assert sp.acquired_count() == len(holders)
    in_flight = 0
    for offset in range(max(0, sp.start_offset - 20), sp.end_offset + 5):
        rec = sp.record(offset)
        if offset < sp.start_offset or offset >= sp.end_offset:
            assert rec is None  # below the start offset: forgotten
            continue
        if offset == sp.start_offset:
            assert rec is not None and rec.state in (AVAILABLE, ACQUIRED)
        if rec is None:
            continue
        assert 0 <= rec.delivery_count <= LIMIT
        if rec.state is ACQUIRED:
            assert rec.lock_deadline_ms is not None and rec.lock_deadline_ms > now
            assert holders.get(offset) == rec.member_id
            assert rec.delivery_count >= 1
        else:
            assert rec.member_id is None and rec.lock_deadline_ms is None
            assert offset not in holders
        if rec.state is AVAILABLE:
            assert rec.delivery_count < LIMIT
        if rec.state in (AVAILABLE, ACQUIRED):
            in_flight += 1
    assert sp.in_flight_count() == in_flight <= MAX_IN_FLIGHT
    rebuilt = reload(sp)
    assert (rebuilt.start_offset, rebuilt.end_offset) == (sp.start_offset, sp.end_offset)
    for offset in range(sp.start_offset, sp.end_offset):
        state = sp.record_state(offset)
        if state is not None and state[0] is ACQUIRED:
            state = (AVAILABLE, state[1])
        assert rebuilt.record_state(offset) == state


def _acknowledge(sp: SharePartition, member: str, batch: AckBatch, now: int) -> ErrorCode:
    before = _snapshot(sp)
    result = sp.acknowledge(member, [batch], now)
    if result.error is ErrorCode.NO_ERROR:
        assert result.changed
    else:
        assert not result.changed and _snapshot(sp) == before
    return result.error


def _apply(sp: SharePartition, op: Op, now: int) -> int:
    if isinstance(op, Acquire):
        batches, base = [], sp.next_fetch_offset()
        for hole, extra in op.shape:
            batches.append((base + hole, base + hole + extra))
            base += hole + extra + 1
        got = sp.acquire(op.member, batches, op.max_records, now)
        assert sum(r.last_offset - r.first_offset + 1 for r in got) <= max(0, op.max_records)
        for r in got:
            for offset in range(r.first_offset, r.last_offset + 1):
                assert sp.record_state(offset) == (ACQUIRED, r.delivery_count)
    elif isinstance(op, Ack):
        _acknowledge(sp, op.member, AckBatch(op.first, op.first + op.extra, tuple(op.types)), now)
    elif isinstance(op, AckHeld):
        holders = sp.members_holding_locks()
        if holders:
            member = holders[op.pick % len(holders)]
            held = sp.acquired_by(member)
            last = held[0]
            while last + 1 in held and last - held[0] < 3:
                last += 1
            result = _acknowledge(sp, member, AckBatch(held[0], last, (op.type,)), now)
            assert result is ErrorCode.NO_ERROR
    elif isinstance(op, Tick):
        now += op.ms
        sp.release_expired(now)
        deadline = sp.next_lock_deadline()
        assert deadline is None or deadline > now
    else:
        sp.release_member(op.member)
        assert sp.acquired_by(op.member) == []
    return now


@settings(derandomize=True, max_examples=200, deadline=None)
@given(st.lists(_ops, min_size=10, max_size=60))
def test_random_operations_keep_the_invariants(ops: list[Op]) -> None:
    sp = make(lock_duration_ms=100, delivery_count_limit=LIMIT, max_in_flight=MAX_IN_FLIGHT)
    now = 0
    for op in ops:
        now = _apply(sp, op, now)
        for letter in sp.take_dead_letters():
            assert letter.reason in ("REJECTED", "DELIVERY_COUNT_EXCEEDED")
            assert 1 <= letter.delivery_count <= LIMIT
            assert letter.offset < sp.end_offset
        _check(sp, now)


def test_skip_to_moves_the_end_over_markers() -> None:
    sp = SharePartition("g", uuid.uuid4(), 0, start_offset=0)
    assert [(r.first_offset, r.last_offset) for r in sp.acquire("a", [(0, 2)], 10, 0)] == [(0, 2)]
    sp.skip_to(5)  # offsets 3-4 were a transaction marker: nothing to deliver
    assert sp.end_offset == 5 and sp.next_fetch_offset() == 5
    sp.acknowledge("a", [AckBatch(0, 2, (1,))], 0)
    assert sp.start_offset == 5 and sp.in_flight_count() == 0
    sp.skip_to(3)  # never backwards
    assert sp.end_offset == 5


def test_truncate_before_forgets_records_and_locks_below_the_log_start() -> None:
    sp = SharePartition("g", uuid.uuid4(), 0, start_offset=0)
    sp.acquire("a", [(0, 9)], 5, 0)  # 0-4 held by a
    sp.acquire("b", [(5, 9)], 5, 0)  # 5-9 held by b
    sp.truncate_before(7)
    assert sp.start_offset == 7
    assert sp.acquired_by("a") == [] and sp.acquired_by("b") == [7, 8, 9]
    assert sp.record_state(3) is None
    assert sp.take_dead_letters() == []
    assert sp.release_expired(10**12) == 3  # the surviving locks still expire
    assert sp.next_fetch_offset() == 7
    sp.truncate_before(20)  # past everything known
    assert sp.start_offset == 20 and sp.end_offset == 20 and sp.in_flight_count() == 0


def test_renew_extends_the_lock_and_keeps_the_record() -> None:
    sp = SharePartition(
        "g", uuid.uuid4(), 0, start_offset=0, config=SharePartitionConfig(lock_duration_ms=1000)
    )
    sp.acquire("a", [(0, 3)], 10, 0)  # locked until 1000
    assert sp.acknowledge("a", [AckBatch(1, 2, (4,))], 800).error == ErrorCode.NO_ERROR
    assert sp.release_expired(1000) == 2  # 0 and 3 expire; 1-2 now run until 1800
    assert sp.acquired_by("a") == [1, 2]
    assert sp.record_state(1) == (RecordState.ACQUIRED, 1)
    assert sp.acknowledge("b", [AckBatch(1, 1, (4,))], 900).error == ErrorCode.INVALID_RECORD_STATE
    assert sp.release_expired(1799) == 0 and sp.release_expired(1800) == 2
