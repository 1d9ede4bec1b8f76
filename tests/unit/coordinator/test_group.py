"""GroupMetadata on its own: the protocol vote, leader (re-)election, static members, subscriptions and
the offset expiry rules, table-driven."""

from __future__ import annotations

import pytest
from coordinator_helpers import subscription

from kafkalite.coordinator.deferred import Deferred
from kafkalite.coordinator.group import GroupMetadata, MemberMetadata, subscription_topics
from kafkalite.coordinator.state import GroupState
from kafkalite.coordinator.types import JoinGroupResult, OffsetAndMetadata, TopicPartition

S = GroupState


def member(
    mid: str, protocols: list[str], *, instance: str | None = None, topics: list[str] | None = None
) -> MemberMetadata:
    meta = subscription(topics or ["t"])
    return MemberMetadata(
        member_id=mid,
        group_instance_id=instance,
        client_id="c",
        client_host="h",
        rebalance_timeout_ms=1000,
        session_timeout_ms=1000,
        protocol_type="consumer",
        supported_protocols=[(p, meta) for p in protocols],
    )


def group_of(*members: MemberMetadata, state: GroupState = S.PREPARING_REBALANCE) -> GroupMetadata:
    g = GroupMetadata("g")
    for m in members:
        g.add(m, Deferred())
    g.state = state
    return g


# ---------------------------------------------------------------------------- protocol vote


def test_design_example_vote_picks_b() -> None:
    # candidates [A, B] (everyone supports them); members prefer [B, A], [A, B, C], [D, B, A]
    g = group_of(
        member("m1", ["B", "A"]), member("m2", ["A", "B", "C"]), member("m3", ["D", "B", "A"])
    )
    assert g.candidate_protocols() == {"A", "B"}
    assert [m.vote(g.candidate_protocols()) for m in g.members.values()] == ["B", "A", "B"]
    assert g.select_protocol() == "B"


@pytest.mark.parametrize(
    ("prefs", "winner"),
    [
        ([["A"]], "A"),
        ([["A", "B"], ["B", "A"], ["B"]], "B"),  # only B is common
        ([["A", "B"], ["A", "B"], ["B", "A"]], "A"),
        ([["X", "A", "B"], ["B", "X", "A"]], "X"),  # tie X/B: first vote cast wins
        ([["B", "X"], ["X", "B"]], "B"),
    ],
)
def test_vote_table(prefs: list[list[str]], winner: str) -> None:
    g = group_of(*(member(f"m{i}", p) for i, p in enumerate(prefs)))
    assert g.select_protocol() == winner


def test_vote_counts_follow_add_remove_and_update() -> None:
    g = group_of(member("m1", ["A", "B"]), member("m2", ["B"]))
    assert g.candidate_protocols() == {"B"}
    g.remove("m2")
    assert g.candidate_protocols() == {"A", "B"}
    g.update_member(g.get("m1"), [("C", b"")], 1, 1, None)
    assert g.candidate_protocols() == {"C"}
    assert dict(g.protocol_votes) == {"C": 1}


def test_select_protocol_of_empty_group_is_an_error() -> None:
    with pytest.raises(ValueError):
        GroupMetadata("g").select_protocol()


@pytest.mark.parametrize(
    ("state", "ptype", "protocols", "ok"),
    [
        (S.EMPTY, "consumer", ["Z"], True),  # an empty group takes anything non-empty
        (S.EMPTY, "", ["A"], False),
        (S.EMPTY, "consumer", [], False),
        (S.STABLE, "consumer", ["A"], True),
        (S.STABLE, "consumer", ["Z", "B"], True),
        (S.STABLE, "consumer", ["Z"], False),
        (S.STABLE, "connect", ["A"], False),
    ],
)
def test_supports_protocols(state: GroupState, ptype: str, protocols: list[str], ok: bool) -> None:
    if state is S.EMPTY:
        g = GroupMetadata("g")
    else:
        g = group_of(member("m1", ["A", "B"]), member("m2", ["B", "A"]), state=state)
    assert g.supports_protocols(ptype, protocols) is ok


# ---------------------------------------------------------------------------- leader


def test_first_joiner_leads_and_protocol_type_set_by_first_member() -> None:
    g = GroupMetadata("g")
    g.add(member("m1", ["A"]))
    g.add(member("m2", ["A"]))
    assert g.leader_id == "m1"
    assert g.protocol_type == "consumer"


def test_leader_reelected_from_remaining_members_in_join_order() -> None:
    g = group_of(member("m1", ["A"]), member("m2", ["A"]), member("m3", ["A"]))
    g.remove("m2")
    assert g.leader_id == "m1"  # a follower leaving changes nothing
    g.remove("m1")
    assert g.leader_id == "m3"
    g.remove("m3")
    assert g.leader_id is None


def test_maybe_elect_new_joined_leader() -> None:
    g = group_of(member("m1", ["A"]), member("m2", ["A"]), member("m3", ["A"]))
    # leader m1 did not rejoin; m3 did
    for mid in ("m1", "m2"):
        g.complete_join(g.get(mid), JoinGroupResult(0))  # type: ignore[arg-type]
    assert g.num_members_awaiting_join == 1
    assert g.maybe_elect_new_joined_leader() is True
    assert g.leader_id == "m3"
    g.complete_join(g.get("m3"), JoinGroupResult(0))  # type: ignore[arg-type]
    assert g.maybe_elect_new_joined_leader() is False  # nobody rejoined


