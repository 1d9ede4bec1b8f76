"""Reassignment decisions as pure functions, table-driven: the union ordering of a move, validation of a
target (Kafka's codes), cancel and replace, and each step (start, switch to the target, stop dropped).
"""

from __future__ import annotations

import pytest

from kafkalite.cluster.controller.reassignment import (
    ReplicaAssignment,
    build_reassignment,
    is_complete,
    reassignment_step,
    validate_target,
)
from kafkalite.cluster.controller.states import NO_LEADER, LeaderIsr
from kafkalite.protocol.errors import ErrorCode

RA = ReplicaAssignment
STEADY = RA((1, 2, 3))
MOVING = RA((2, 3, 4, 1), adding=(4,), removing=(1,))  # {1,2,3} -> {2,3,4}


@pytest.mark.parametrize(
    ("current", "target", "expected"),
    [
        (STEADY, (2, 3, 4), RA((2, 3, 4, 1), (4,), (1,))),  # target first, then the originals
        (STEADY, (4, 5, 6), RA((4, 5, 6, 1, 2, 3), (4, 5, 6), (1, 2, 3))),
        (STEADY, (3, 2, 1), RA((3, 2, 1))),  # a reorder moves nothing
        (STEADY, (1, 2), RA((1, 2, 3), (), (3,))),  # shrink the replication factor
        # a new target replaces the one in flight: it starts from the original set again
        (MOVING, (2, 3, 5), RA((2, 3, 5, 1), (5,), (1,))),
        (MOVING, (1, 2, 3), RA((1, 2, 3))),  # the original set again: nothing moves
    ],
)
def test_reassign_to_orders_target_first_and_starts_from_the_original(
    current: RA, target: tuple[int, ...], expected: RA
) -> None:
    assert build_reassignment(current, target) == expected
    assert expected.origin == tuple(r for r in expected.replicas if r not in expected.adding)


@pytest.mark.parametrize(
    ("current", "expected"),
    # as Kafka: the original replicas in the order the union holds them (its originReplicas)
    [(MOVING, RA((2, 3, 1))), (RA((2, 5, 1, 3), (5,), (3,)), RA((2, 1, 3))), (STEADY, None)],
)
def test_cancel_goes_back_to_the_original_set_or_finds_nothing(
    current: RA, expected: RA | None
) -> None:
    assert build_reassignment(current, None) == expected


@pytest.mark.parametrize(
    ("current", "target", "live", "fragment"),
    [
        (STEADY, (), {1, 2, 3, 4}, "Empty replica list"),
        (STEADY, (2, 2, 4), {1, 2, 3, 4}, "Duplicate replica ids"),
        (STEADY, (2, -1, 4), {1, 2, 3, 4}, "Invalid broker id"),
        (STEADY, (2, 3, 9), {1, 2, 3, 4}, "not alive"),
        (STEADY, (2, 3, 4), {1, 2, 3}, "not alive"),  # 4 is down
        (STEADY, (2, 3, 4), {1, 2, 3, 4}, None),
        # only the replicas being added must be alive: 1 (leaving) may be down
        (STEADY, (2, 3, 4), {2, 3, 4}, None),
    ],
)
def test_validate_target_uses_kafkas_checks(
    current: RA, target: tuple[int, ...], live: set[int], fragment: str | None
) -> None:
    why = validate_target(current, target, live)
    if fragment is None:
        assert why is None
    else:
        assert why is not None
        assert why[0] == ErrorCode.INVALID_REPLICATION_ASSIGNMENT and fragment in why[1]


@pytest.mark.parametrize(
    ("assignment", "isr", "complete"),
    [
        (MOVING, (1, 2, 3), False),
        (MOVING, (1, 2, 3, 4), True),
        (MOVING, (2, 3, 4), True),
        (STEADY, (1, 2, 3), False),  # nothing in flight
    ],
)
def test_complete_once_every_target_replica_is_in_sync(
    assignment: RA, isr: tuple[int, ...], complete: bool
) -> None:
    assert is_complete(assignment, isr) is complete


ALL = {1, 2, 3, 4, 5}


@pytest.mark.parametrize(
    ("name", "st", "assignment", "unneeded", "live", "state", "final", "stop"),
    [
        # not in sync yet: the leader epoch moves so the union hears of the new replica set
        ("start", LeaderIsr(1, 5, (1, 2, 3), 9), MOVING, (), ALL,
         LeaderIsr(1, 6, (1, 2, 3), 9), None, ()),
        # in sync, the leader is being removed: the first live in-sync target replica leads
        ("switch, leader moves", LeaderIsr(1, 5, (1, 2, 3, 4), 9), MOVING, (), ALL,
         LeaderIsr(2, 6, (2, 3, 4), 9), RA((2, 3, 4)), (1,)),
        # in sync, the leader stays: only the ISR and the replicas shrink
        ("switch, leader stays", LeaderIsr(3, 5, (1, 2, 3, 4), 9), MOVING, (), ALL,
         LeaderIsr(3, 6, (2, 3, 4), 9), RA((2, 3, 4)), (1,)),
        # a target leader that is down is passed over
        ("switch, target leader down", LeaderIsr(1, 5, (1, 2, 3, 4), 9), MOVING, (), {1, 3, 4},
         LeaderIsr(3, 6, (2, 3, 4), 9), RA((2, 3, 4)), (1,)),
        # cancel: back to {1,2,3}; 4 (being added) leaves and is deleted
        ("cancel", LeaderIsr(1, 5, (1, 2, 3, 4), 9), RA((1, 2, 3)), (4,), ALL,
         LeaderIsr(1, 6, (1, 2, 3), 9), None, (4,)),
        # cancel after leadership went to an added replica: a replica of the original set leads
        ("cancel, added leader", LeaderIsr(4, 5, (1, 2, 4), 9), RA((1, 2, 3)), (4,), ALL,
         LeaderIsr(1, 6, (1, 2), 9), None, (4,)),
        # replace {2,3,4} by {2,3,5}: 4 is dropped at once, 5 starts
        ("replace", LeaderIsr(1, 5, (1, 2, 3), 9), RA((2, 3, 5, 1), (5,), (1,)), (4,), ALL,
         LeaderIsr(1, 6, (1, 2, 3), 9), None, (4,)),
        # nobody of the target is live and in sync: no leader
        ("no candidate", LeaderIsr(1, 5, (1, 2, 3, 4), 9), MOVING, (), {1},
         LeaderIsr(NO_LEADER, 6, (2, 3, 4), 9), RA((2, 3, 4)), (1,)),
    ],
)  # fmt: skip
def test_reassignment_steps(
    name: str,
    st: LeaderIsr,
    assignment: RA,
    unneeded: tuple[int, ...],
    live: set[int],
    state: LeaderIsr,
    final: RA | None,
    stop: tuple[int, ...],
) -> None:
    step = reassignment_step(st, assignment, unneeded, live)
    assert (step.state, step.final, step.stop) == (state, final, stop), name
