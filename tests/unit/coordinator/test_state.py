"""Every group state transition, valid and invalid, against the table written out by hand here."""

from __future__ import annotations

import itertools

import pytest

from kafkalite.coordinator.group import GroupMetadata
from kafkalite.coordinator.state import (
    GroupState,
    IllegalStateTransition,
    can_rebalance,
    transition,
)

S = GroupState
EMPTY, PREP, COMP, STABLE, DEAD = (
    S.EMPTY,
    S.PREPARING_REBALANCE,
    S.COMPLETING_REBALANCE,
    S.STABLE,
    S.DEAD,
)

# (from, to) pairs the design allows; every other pair must be refused
ALLOWED = {
    (STABLE, PREP),
    (COMP, PREP),
    (EMPTY, PREP),
    (PREP, COMP),
    (COMP, STABLE),
    (PREP, EMPTY),
    (STABLE, DEAD),
    (PREP, DEAD),
    (COMP, DEAD),
    (EMPTY, DEAD),
    (DEAD, DEAD),
}
ALL_PAIRS = list(itertools.product(list(S), repeat=2))


def test_table_covers_twentyfive_pairs() -> None:
    assert len(ALL_PAIRS) == 25
    assert len(ALLOWED) == 11


@pytest.mark.parametrize(("src", "dst"), ALL_PAIRS, ids=lambda s: s.value)
def test_transition(src: GroupState, dst: GroupState) -> None:
    group = GroupMetadata("g", state=src, state_timestamp=5)
    if (src, dst) in ALLOWED:
        group.transition_to(dst, 42)
        assert group.state is dst
        assert group.state_timestamp == 42
        assert transition("g", src, dst, 7) == (dst, 7)
    else:
        with pytest.raises(IllegalStateTransition) as info:
            group.transition_to(dst, 42)
        assert group.state is src and group.state_timestamp == 5  # untouched
        assert info.value.current is src and info.value.target is dst
        assert dst.value in str(info.value)


@pytest.mark.parametrize(
    ("state", "expected"),
    [(EMPTY, True), (STABLE, True), (COMP, True), (PREP, False), (DEAD, False)],
)
def test_can_rebalance(state: GroupState, expected: bool) -> None:
    assert can_rebalance(state) is expected
    assert GroupMetadata("g", state=state).can_rebalance() is expected


@pytest.mark.parametrize(
    ("text", "state"),
    [
        ("Stable", STABLE),
        ("stable", STABLE),
        ("PREPARINGREBALANCE", PREP),
        ("CompletingRebalance", COMP),
        ("x", None),
    ],
)
def test_parse_wire_names(text: str, state: GroupState | None) -> None:
    assert GroupState.parse(text) is state


def test_wire_names() -> None:
    assert [str(s) for s in S] == [
        "Empty",
        "PreparingRebalance",
        "CompletingRebalance",
        "Stable",
        "Dead",
    ]