# ---------------------------------------------------------------------------- static members


def test_static_member_replace_keeps_assignment_and_leadership() -> None:
    g = group_of(member("old", ["A"], instance="i1"), member("m2", ["A"]), state=S.STABLE)
    g.get("old").assignment = b"parts"
    assert g.static_member_id("i1") == "old"
    assert g.is_static_member_fenced("i1", "m2")
    assert not g.is_static_member_fenced("i1", "old")
    assert not g.is_static_member_fenced("unknown", "m2")
    assert not g.is_static_member_fenced(None, "m2")
    moved = g.replace_static_member("i1", "old", "new")
    assert moved.assignment == b"parts" and moved.member_id == "new"
    assert g.leader_id == "new" and not g.has("old") and g.static_member_id("i1") == "new"
    assert g.is_static_member_fenced("i1", "old")
    g.remove("new")
    assert g.static_member_id("i1") is None


# ---------------------------------------------------------------------------- subscriptions


@pytest.mark.parametrize("version", [0, 1])
def test_subscription_topics(version: int) -> None:
    assert subscription_topics(subscription(["a", "b"], b"ud", version)) == ["a", "b"]


def test_subscribed_topics_union_and_unknown_metadata() -> None:
    g = group_of(member("m1", ["A"], topics=["a"]), member("m2", ["A"], topics=["b", "c"]))
    g.protocol_name = "A"
    assert g.compute_subscribed_topics() == {"a", "b", "c"}
    g.get("m2").supported_protocols = [("A", b"\x00")]  # not a subscription
    assert g.compute_subscribed_topics() is None
    g.protocol_type = "connect"
    assert g.compute_subscribed_topics() is None


# ---------------------------------------------------------------------------- offset expiry rules

DAY = 86_400_000
RET = 7 * DAY


def om(ts: int, expire: int | None = None) -> OffsetAndMetadata:
    return OffsetAndMetadata(offset=1, commit_timestamp=ts, expire_timestamp=expire)


def offsets_group(
    protocol_type: str | None, state: GroupState, state_ts: int | None, subscribed: set[str] | None
) -> GroupMetadata:
    g = GroupMetadata("g", state=state, state_timestamp=state_ts, protocol_type=protocol_type)
    g.subscribed_topics = subscribed
    g.offsets = {
        TopicPartition("sub", 0): om(0),
        TopicPartition("old", 0): om(0),
        TopicPartition("new", 0): om(9 * DAY),
        TopicPartition("expl", 0): om(9 * DAY, expire=9 * DAY + 1000),
    }
    return g


NOW = 10 * DAY


@pytest.mark.parametrize(
    ("case", "ptype", "state", "state_ts", "subscribed", "expected"),
    [
        # Empty group: counts from when it became Empty (2 days ago -> nothing by age), explicit expiry still wins
        ("empty-recent", "consumer", S.EMPTY, NOW - 2 * DAY, None, {"expl"}),
        # Empty 8 days: all offsets, even a fresh commit, expire
        ("empty-long", "consumer", S.EMPTY, NOW - 8 * DAY, None, {"sub", "old", "new", "expl"}),
        # Empty with unknown state time: falls back to each commit's time
        ("empty-no-ts", "consumer", S.EMPTY, None, None, {"sub", "old", "expl"}),
        # active consumer group: subscribed topics never expire, others by commit time
        ("active-consumer", "consumer", S.STABLE, NOW - 9 * DAY, {"sub"}, {"old", "expl"}),
        # active consumer group whose subscriptions are unknown: keep everything
        ("active-unknown", "consumer", S.STABLE, NOW, None, set()),
        # a non-consumer protocol that is active: keep everything
        ("active-connect", "connect", S.STABLE, NOW, None, set()),
        # standalone (no protocol): by commit time
        ("standalone", None, S.EMPTY, NOW, None, {"sub", "old", "expl"}),
    ],
)
def test_expired_offsets(
    case: str,
    ptype: str | None,
    state: GroupState,
    state_ts: int | None,
    subscribed: set[str] | None,
    expected: set[str],
) -> None:
    g = offsets_group(ptype, state, state_ts, subscribed)
    assert {tp.topic for tp in g.expired_offsets(NOW, RET)} == expected, case


def test_pending_commits_never_expire() -> None:
    g = offsets_group(None, S.EMPTY, None, None)
    g.pending_offset_commits[TopicPartition("old", 0)] += 1
    assert {tp.topic for tp in g.expired_offsets(NOW, RET)} == {"sub", "expl"}


def test_expiry_boundary_is_inclusive() -> None:
    g = GroupMetadata("g")
    g.offsets = {TopicPartition("t", 0): om(1000)}
    assert g.expired_offsets(1000 + RET - 1, RET) == []
    assert g.expired_offsets(1000 + RET, RET) == [TopicPartition("t", 0)]
