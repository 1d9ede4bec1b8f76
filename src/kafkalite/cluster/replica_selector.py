"""KIP-392 replica selection: which replica a consumer should read a partition from, decided by the
leader from `replica.selector.class`, the client's rack and the in-sync, alive replicas' racks and positions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kafkalite.cluster.partition import Partition

LEADER_SELECTOR = "org.apache.kafka.common.replica.LeaderSelector"
RACK_AWARE_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
SELECTOR_CLASSES = (LEADER_SELECTOR, RACK_AWARE_SELECTOR)

NO_PREFERRED_REPLICA = -1  # the Fetch response's "read from the leader" value


@dataclass(frozen=True, slots=True)
class ReplicaView:
    """One replica as the selector sees it (Kafka's ReplicaView): where it is and how caught up."""

    broker_id: int
    rack: str | None
    log_end_offset: int
    time_since_caught_up_ms: int
    log_start_offset: int = -1  # -1: not known (a follower fetching with Fetch v4 or older)


def parse_selector(value: object) -> str | None:
    """The selector class named by `replica.selector.class`: None (unset) means the leader only, as
    in Kafka; any class kafkalite does not implement is a ValueError (a config error at startup)."""
    if value is None:
        return None
    name = str(value).strip()
    if not name:
        return None
    if name in SELECTOR_CLASSES:
        return name
    raise ValueError(
        f"replica.selector.class={name}: kafkalite implements {' and '.join(SELECTOR_CLASSES)}"
    )


def select(
    selector: str | None, client_rack: str | None, leader: ReplicaView, replicas: list[ReplicaView]
) -> ReplicaView:
    """The replica to read from among `replicas` (the candidates, leader included). Rack-aware: a
    replica in the client's rack — the leader if it is there, else the most caught-up one (largest log
    end, then the most recently caught up); the leader when no replica shares the rack."""
    if selector != RACK_AWARE_SELECTOR or not client_rack:
        return leader
    same_rack = [r for r in replicas if r.rack == client_rack]
    if not same_rack or any(r.broker_id == leader.broker_id for r in same_rack):
        return leader
    return max(same_rack, key=lambda r: (r.log_end_offset, -r.time_since_caught_up_ms))


def candidates(
    leader: ReplicaView,
    followers: Iterable[ReplicaView],
    isr: Iterable[int],
    is_alive: Callable[[int], bool],
    fetch_offset: int,
) -> list[ReplicaView]:
    """The replicas a consumer may be sent to: the leader, and followers that are in the ISR, alive
    and hold `fetch_offset` — below their log end, not below their log start (an out-of-sync follower
    would hold the consumer back; one without the offset would send it back out of range)."""
    in_sync = set(isr)
    out = [leader]
    for r in followers:
        if (
            r.broker_id != leader.broker_id
            and r.broker_id in in_sync
            and is_alive(r.broker_id)
            and r.log_end_offset >= fetch_offset
            and r.log_start_offset <= fetch_offset
        ):
            out.append(r)
    return out


def preferred_read_replica(
    selector: str | None,
    partition: Partition,
    client_rack: str | None,
    fetch_offset: int,
    rack_of: Callable[[int], str | None],
    is_alive: Callable[[int], bool],
    now_ms: int,
) -> int:
    """On the leader of `partition`: the broker a consumer fetching at `fetch_offset` should read from,
    or NO_PREFERRED_REPLICA when it is this leader (Kafka never names the leader itself)."""
    if selector is None or not client_rack or not partition.is_leader:
        return NO_PREFERRED_REPLICA
    me = partition.local_broker_id
    leader = ReplicaView(me, rack_of(me), partition.log_end_offset, 0)
    followers = [
        ReplicaView(
            b,
            rack_of(b),
            st.log_end_offset,
            max(now_ms - st.last_caught_up_ms, 0),
            st.log_start_offset,
        )
        for b, st in partition.followers.items()
    ]
    pool = candidates(leader, followers, partition.isr, is_alive, fetch_offset)
    chosen = select(selector, client_rack, leader, pool)
    return NO_PREFERRED_REPLICA if chosen.broker_id == me else chosen.broker_id
