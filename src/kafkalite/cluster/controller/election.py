"""Leader elections of the controller, as pure functions (Kafka's PartitionLeaderElectionAlgorithms) and
replica placement for new topics (Kafka's rack-unaware and rack-aware assignment).
"""

from __future__ import annotations

import random
from collections.abc import Collection, Mapping, Sequence

from kafkalite.cluster.controller.states import NO_LEADER, LeaderIsr


def offline_partition_leader(
    current: LeaderIsr, assignment: Sequence[int], live: Collection[int], unclean: bool
) -> LeaderIsr | None:
    """Leader lost: the first live replica (in assignment order) that is in the ISR; with unclean
    election allowed, the first live replica at all (the ISR becomes just it). None: stay offline."""
    live_isr = [r for r in assignment if r in live and r in current.isr]
    if live_isr:
        return current.new_leader(live_isr[0], tuple(r for r in current.isr if r in live))
    if unclean:
        any_live = [r for r in assignment if r in live]
        if any_live:
            return current.new_leader(any_live[0], (any_live[0],))
    return None


def without_brokers(st: LeaderIsr, dead: set[int]) -> LeaderIsr:
    """Dead brokers leave the ISR, except that an ISR never empties: when every member is gone the
    last leader (or first member) stays, as Kafka keeps it, so no out-of-sync replica leads later.
    A dead leader leaves the partition leaderless (NO_LEADER) at a new leader epoch."""
    isr = tuple(r for r in st.isr if r not in dead)
    if not isr:
        isr = (st.leader,) if st.leader in st.isr else st.isr[:1]
    leader = NO_LEADER if st.leader in dead else st.leader
    return LeaderIsr(leader, st.leader_epoch + 1, isr, st.partition_epoch)


def controlled_shutdown_leader(
    current: LeaderIsr, assignment: Sequence[int], live: Collection[int], shutting: Collection[int]
) -> LeaderIsr | None:
    """The leader is shutting down: the first live ISR member not shutting down; the ISR loses the
    brokers that are shutting down."""
    candidates = [r for r in assignment if r in current.isr and r in live and r not in shutting]
    if not candidates:
        return None
    return current.new_leader(candidates[0], tuple(r for r in current.isr if r not in shutting))


def preferred_replica_leader(
    current: LeaderIsr, assignment: Sequence[int], live: Collection[int]
) -> LeaderIsr | None:
    """Leader balance: the first replica of the assignment, when it is live and in the ISR."""
    if not assignment:
        return None
    preferred = assignment[0]
    if preferred == current.leader or preferred not in live or preferred not in current.isr:
        return None
    return current.new_leader(preferred, current.isr)


def initial_leader(assignment: Sequence[int], live: Collection[int]) -> LeaderIsr | None:
    """A new partition: the first live replica leads at epoch 0; the live replicas are the ISR."""
    alive = tuple(r for r in assignment if r in live)
    if not alive:
        return None
    return LeaderIsr(alive[0], 0, alive, -1)


def without_replica(current: LeaderIsr, replica: int) -> LeaderIsr:
    """A replica went offline: out of the ISR (unless it is the last member, which stays as Kafka
    keeps it); if it led, the partition has no leader until an election finds one."""
    isr = current.isr if len(current.isr) <= 1 else tuple(r for r in current.isr if r != replica)
    leader = NO_LEADER if current.leader == replica else current.leader
    return LeaderIsr(leader, current.leader_epoch + 1, isr, current.partition_epoch)


# -- replica placement ----------------------------------------------------------------------------------
class PlacementError(ValueError):
    """CreateTopics / CreatePartitions cannot be placed (INVALID_REPLICATION_FACTOR and friends)."""


def _replica_index(first: int, shift: int, j: int, n: int) -> int:
    return (first + 1 + (shift + j) % (n - 1)) % n if n > 1 else first


