"""Group states of the classic group protocol and the table of their valid previous states.

Every transition of a group goes through `transition`, which checks the table and stamps the time.
"""

from __future__ import annotations

import enum


class GroupState(enum.Enum):
    """The five states of a classic group; `.value` is the name Kafka puts on the wire."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value

    @classmethod
    def parse(cls, name: str) -> GroupState | None:
        """The state with this wire name (case-insensitive), or None."""
        wanted = name.strip().lower()
        for state in cls:
            if state.value.lower() == wanted:
                return state
        return None


_S = GroupState

# state -> the states a group may be in just before entering it
VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    # a rebalance starts from a settled group, an empty one, or one still waiting for its leader's sync
    _S.PREPARING_REBALANCE: frozenset({_S.STABLE, _S.COMPLETING_REBALANCE, _S.EMPTY}),
    # every member that meant to rejoin has joined (or the join deadline passed)
    _S.COMPLETING_REBALANCE: frozenset({_S.PREPARING_REBALANCE}),
    # the leader's assignment has been stored
    _S.STABLE: frozenset({_S.COMPLETING_REBALANCE}),
    # the rebalance ended with no members left
    _S.EMPTY: frozenset({_S.PREPARING_REBALANCE}),
    # the group is being removed (deleted, expired, or its partition unloaded)
    _S.DEAD: frozenset(
        {_S.STABLE, _S.PREPARING_REBALANCE, _S.COMPLETING_REBALANCE, _S.EMPTY, _S.DEAD}
    ),
}


class IllegalStateTransition(RuntimeError):
    """A transition the table does not allow: always a coordinator bug, never a client error."""

    def __init__(self, group_id: str, current: GroupState, target: GroupState) -> None:
        super().__init__(
            f"group {group_id!r}: cannot go from {current} to {target}; "
            f"{target} may only follow {sorted(s.value for s in VALID_PREVIOUS_STATES[target])}"
        )
        self.group_id = group_id
        self.current = current
        self.target = target


def is_valid_transition(current: GroupState, target: GroupState) -> bool:
    return current in VALID_PREVIOUS_STATES[target]


def transition(
    group_id: str, current: GroupState, target: GroupState, now_ms: int
) -> tuple[GroupState, int]:
    """Check `current -> target` against the table; return the new state and its timestamp."""
    if not is_valid_transition(current, target):
        raise IllegalStateTransition(group_id, current, target)
    return target, now_ms


def can_rebalance(state: GroupState) -> bool:
    """A rebalance may start only from a valid previous state of PreparingRebalance."""
    return is_valid_transition(state, GroupState.PREPARING_REBALANCE)
