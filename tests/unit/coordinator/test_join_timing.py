"""Issue 16 (classic-group timing): the join sequences four kafka-python consumers started together
produce, driven through the coordinator on a fake clock. Each step is Kafka's rule; together they give
the settle times measured by tests/compat/test_group_timing.py (2 x the initial delay, plus one
heartbeat interval when the leader sends an extra JoinGroup)."""

from __future__ import annotations

from collections.abc import Callable

from coordinator_helpers import Harness, done

from kafkalite.coordinator.state import GroupState
from kafkalite.protocol.errors import ErrorCode

E = ErrorCode
S = GroupState
G = "issue-16"
REBALANCE_MS = 300_000  # kafka-python's max_poll_interval_ms
SESSION_MS = 45_000


def _four_members_joined_together(h: Harness) -> list[str]:
    """Each gets its id first (KIP-394, MEMBER_ID_REQUIRED), then joins with it, a few ms apart."""
    ids = []
    for _ in range(4):
        first = done(h.join(G, require_known=True, session=SESSION_MS, rebalance=REBALANCE_MS))
        assert first.error == E.MEMBER_ID_REQUIRED
        ids.append(first.member_id)
    return ids


def test_four_new_members_get_generation_one_after_twice_the_initial_delay(
    make_harness: Callable[..., Harness],
) -> None:
    h = make_harness(group_initial_rebalance_delay_ms=3_000)
    ids = _four_members_joined_together(h)
    joins = []
    for mid in ids:
        joins.append(h.join(G, mid, require_known=True, session=SESSION_MS, rebalance=REBALANCE_MS))
        h.advance(5)
    # the first delay ends at 3 s, but members were added during it: one more delay, then complete
    h.advance(3_000)
    assert not any(d.done() for d in joins)
    assert h.coord.groups[G].state is S.PREPARING_REBALANCE
    h.advance(2_975)  # 5.995 s after the first join
    assert not any(d.done() for d in joins)
    h.advance(5)
    results = [done(d) for d in joins]
    assert {r.generation_id for r in results} == {1}
    leader = next(r for r in results if r.leader == r.member_id)
    assert sorted(m.member_id for m in leader.members) == sorted(ids)


def test_leaders_extra_join_after_sync_costs_one_heartbeat_round(h: Harness) -> None:
    """kafka-python sometimes sends a second, identical JoinGroup after its SyncGroup succeeded (it
    dropped the finished join). From the leader that forces a rebalance (Kafka's rule: a leader's
    JoinGroup in Stable means it wants one); followers learn it from their next heartbeat, and the
    join completes as soon as the last of them rejoined: no wait for the rebalance timeout."""
    a, b, c, d = h.stable_group(G, 4, session=SESSION_MS)
    leader = next(r for r in (a, b, c, d) if r.leader == r.member_id)
    followers = [r for r in (a, b, c, d) if r is not leader]
    # a follower's identical JoinGroup in Stable is answered at once with the current generation
    again = done(h.join(G, followers[0].member_id, session=SESSION_MS, rebalance=REBALANCE_MS))
    assert (again.error, again.generation_id, again.members) == (E.NO_ERROR, 1, [])
    assert h.coord.groups[G].state is S.STABLE
    # the leader's starts a rebalance
    lj = h.join(G, leader.member_id, session=SESSION_MS, rebalance=REBALANCE_MS)
    assert h.coord.groups[G].state is S.PREPARING_REBALANCE and not lj.done()
    h.advance(3_000)  # kafka-python's heartbeat interval
    rejoins = []
    for f in followers:
        assert h.coord.heartbeat(G, f.member_id, 1) == E.REBALANCE_IN_PROGRESS
        rejoins.append(h.join(G, f.member_id, session=SESSION_MS, rebalance=REBALANCE_MS))
    results = [done(x) for x in (lj, *rejoins)]
    assert {r.generation_id for r in results} == {2}
    assert all(r.leader == leader.member_id for r in results)


def test_rejoin_while_completing_keeps_the_generation_for_leader_and_followers(
    h: Harness,
) -> None:
    """A JoinGroup repeated in CompletingRebalance with the same metadata (its answer was lost) gets
    the current generation again, with the member list for the leader; no new rebalance."""
    joins = [h.join(G, session=SESSION_MS, rebalance=REBALANCE_MS) for _ in range(4)]
    h.advance(0)
    results = [done(d) for d in joins]
    leader = next(r for r in results if r.leader == r.member_id)
    follower = next(r for r in results if r is not leader)
    follower_sync = h.sync(G, follower)
    assert not follower_sync.done()
    la = done(h.join(G, leader.member_id, session=SESSION_MS, rebalance=REBALANCE_MS))
    fa = done(h.join(G, follower.member_id, session=SESSION_MS, rebalance=REBALANCE_MS))
    assert (la.generation_id, len(la.members)) == (1, 4)
    assert (fa.generation_id, fa.members) == (1, [])
    assert h.coord.groups[G].state is S.COMPLETING_REBALANCE
    assert h.coord.heartbeat(G, follower.member_id, 1) == E.NO_ERROR
    assignment = {r.member_id: r.member_id.encode() for r in results}
    assert done(h.sync(G, la, assignment)).error == E.NO_ERROR
    assert done(follower_sync).assignment == follower.member_id.encode()