def assign_replicas(
    brokers: dict[int, str | None],
    partitions: int,
    replication_factor: int,
    *,
    start_partition: int = 0,
    fixed_start_index: int = -1,
    rng: random.Random | None = None,
) -> dict[int, tuple[int, ...]]:
    """Kafka's placement: spread leaders round-robin from a (random) start and shift followers so
    replicas of consecutive partitions land on different brokers; rack-aware when every broker has
    a rack (replicas on distinct racks as far as there are racks)."""
    if replication_factor <= 0:
        raise PlacementError("Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise PlacementError(
            f"Replication factor: {replication_factor} larger than available brokers: {len(brokers)}."
        )
    if partitions <= 0:
        raise PlacementError("Number of partitions must be larger than 0.")
    racks = {b: r for b, r in brokers.items() if r is not None}
    if racks and len(racks) != len(brokers):
        raise PlacementError(
            "Not all brokers have rack information for replica rack aware assignment."
        )
    rng = rng or random.Random()
    if racks:
        return _assign_rack_aware(
            racks, partitions, replication_factor, start_partition, fixed_start_index, rng
        )
    ids = sorted(brokers)
    n = len(ids)
    start = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    shift = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    out: dict[int, tuple[int, ...]] = {}
    pid = max(0, start_partition)
    for _ in range(partitions):
        if pid > 0 and pid % n == 0:
            shift += 1
        first = (pid + start) % n
        replicas = [ids[first]] + [
            ids[_replica_index(first, shift, j, n)] for j in range(replication_factor - 1)
        ]
        out[pid] = tuple(replicas)
        pid += 1
    return out


def rack_alternated(racks: dict[int, str]) -> list[int]:
    """Brokers ordered so consecutive ones are on different racks (racks and brokers sorted)."""
    by_rack: dict[str, list[int]] = {}
    for b in sorted(racks):
        by_rack.setdefault(racks[b], []).append(b)
    order = sorted(by_rack)
    out: list[int] = []
    i = 0
    while len(out) < len(racks):
        rack = by_rack[order[i % len(order)]]
        k = i // len(order)
        if k < len(rack):
            out.append(rack[k])
        i += 1
    return out


def _assign_rack_aware(
    racks: dict[int, str],
    partitions: int,
    rf: int,
    start_partition: int,
    fixed_start_index: int,
    rng: random.Random,
) -> dict[int, tuple[int, ...]]:
    arranged = rack_alternated(racks)
    n = len(arranged)
    num_racks = len(set(racks.values()))
    start = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    shift = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    out: dict[int, tuple[int, ...]] = {}
    pid = max(0, start_partition)
    for _ in range(partitions):
        if pid > 0 and pid % n == 0:
            shift += 1
        first = (pid + start) % n
        leader = arranged[first]
        replicas = [leader]
        used_racks = {racks[leader]}
        used = {leader}
        k = 0
        for _ in range(rf - 1):
            while True:
                b = arranged[_replica_index(first, shift * num_racks, k, n)]
                k += 1
                rack_ok = racks[b] not in used_racks or len(used_racks) == num_racks
                if rack_ok and (b not in used or len(used) == n):
                    replicas.append(b)
                    used_racks.add(racks[b])
                    used.add(b)
                    break
        out[pid] = tuple(replicas)
        pid += 1
    return out


def check_assignment(
    assignment: Mapping[int, Sequence[int]], known_brokers: Collection[int]
) -> str | None:
    """Why an explicit replica assignment is invalid (INVALID_REPLICATION_ASSIGNMENT), or None."""
    sizes = {len(r) for r in assignment.values()}
    if len(sizes) > 1:
        return "All partitions should have the same number of replicas"
    for p, replicas in sorted(assignment.items()):
        if not replicas:
            return f"Partition {p} has no replicas"
        if len(set(replicas)) != len(replicas):
            return f"Duplicate brokers not allowed in replica assignment: {list(replicas)} for partition {p}"
        unknown = [b for b in replicas if b not in known_brokers]
        if unknown:
            return f"Unknown broker(s) {unknown} in replica assignment of partition {p}"
    return None
