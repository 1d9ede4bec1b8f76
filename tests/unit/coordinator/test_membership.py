"""JoinGroup / SyncGroup / Heartbeat / LeaveGroup through the coordinator on a fake clock."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from coordinator_helpers import Harness, done, subscription

from kafkalite.coordinator.state import GroupState
from kafkalite.coordinator.types import LeavingMember
from kafkalite.protocol.errors import ErrorCode

E = ErrorCode
S = GroupState
G = "group-a"


def state(h: Harness, group: str = G) -> GroupState:
    return h.coord.groups[group].state


# ---------------------------------------------------------------------------- the happy path


def test_single_member_join_sync_heartbeat(h: Harness) -> None:
    d = h.join(G)
    assert (
        not d.done()
    )  # a new group waits out group.initial.rebalance.delay.ms (0 here) on the next tick
    h.advance(0)
    j = done(d)
    assert j.error == E.NO_ERROR
    assert j.generation_id == 1 and j.leader == j.member_id and j.protocol_name == "range"
    assert [m.member_id for m in j.members] == [j.member_id]
    assert j.members[0].metadata == subscription(["t"])
    assert state(h) is S.COMPLETING_REBALANCE
    s = done(h.sync(G, j, {j.member_id: b"A"}))
    assert (s.error, s.assignment, s.protocol_name, s.protocol_type) == (
        E.NO_ERROR,
        b"A",
        "range",
        "consumer",
    )
    assert state(h) is S.STABLE
    assert h.coord.heartbeat(G, j.member_id, 1) == E.NO_ERROR


def test_followers_get_no_member_list_and_wait_for_leader_sync(h: Harness) -> None:
    d1, d2 = h.join(G), h.join(G)
    h.advance(0)
    j1, j2 = done(d1), done(d2)
    assert j1.leader == j2.leader == j1.member_id
    assert len(j1.members) == 2 and j2.members == []
    follower_sync = h.sync(G, j2)
    assert not follower_sync.done()  # waits for the leader
    leader_sync = h.sync(G, j1, {j1.member_id: b"one", j2.member_id: b"two"})
    assert done(leader_sync).assignment == b"one"
    assert done(follower_sync).assignment == b"two"


def test_member_left_out_of_assignment_gets_empty_bytes(h: Harness) -> None:
    d1, d2 = h.join(G), h.join(G)
    h.advance(0)
    j1, j2 = done(d1), done(d2)
    f = h.sync(G, j2)
    h.sync(G, j1, {j1.member_id: b"one"})
    assert done(f).error == E.NO_ERROR and done(f).assignment == b""


def test_protocol_vote_in_a_real_join(h: Harness) -> None:
    meta = subscription(["t"])
    prefs = [["B", "A"], ["A", "B", "C"], ["D", "B", "A"]]
    ds = [h.join(G, protocols=[(p, meta) for p in pref]) for pref in prefs]
    h.advance(0)
    assert {done(d).protocol_name for d in ds} == {"B"}


def test_inconsistent_protocols(h: Harness) -> None:
    h.stable_group(G, 1)
    other = done(h.join(G, protocols=[("roundrobin", b"x")]))
    assert other.error == E.INCONSISTENT_GROUP_PROTOCOL
    wrong_type = done(h.join(G, protocol_type="connect"))
    assert wrong_type.error == E.INCONSISTENT_GROUP_PROTOCOL
    assert done(h.join("g2", protocols=[])).error == E.INCONSISTENT_GROUP_PROTOCOL


# ---------------------------------------------------------------------------- KIP-394


def test_member_id_required_then_join(h: Harness) -> None:
    first = done(h.join(G, require_known=True))
    assert first.error == E.MEMBER_ID_REQUIRED
    assert first.member_id.startswith("c-")
    assert state(h) is S.EMPTY and h.coord.groups[G].is_pending_member(first.member_id)
    d = h.join(G, first.member_id, require_known=True)
    h.advance(0)
    j = done(d)
    assert j.error == E.NO_ERROR and j.member_id == first.member_id and j.generation_id == 1


def test_pending_member_holds_the_rebalance_until_it_expires(h: Harness) -> None:
    results = h.stable_group(G, 1)
    pending = done(h.join(G, require_known=True))
    assert pending.error == E.MEMBER_ID_REQUIRED
    rejoin = h.join(G, results[0].member_id)  # triggers a rebalance (leader rejoin)
    assert state(h) is S.PREPARING_REBALANCE
    h.advance(5_000)
    assert not rejoin.done()  # still waiting for the pending member
    h.advance(6_000)  # its session timeout (10 s) passed: pending member dropped
    assert done(rejoin).generation_id == 2
    assert not h.coord.groups[G].pending_members


# ---------------------------------------------------------------------------- rebalance timing


def test_initial_rebalance_delay_collects_late_joiners(
    make_harness: Callable[..., Harness],
) -> None:
    h = make_harness(group_initial_rebalance_delay_ms=3_000)
    d1 = h.join(G, rebalance=60_000)
    h.advance(2_000)
    d2 = h.join(G, rebalance=60_000)
    h.advance(2_000)  # first delay over at 3 s, but a member was added: wait another delay (to 6 s)
    assert not d1.done()
    h.advance(1_000)
    d3 = h.join(G, rebalance=60_000)  # joins inside the extension (5 s): extends to 9 s
    h.advance(1_000)
    assert not d1.done()
    h.advance(2_999)
    assert not d1.done()
    h.advance(1)
    results = [done(d) for d in (d1, d2, d3)]
    assert {r.generation_id for r in results} == {1}
    assert len(next(r for r in results if r.leader == r.member_id).members) == 3


def test_initial_delay_is_capped_by_rebalance_timeout(make_harness: Callable[..., Harness]) -> None:
    h = make_harness(group_initial_rebalance_delay_ms=3_000)
    d = h.join(G, rebalance=7_000)
    waiting = [d]
    for _ in range(5):  # a new member every 2.5 s would extend forever without the cap
        h.advance(2_500)
        if d.done():
            break
        waiting.append(h.join(G, rebalance=7_000))
    assert d.done()
    assert h.clock.ms - 1_000_000 <= 7_500


def test_rebalance_waits_for_known_members_then_drops_the_missing(h: Harness) -> None:
    a, b, c = h.stable_group(G, 3)
    newcomer = h.join(G)
    assert state(h) is S.PREPARING_REBALANCE
    assert h.coord.heartbeat(G, b.member_id, 1) == E.REBALANCE_IN_PROGRESS
    ra = h.join(G, a.member_id)
    rb = h.join(G, b.member_id)
    for _ in range(9):  # c keeps heartbeating (told to rejoin) but never rejoins
        h.advance(3_000)
        assert h.coord.heartbeat(G, c.member_id, 1) == E.REBALANCE_IN_PROGRESS
    h.advance(2_999)
    assert not newcomer.done()  # c still has time to rejoin (rebalance timeout 30 s)
    h.advance(1)
    members = {done(d).member_id for d in (ra, rb, newcomer)}
    assert {done(d).generation_id for d in (ra, rb, newcomer)} == {2}
    assert c.member_id not in h.coord.groups[G].members
    assert members == set(h.coord.groups[G].members)
    assert h.coord.heartbeat(G, c.member_id, 1) == E.UNKNOWN_MEMBER_ID


def test_join_completes_as_soon_as_everyone_rejoined(h: Harness) -> None:
    a, b = h.stable_group(G, 2)
    ra = h.join(G, a.member_id)  # the leader rejoining starts a rebalance
    assert not ra.done()
    rb = h.join(G, b.member_id)
    assert done(ra).generation_id == done(rb).generation_id == 2


def test_leader_reelected_when_it_misses_the_rebalance(h: Harness) -> None:
    a, b = h.stable_group(G, 2)
    assert a.leader == a.member_id
    h.join(G)  # newcomer triggers a rebalance
    rb = h.join(G, b.member_id)
    h.advance(30_000)
    assert done(rb).leader == b.member_id  # a did not rejoin: b (joined) leads now
    assert len(done(rb).members) == 2


def test_leader_leaving_mid_rebalance_hands_over(h: Harness) -> None:
    a, b = h.stable_group(G, 2)
    rb = h.join(G, b.member_id, protocols=[("range", subscription(["t", "u"]))])
    assert state(h) is S.PREPARING_REBALANCE
    res = h.coord.leave_group(G, [LeavingMember(a.member_id)])
    assert res.members[0].error == E.NO_ERROR
    j = done(rb)
    assert j.leader == b.member_id and j.generation_id == 2


def test_session_timeout_removes_member_and_rebalances(h: Harness) -> None:
    a, b = h.stable_group(G, 2)
    for _ in range(3):
        h.advance(3_000)
        assert h.coord.heartbeat(G, a.member_id, 1) == E.NO_ERROR
    assert h.coord.groups[G].has(b.member_id)
    h.advance(1_000)
    # b never heartbeated: gone after 10 s; the group prepares a rebalance
    assert not h.coord.groups[G].has(b.member_id)
    assert h.coord.heartbeat(G, a.member_id, 1) == E.REBALANCE_IN_PROGRESS
    j = done(h.join(G, a.member_id))
    assert j.generation_id == 2 and j.leader == a.member_id


def test_all_members_gone_makes_the_group_empty_and_writes_it(h: Harness) -> None:
    (_a,) = h.stable_group(G, 1)
    before = h.topic.count()
    h.advance(10_000)
    assert state(h) is S.EMPTY
    assert h.coord.groups[G].generation_id == 2
    assert h.topic.count() == before + 1  # the empty group's metadata record


def test_member_that_never_syncs_is_removed_after_rebalance_timeout(h: Harness) -> None:
    d1, d2 = h.join(G), h.join(G)
    h.advance(0)
    j1, j2 = done(d1), done(d2)
    h.sync(G, j1, {j1.member_id: b"x", j2.member_id: b"y"})
    assert state(h) is S.STABLE
    for _ in range(10):  # both heartbeat, but j2 never sent SyncGroup
        h.advance(3_000)
        h.coord.heartbeat(G, j1.member_id, 1)
        h.coord.heartbeat(G, j2.member_id, 1)
    assert not h.coord.groups[G].has(j2.member_id)
    assert state(h) is S.PREPARING_REBALANCE


def test_new_member_join_times_out(make_harness: Callable[..., Harness]) -> None:
    h = make_harness(new_member_join_timeout_ms=5_000)
    (a,) = h.stable_group(G, 1)
    stuck = h.join(G)  # the rebalance waits for a, which only heartbeats
    h.advance(3_000)
    assert h.coord.heartbeat(G, a.member_id, 1) == E.REBALANCE_IN_PROGRESS
    assert not stuck.done()
    h.advance(2_000)
    assert done(stuck).error == E.UNKNOWN_MEMBER_ID  # dropped: it may retry
    assert len(h.coord.groups[G].members) == 1


# ---------------------------------------------------------------------------- error codes


@pytest.mark.parametrize("api", ["heartbeat", "sync", "commit"])
def test_illegal_generation(h: Harness, api: str) -> None:
    (a,) = h.stable_group(G, 1)
    if api == "heartbeat":
        assert h.coord.heartbeat(G, a.member_id, 7) == E.ILLEGAL_GENERATION
    elif api == "sync":
        assert done(h.coord.sync_group(G, 7, a.member_id)).error == E.ILLEGAL_GENERATION
    else:
        from kafkalite.coordinator.types import OffsetCommitPartition

        r = done(
            h.coord.commit_offsets(
                G, [OffsetCommitPartition("t", 0, 5)], member_id=a.member_id, generation_id=7
            )
        )
        assert set(r.values()) == {E.ILLEGAL_GENERATION}


def test_unknown_member_id_cases(h: Harness) -> None:
    assert h.coord.heartbeat("nope", "m", 1) == E.UNKNOWN_MEMBER_ID
    assert done(h.join("nope", "some-member")).error == E.UNKNOWN_MEMBER_ID
    assert done(h.coord.sync_group("nope", 1, "m")).error == E.UNKNOWN_MEMBER_ID
    h.stable_group(G, 1)
    assert h.coord.heartbeat(G, "stranger", 1) == E.UNKNOWN_MEMBER_ID
    assert done(h.join(G, "stranger")).error == E.UNKNOWN_MEMBER_ID


def test_rebalance_in_progress_for_sync_and_heartbeat(h: Harness) -> None:
    a, _b = h.stable_group(G, 2)
    h.join(G)  # newcomer
    assert h.coord.heartbeat(G, a.member_id, 1) == E.REBALANCE_IN_PROGRESS
    assert done(h.coord.sync_group(G, 1, a.member_id)).error == E.REBALANCE_IN_PROGRESS


def test_pending_sync_answered_with_rebalance_in_progress_when_a_rebalance_starts(
    h: Harness,
) -> None:
    _d1, d2 = h.join(G), h.join(G)
    h.advance(0)
    follower = h.sync(G, done(d2))
    h.join(G)  # a newcomer arrives before the leader synced
    assert done(follower).error == E.REBALANCE_IN_PROGRESS
    assert state(h) is S.PREPARING_REBALANCE


def test_invalid_session_timeout_and_group_id(h: Harness) -> None:
    assert done(h.join(G, session=5_999)).error == E.INVALID_SESSION_TIMEOUT
    assert done(h.join(G, session=1_800_001)).error == E.INVALID_SESSION_TIMEOUT
    assert done(h.join("")).error == E.INVALID_GROUP_ID
    assert G not in h.coord.groups


def test_group_max_size(make_harness: Callable[..., Harness]) -> None:
    h = make_harness(group_max_size=2)
    h.stable_group(G, 2)
    assert done(h.join(G)).error == E.GROUP_MAX_SIZE_REACHED


def test_not_coordinator_and_loading() -> None:
    h = Harness()
    p = h.coord.partition_for(G)
    h.coord.unload(p)
    assert done(h.join(G)).error == E.NOT_COORDINATOR
    h.coord.begin_loading(p)
    assert done(h.join(G)).error == E.COORDINATOR_LOAD_IN_PROGRESS
    assert h.coord.heartbeat(G, "m", 1) == E.NO_ERROR  # answered blindly while loading
    assert done(h.coord.sync_group(G, 1, "m")).error == E.REBALANCE_IN_PROGRESS
    assert h.coord.fetch_offsets(G).error == E.COORDINATOR_LOAD_IN_PROGRESS
    h.coord.finish_loading(p)
    d = h.join(G)
    h.advance(0)
    assert done(d).error == E.NO_ERROR
    h.coord.shutdown()
    assert done(h.join(G)).error == E.COORDINATOR_NOT_AVAILABLE


def test_unload_answers_waiters_with_not_coordinator(h: Harness) -> None:
    a, _b = h.stable_group(G, 2)
    waiting = h.join(G, a.member_id)
    h.coord.unload(h.coord.partition_for(G))
    assert done(waiting).error == E.NOT_COORDINATOR
    assert G not in h.coord.groups


# ---------------------------------------------------------------------------- rejoin without change


def test_follower_rejoin_with_same_metadata_in_stable_gets_current_generation(h: Harness) -> None:
    _a, b = h.stable_group(G, 2)
    again = done(h.join(G, b.member_id))
    assert again.generation_id == 1 and again.members == [] and state(h) is S.STABLE


def test_rejoin_in_completing_rebalance_returns_generation_again(h: Harness) -> None:
    d1, _d2 = h.join(G), h.join(G)
    h.advance(0)
    j1 = done(d1)
    again = done(h.join(G, j1.member_id))
    assert again.generation_id == j1.generation_id and len(again.members) == 2
    assert state(h) is S.COMPLETING_REBALANCE


# ---------------------------------------------------------------------------- static membership


def test_static_member_restart_keeps_assignment_without_rebalance(h: Harness) -> None:
    a, b = h.stable_group(G, 2, instances=["inst-a", "inst-b"])
    writes = h.topic.count()
    rejoin = done(h.join(G, instance="inst-b"))  # restarted: no member id
    assert rejoin.error == E.NO_ERROR
    assert rejoin.member_id != b.member_id and rejoin.generation_id == 1
    assert rejoin.leader == a.member_id and rejoin.members == []
    assert state(h) is S.STABLE
    assert h.topic.count() == writes + 1  # the new member id is persisted
    s = done(h.sync(G, rejoin, instance="inst-b"))
    assert s.assignment == f"assign-{b.member_id}".encode()
    # the old incarnation is fenced
    assert h.coord.heartbeat(G, b.member_id, 1, "inst-b") == E.FENCED_INSTANCE_ID
    assert done(h.join(G, b.member_id, instance="inst-b")).error == E.FENCED_INSTANCE_ID
    assert h.coord.heartbeat(G, rejoin.member_id, 1, "inst-b") == E.NO_ERROR


def test_static_leader_restart_keeps_old_leader_id_unless_it_can_skip(h: Harness) -> None:
    a, _b = h.stable_group(G, 2, instances=["inst-a", "inst-b"])
    r1 = done(h.join(G, instance="inst-a"))
    assert (
        r1.leader == a.member_id != r1.member_id and not r1.skip_assignment
    )  # thinks it is a follower
    r2 = done(h.join(G, instance="inst-a", skip=True))
    assert r2.leader == r2.member_id and r2.skip_assignment and len(r2.members) == 2
    assert state(h) is S.STABLE


def test_static_member_with_changed_protocol_triggers_rebalance(h: Harness) -> None:
    (old,) = h.stable_group(G, 1, instances=["inst-b"])
    # alone in the group, its new first choice wins the vote: the group's protocol changes, so it rebalances
    d = h.join(
        G, instance="inst-b", protocols=[("roundrobin", b""), ("range", subscription(["t"]))]
    )
    j = done(d)  # the only member has rejoined: the rebalance completes at once
    assert (j.generation_id, j.protocol_name, j.leader) == (2, "roundrobin", j.member_id)
    assert j.member_id != old.member_id
    assert state(h) is S.COMPLETING_REBALANCE


def test_static_member_survives_a_rebalance_it_missed(h: Harness) -> None:
    a, b = h.stable_group(G, 2, instances=["inst-a", "inst-b"], session=60_000)
    ra = h.join(G, a.member_id, instance="inst-a")  # leader rejoin starts a rebalance
    h.advance(30_000)  # b (static) never rejoins: it keeps its seat
    j = done(ra)
    assert j.generation_id == 2 and {m.member_id for m in j.members} == {a.member_id, b.member_id}


def test_static_member_removed_by_session_timeout(h: Harness) -> None:
    a, b = h.stable_group(G, 2, instances=["inst-a", "inst-b"])
    for _ in range(4):
        h.advance(3_000)
        h.coord.heartbeat(G, a.member_id, 1, "inst-a")
    assert not h.coord.groups[G].has(b.member_id)
    assert h.coord.groups[G].static_member_id("inst-b") is None


def test_static_member_restart_fences_its_pending_join(h: Harness) -> None:
    _a, b = h.stable_group(G, 2, instances=["inst-a", "inst-b"])
    old_join = h.join(
        G, b.member_id, instance="inst-b", protocols=[("range", subscription(["t", "x"]))]
    )
    new_join = h.join(G, instance="inst-b", protocols=[("range", subscription(["t", "x"]))])
    assert done(old_join).error == E.FENCED_INSTANCE_ID
    assert not new_join.done()


def test_static_rejoin_store_failure_reverts(h: Harness) -> None:
    _a, b = h.stable_group(G, 2, instances=["inst-a", "inst-b"])
    h.topic.mode = "fail"
    r = done(h.join(G, instance="inst-b"))
    assert r.error == E.NOT_COORDINATOR and r.member_id == ""
    assert h.coord.groups[G].static_member_id("inst-b") == b.member_id
    h.topic.mode = "ok"
    assert h.coord.heartbeat(G, b.member_id, 1, "inst-b") == E.NO_ERROR


# ---------------------------------------------------------------------------- leave


def test_leave_group_batched(h: Harness) -> None:
    a, _b, c = h.stable_group(G, 3, instances=[None, "inst-b", None])
    res = h.coord.leave_group(
        G,
        [
            LeavingMember(a.member_id),
            LeavingMember(c.member_id, "inst-b"),  # instance id of someone else
            LeavingMember("", "inst-b"),  # by instance id only
            LeavingMember("ghost"),
            LeavingMember("", "inst-b"),  # already gone
        ],
    )
    assert res.error == E.NO_ERROR
    assert [m.error for m in res.members] == [
        E.NO_ERROR,
        E.FENCED_INSTANCE_ID,
        E.NO_ERROR,
        E.UNKNOWN_MEMBER_ID,
        E.UNKNOWN_MEMBER_ID,
    ]
    assert set(h.coord.groups[G].members) == {c.member_id}
    assert h.coord.groups[G].leader_id == c.member_id
    assert state(h) is S.PREPARING_REBALANCE


def test_leave_fenced_static_member(h: Harness) -> None:
    a, _b = h.stable_group(G, 2, instances=["inst-a", "inst-b"])
    res = h.coord.leave_group(G, [LeavingMember(a.member_id, "inst-b")])
    assert res.members[0].error == E.FENCED_INSTANCE_ID


def test_leave_unknown_group_and_last_member(h: Harness) -> None:
    res = h.coord.leave_group("nope", [LeavingMember("m")])
    assert res.error == E.NO_ERROR and res.members[0].error == E.UNKNOWN_MEMBER_ID
    (a,) = h.stable_group(G, 1)
    h.coord.leave_group(G, [LeavingMember(a.member_id)])
    assert state(h) is S.EMPTY


def test_leave_pending_member(h: Harness) -> None:
    first = done(h.join(G, require_known=True))
    res = h.coord.leave_group(G, [LeavingMember(first.member_id)])
    assert res.members[0].error == E.NO_ERROR
    assert not h.coord.groups[G].pending_members


# ---------------------------------------------------------------------------- answered after the append


def test_sync_is_answered_only_after_the_assignment_is_appended(h: Harness) -> None:
    d1, d2 = h.join(G), h.join(G)
    h.advance(0)
    j1, j2 = done(d1), done(d2)
    h.topic.mode = "hold"
    f = h.sync(G, j2)
    lead = h.sync(G, j1, {j1.member_id: b"1", j2.member_id: b"2"})
    assert not lead.done() and not f.done()
    assert state(h) is S.COMPLETING_REBALANCE
    assert (
        h.coord.groups[G].get(j1.member_id).assignment == b""
    )  # not before the record is replayed
    assert h.topic.release() == 1
    assert done(lead).assignment == b"1" and done(f).assignment == b"2"
    assert state(h) is S.STABLE


def test_failed_assignment_append_propagates_error_and_rebalances(h: Harness) -> None:
    d1, d2 = h.join(G), h.join(G)
    h.advance(0)
    j1, j2 = done(d1), done(d2)
    h.topic.mode = "fail"
    h.topic.fail_code = E.NOT_ENOUGH_REPLICAS
    f = h.sync(G, j2)
    lead = h.sync(G, j1, {j1.member_id: b"1", j2.member_id: b"2"})
    assert done(lead).error == done(f).error == E.COORDINATOR_NOT_AVAILABLE
    assert state(h) is S.PREPARING_REBALANCE


def test_deferred_is_awaitable() -> None:
    import asyncio

    h = Harness()

    async def scenario() -> int:
        d1 = h.join(G)
        asyncio.get_running_loop().call_later(0.01, h.advance, 0)  # the broker's timer tick
        j1 = await d1
        d = h.sync(G, j1, {j1.member_id: b"z"})
        return len((await d).assignment)

    assert asyncio.run(scenario()) == 1
