"""Leader balance as pure decisions: ElectLeaders (preferred and unclean) per partition with Kafka's
errors, and the automatic rebalance check (auto.leader.rebalance.enable, leader.imbalance.*).
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from kafkalite.cluster.controller.election import (
    offline_partition_leader,
    preferred_replica_leader,
)
from kafkalite.cluster.controller.events import ReplyLeaderElection
from kafkalite.cluster.controller.states import NO_LEADER, LeaderIsr, TopicPartition
from kafkalite.protocol.errors import ErrorCode

ElectionResult = tuple[ErrorCode, str | None]


class ElectionType(enum.IntEnum):
    """ElectLeaders' election type (KIP-460): 0 the preferred replica, 1 any live replica."""

    PREFERRED = 0
    UNCLEAN = 1


@dataclass(frozen=True)
class LeaderBalanceConfig:
    """Kafka's auto.leader.rebalance.enable, leader.imbalance.per.broker.percentage and
    leader.imbalance.check.interval.seconds (defaults as Kafka's)."""

    enable: bool = True
    per_broker_percentage: int = 10
    check_interval_s: float = 300.0


@dataclass
class ElectionDecision:
    """Per partition: the leadership to write (`proposals`), or an answer decided without a write."""

    election_type: (
        ElectionType | None
    )  # None: not a type Kafka knows (every answer INVALID_REQUEST)
    proposals: dict[TopicPartition, LeaderIsr] = field(default_factory=dict)
    results: dict[TopicPartition, ElectionResult] = field(default_factory=dict)

    def hold_back(self, writing: Collection[TopicPartition]) -> None:
        """Partitions with another change being written are not elected (the caller may retry)."""
        for tp in [tp for tp in self.proposals if tp in writing]:
            del self.proposals[tp]
            self.results[tp] = self._failed(tp, "another change of it is being written")

    def reply(self, request_id: int, lost: Collection[TopicPartition] = ()) -> ReplyLeaderElection:
        """The answer once the proposals are written; `lost`: writes that lost their
        compare-and-set (someone else changed the partition meanwhile)."""
        results = dict(self.results)
        leaders: dict[TopicPartition, int] = {}
        for tp, st in self.proposals.items():
            if tp in lost:
                results[tp] = self._failed(tp, "its state changed while the election was written")
            else:
                results[tp] = (ErrorCode.NO_ERROR, None)
                leaders[tp] = st.leader
        return ReplyLeaderElection(request_id, results, leaders)

    def _failed(self, tp: TopicPartition, why: str) -> ElectionResult:
        return failed_election(tp, self.election_type or ElectionType.PREFERRED, why)


def _strategy(election_type: ElectionType) -> str:
    if election_type is ElectionType.PREFERRED:
        return "PreferredReplicaPartitionLeaderElectionStrategy"
    return "OfflinePartitionLeaderElectionStrategy"


def failed_election(tp: TopicPartition, election_type: ElectionType, why: str) -> ElectionResult:
    """The answer for a partition whose election found no leader (Kafka's StateChangeFailed)."""
    code = (
        ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
        if election_type is ElectionType.PREFERRED
        else ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
    )
    return code, (
        f"Failed to elect leader for partition {tp[0]}-{tp[1]} under strategy "
        f"{_strategy(election_type)}: {why}"
    )


def decide_elections(
    election_type: int,
    partitions: Iterable[TopicPartition],
    *,
    assignments: Mapping[TopicPartition, Sequence[int]],
    leadership: Mapping[TopicPartition, LeaderIsr],
    live: Collection[int],
    deleting: Collection[str],
) -> ElectionDecision:
    """ElectLeaders, as Kafka's controller decides it per partition: a partition that does not
    exist gets UNKNOWN_TOPIC_OR_PARTITION, one of a topic being deleted INVALID_TOPIC_EXCEPTION;
    preferred: ELECTION_NOT_NEEDED when the first replica leads, else it leads if it is live and in
    the ISR (PREFERRED_LEADER_NOT_AVAILABLE otherwise); unclean: ELECTION_NOT_NEEDED while a live
    leader exists, else the first live in-sync replica, else the first live replica at all
    (ELIGIBLE_LEADERS_NOT_AVAILABLE when none is live). `live` excludes brokers shutting down."""
    etype = ElectionType(election_type) if election_type in (0, 1) else None
    out = ElectionDecision(etype)
    for tp in dict.fromkeys(partitions):
        if etype is None:
            out.results[tp] = (
                ErrorCode.INVALID_REQUEST,
                f"Unknown election type {election_type}: 0 (preferred) or 1 (unclean)",
            )
            continue
        replicas = assignments.get(tp)
        if not replicas:
            out.results[tp] = (
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                "The partition does not exist.",
            )
            continue
        if tp[0] in deleting:
            out.results[tp] = (ErrorCode.INVALID_TOPIC_EXCEPTION, "The topic is being deleted")
            continue
        st = leadership.get(tp)
        if st is None:
            out.results[tp] = failed_election(tp, etype, "no leadership recorded yet")
            continue
        if etype is ElectionType.PREFERRED:
            if st.leader == replicas[0]:
                out.results[tp] = (ErrorCode.ELECTION_NOT_NEEDED, None)
                continue
            elected = preferred_replica_leader(st, replicas, live)
            why = f"preferred replica {replicas[0]} is not live or not in the ISR {list(st.isr)}"
        else:
            if st.leader != NO_LEADER and st.leader in live:
                out.results[tp] = (ErrorCode.ELECTION_NOT_NEEDED, None)
                continue
            elected = offline_partition_leader(st, replicas, live, unclean=True)
            why = f"no replica of {list(replicas)} is live"
        if elected is None:
            out.results[tp] = failed_election(tp, etype, why)
        else:
            out.proposals[tp] = elected
    return out


def imbalance_ratios(
    assignments: Mapping[TopicPartition, Sequence[int]],
    leadership: Mapping[TopicPartition, LeaderIsr],
    deleting: Collection[str] = (),
) -> dict[int, tuple[float, list[TopicPartition]]]:
    """Per preferred broker: the share of the partitions it is the preferred replica of that another
    broker leads, and those partitions (Kafka's leader imbalance ratio)."""
    by_preferred: dict[int, list[TopicPartition]] = {}
    for tp, replicas in assignments.items():
        if replicas and tp[0] not in deleting:
            by_preferred.setdefault(replicas[0], []).append(tp)
    out: dict[int, tuple[float, list[TopicPartition]]] = {}
    for broker, tps in sorted(by_preferred.items()):
        off = [tp for tp in tps if (st := leadership.get(tp)) is not None and st.leader != broker]
        out[broker] = (len(off) / len(tps), off)
    return out


def rebalance_candidates(
    assignments: Mapping[TopicPartition, Sequence[int]],
    leadership: Mapping[TopicPartition, LeaderIsr],
    live: Collection[int],
    per_broker_percentage: int,
    deleting: Collection[str] = (),
) -> list[TopicPartition]:
    """The automatic rebalance check: for each broker whose imbalance ratio exceeds the
    percentage, its partitions led elsewhere whose preferred replica can lead (live, in the ISR)."""
    out: list[TopicPartition] = []
    threshold = per_broker_percentage / 100.0
    for ratio, off in imbalance_ratios(assignments, leadership, deleting).values():
        if ratio <= threshold:
            continue
        out += [tp for tp in off if preferred_replica_leader(leadership[tp], assignments[tp], live)]
    return out
