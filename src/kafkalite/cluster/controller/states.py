"""Partition and replica states of the controller, each with its table of valid previous states and one
checked transition (Kafka's PartitionStateMachine / ReplicaStateMachine); an invalid move is refused.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass

log = logging.getLogger("kafkalite.cluster.controller")

TopicPartition = tuple[str, int]
NO_LEADER = -1


class PartitionState(enum.Enum):
    NON_EXISTENT = "NonExistentPartition"
    NEW = "NewPartition"
    ONLINE = "OnlinePartition"
    OFFLINE = "OfflinePartition"


class ReplicaState(enum.Enum):
    NON_EXISTENT = "NonExistentReplica"
    NEW = "NewReplica"
    ONLINE = "OnlineReplica"
    OFFLINE = "OfflineReplica"
    DELETION_STARTED = "ReplicaDeletionStarted"
    DELETION_SUCCESSFUL = "ReplicaDeletionSuccessful"
    DELETION_INELIGIBLE = "ReplicaDeletionIneligible"


P, R = PartitionState, ReplicaState

PARTITION_VALID_PREVIOUS: dict[PartitionState, frozenset[PartitionState]] = {
    P.NEW: frozenset({P.NON_EXISTENT}),
    P.ONLINE: frozenset({P.NEW, P.ONLINE, P.OFFLINE}),
    P.OFFLINE: frozenset({P.NEW, P.ONLINE, P.OFFLINE}),
    P.NON_EXISTENT: frozenset({P.OFFLINE}),
}

REPLICA_VALID_PREVIOUS: dict[ReplicaState, frozenset[ReplicaState]] = {
    R.NEW: frozenset({R.NON_EXISTENT}),
    R.ONLINE: frozenset({R.NEW, R.ONLINE, R.OFFLINE, R.DELETION_INELIGIBLE}),
    R.OFFLINE: frozenset({R.NEW, R.ONLINE, R.OFFLINE, R.DELETION_INELIGIBLE}),
    R.DELETION_STARTED: frozenset({R.OFFLINE}),
    R.DELETION_SUCCESSFUL: frozenset({R.DELETION_STARTED}),
    R.DELETION_INELIGIBLE: frozenset({R.OFFLINE, R.DELETION_STARTED}),
    R.NON_EXISTENT: frozenset({R.DELETION_SUCCESSFUL}),
}


def partition_transition(
    states: dict[TopicPartition, PartitionState], tp: TopicPartition, target: PartitionState
) -> bool:
    """Move `tp` to `target` if its current state allows it; False (and a log line) otherwise."""
    current = states.get(tp, P.NON_EXISTENT)
    if current not in PARTITION_VALID_PREVIOUS[target]:
        log.error(
            "refused partition state change of %s-%d: %s -> %s", *tp, current.value, target.value
        )
        return False
    if target is P.NON_EXISTENT:
        states.pop(tp, None)
    else:
        states[tp] = target
    return True


def replica_transition(
    states: dict[tuple[TopicPartition, int], ReplicaState],
    tp: TopicPartition,
    replica: int,
    target: ReplicaState,
) -> bool:
    key = (tp, replica)
    current = states.get(key, R.NON_EXISTENT)
    if current not in REPLICA_VALID_PREVIOUS[target]:
        log.error(
            "refused replica state change of %s-%d on %d: %s -> %s",
            tp[0], tp[1], replica, current.value, target.value,
        )  # fmt: skip
        return False
    if target is R.NON_EXISTENT:
        states.pop(key, None)
    else:
        states[key] = target
    return True


@dataclass(frozen=True, slots=True)
class LeaderIsr:
    """A partition's leadership as its state znode holds it; `partition_epoch` is the znode version
    (-1: not written yet), compared on every update."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int = -1

    def new_leader(self, leader: int, isr: tuple[int, ...]) -> LeaderIsr:
        """A leadership change: the leader epoch moves on."""
        return LeaderIsr(leader, self.leader_epoch + 1, isr, self.partition_epoch)

    def new_isr(self, isr: tuple[int, ...]) -> LeaderIsr:
        """An ISR change under the same leader (KIP-497: the leader epoch stays)."""
        return LeaderIsr(self.leader, self.leader_epoch, isr, self.partition_epoch)
