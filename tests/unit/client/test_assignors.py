"""Partition assignors against the design notes' examples, stickiness across rebalances, cooperative
two-phase revocation, the sticky user-data layout, and hypothesis properties of every assignor."""

from __future__ import annotations

import random
import re
import struct
import time
from collections import deque

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kafkalite.client.assignors as assignors_pkg
from kafkalite.client.assignors import (
    ASSIGNORS,
    COOPERATIVE,
    EAGER,
    Assignment,
    ConsumerPartitionAssignor,
    CooperativeStickyAssignor,
    RangeAssignor,
    RoundRobinAssignor,
    StickyAssignor,
    Subscription,
    decode_sticky_user_data,
    encode_sticky_user_data,
    get_assignor,
    resolve_assignor,
    select_rebalance_protocol,
)
from kafkalite.client.assignors.sticky import StickyAssignorUserData

TP = tuple[str, int]


def tps(spec: str) -> list[TP]:
    """'t0p0 t1p2' -> [('t0', 0), ('t1', 2)]"""
    out = []
    for item in spec.split():
        m = re.fullmatch(r"(.+)p(\d+)", item)
        assert m, item
        out.append((m.group(1), int(m.group(2))))
    return out


def plain(result: dict[str, Assignment]) -> dict[str, list[TP]]:
    return {m: sorted(a.partitions) for m, a in result.items()}


def subs(topics_by_member: dict[str, list[str]]) -> dict[str, Subscription]:
    return {m: Subscription(topics=list(t)) for m, t in topics_by_member.items()}


def moved(before: dict[str, list[TP]], after: dict[str, list[TP]]) -> set[TP]:
    """Partitions whose owner changed, among those owned before by a member still present."""
    owner_before = {tp: m for m, ps in before.items() for tp in ps}
    owner_after = {tp: m for m, ps in after.items() for tp in ps}
    return {
        tp for tp, m in owner_before.items() if m in after and owner_after.get(tp) not in (None, m)
    }


def loads(result: dict[str, list[TP]]) -> list[int]:
    return [len(v) for v in result.values()]


# ---------------------------------------------------------------------------------------------
# The design notes' examples


def test_range_two_consumers_four_partitions_each() -> None:
    out = plain(
        RangeAssignor().assign({"t0": 4, "t1": 4}, subs({"C0": ["t0", "t1"], "C1": ["t0", "t1"]}))
    )
    assert out == {"C0": tps("t0p0 t0p1 t1p0 t1p1"), "C1": tps("t0p2 t0p3 t1p2 t1p3")}


def test_range_three_partitions_each_is_uneven() -> None:
    out = plain(
        RangeAssignor().assign({"t0": 3, "t1": 3}, subs({"C0": ["t0", "t1"], "C1": ["t0", "t1"]}))
    )
    assert out == {"C0": tps("t0p0 t0p1 t1p0 t1p1"), "C1": tps("t0p2 t1p2")}
    assert loads(out) == [4, 2]


def test_roundrobin_fixes_the_three_partition_case() -> None:
    out = plain(
        RoundRobinAssignor().assign(
            {"t0": 3, "t1": 3}, subs({"C0": ["t0", "t1"], "C1": ["t0", "t1"]})
        )
    )
    assert out == {"C0": tps("t0p0 t0p2 t1p1"), "C1": tps("t0p1 t1p0 t1p2")}
    assert loads(out) == [3, 3]


ASYMMETRIC_PARTITIONS = {"t0": 1, "t1": 2, "t2": 3}
ASYMMETRIC_SUBS = {"C0": ["t0"], "C1": ["t0", "t1"], "C2": ["t0", "t1", "t2"]}


def test_roundrobin_asymmetric_subscriptions_pile_on_the_last_consumer() -> None:
    out = plain(RoundRobinAssignor().assign(ASYMMETRIC_PARTITIONS, subs(ASYMMETRIC_SUBS)))
    assert out == {"C0": tps("t0p0"), "C1": tps("t1p0"), "C2": tps("t1p1 t2p0 t2p1 t2p2")}


@pytest.mark.parametrize("cls", [StickyAssignor, CooperativeStickyAssignor])
def test_sticky_asymmetric_subscriptions_balance_where_roundrobin_does_not(cls: type) -> None:
    out = plain(cls().assign(ASYMMETRIC_PARTITIONS, subs(ASYMMETRIC_SUBS)))
    assert out == {"C0": tps("t0p0"), "C1": tps("t1p0 t1p1"), "C2": tps("t2p0 t2p1 t2p2")}


def test_sticky_asymmetric_example_when_c0_leaves_moves_only_its_partition() -> None:
    a = StickyAssignor()
    first = plain(a.assign(ASYMMETRIC_PARTITIONS, subs(ASYMMETRIC_SUBS)))
    rest = {m: t for m, t in ASYMMETRIC_SUBS.items() if m != "C0"}
    second = sticky_round(rest, ASYMMETRIC_PARTITIONS, first, generation=1)
    assert second["C1"] == tps("t0p0 t1p0 t1p1")
    assert second["C2"] == tps("t2p0 t2p1 t2p2")
    # the roundrobin answer for the same group reshuffles C1's and C2's partitions
    rr = plain(RoundRobinAssignor().assign(ASYMMETRIC_PARTITIONS, subs(rest)))
    assert moved(first, rr)


# ---------------------------------------------------------------------------------------------
# Range / RoundRobin details


def test_range_orders_static_members_by_instance_id_first() -> None:
    s = {
        "a-member": Subscription(["t"], group_instance_id="i2"),
        "b-member": Subscription(["t"], group_instance_id="i1"),
        "0-dynamic": Subscription(["t"]),
    }
    out = plain(RangeAssignor().assign({"t": 3}, s))
    assert out == {"b-member": tps("tp0"), "a-member": tps("tp1"), "0-dynamic": tps("tp2")}


def test_every_member_gets_an_entry_and_unknown_topics_are_skipped() -> None:
    s = subs({"A": ["t", "missing"], "B": [], "C": ["t"]})
    for cls in (RangeAssignor, RoundRobinAssignor, StickyAssignor, CooperativeStickyAssignor):
        out = plain(cls().assign({"t": 2, "unsubscribed": 5}, s))
        assert set(out) == {"A", "B", "C"}, cls
        assert out["B"] == []
        assert sorted(tp for v in out.values() for tp in v) == tps("tp0 tp1"), cls


def test_roundrobin_skips_members_not_subscribed() -> None:
    out = plain(
        RoundRobinAssignor().assign({"a": 2, "b": 4}, subs({"M1": ["a"], "M2": ["a", "b"]}))
    )
    # a0->M1, a1->M2, b0: M1 skipped -> M2, b1 -> M2 (after wrapping past M1), ...
    assert out == {"M1": tps("ap0"), "M2": tps("ap1 bp0 bp1 bp2 bp3")}


def test_java_string_order_for_members() -> None:
    # U+FF5E sorts after an astral character in code points but before it in UTF-16 code units
    astral, bmp = "\U0001f600", "\uff5e"
    out = plain(RangeAssignor().assign({"t": 2}, subs({astral: ["t"], bmp: ["t"]})))
    assert out == {bmp: tps("tp1"), astral: tps("tp0")}


# ---------------------------------------------------------------------------------------------
# Sticky (eager): user data and stickiness across rebalances


def sticky_round(
    topics_by_member: dict[str, list[str]],
    partitions: dict[str, int],
    previous: dict[str, list[TP]],
    generation: int,
) -> dict[str, list[TP]]:
    """One eager rebalance: each member sends its previous assignment as StickyAssignor user data."""
    s = {}
    for m, topics in topics_by_member.items():
        member_side = StickyAssignor()
        if m in previous:
            member_side.on_assignment(Assignment(previous[m]), generation)
        s[m] = Subscription(list(topics), user_data=member_side.subscription_user_data(set(topics)))
    return plain(StickyAssignor().assign(partitions, s))


def test_sticky_user_data_layout_v1() -> None:
    data = encode_sticky_user_data([("b", 1), ("a", 7), ("b", 0)], 42)

    def string(s: str) -> bytes:
        return struct.pack(">h", len(s)) + s.encode()

    expected = (
        struct.pack(">i", 2)
        + string("a")
        + struct.pack(">ii", 1, 7)
        + string("b")
        + struct.pack(">iii", 2, 0, 1)
        + struct.pack(">i", 42)
    )
    assert data == expected
    md = decode_sticky_user_data(data)
    assert sorted(md.partitions) == [("a", 7), ("b", 0), ("b", 1)]
    assert md.generation == 42


def test_sticky_user_data_v0_and_garbage() -> None:
    v0 = StickyAssignorUserData(
        previous_assignment=[StickyAssignorUserData.TopicPartition(topic="t", partitions=[3])]
    ).encode(0)
    md = decode_sticky_user_data(v0)
    assert md.partitions == [("t", 3)] and md.generation == -1
    for junk in (None, b"", b"\x00\x00", b"\xff\xff\xff\xff\x00"):
        assert decode_sticky_user_data(junk).partitions == []


def test_sticky_member_state_travels_in_user_data() -> None:
    a = StickyAssignor()
    assert a.subscription_user_data({"t"}) is None
    a.on_assignment(Assignment([("t", 1), ("t", 0)]), 7)
    md = decode_sticky_user_data(a.subscription_user_data({"t"}))
    assert sorted(md.partitions) == [("t", 0), ("t", 1)] and md.generation == 7
    # owned_partitions are not how the eager sticky assignor learns ownership
    s = {
        "A": Subscription(["t"], owned_partitions=[("t", 0), ("t", 1)]),
        "B": Subscription(["t"], user_data=a.subscription_user_data({"t"})),
    }
    assert plain(StickyAssignor().assign({"t": 4}, s))["B"][:2] == [("t", 0), ("t", 1)]


def test_sticky_member_leaves_only_its_partitions_move() -> None:
    members = {f"C{i}": ["t0", "t1"] for i in range(3)}
    parts = {"t0": 7, "t1": 5}
    first = sticky_round(members, parts, {}, 0)
    assert max(loads(first)) - min(loads(first)) <= 1
    del members["C1"]
    second = sticky_round(members, parts, first, 1)
    assert max(loads(second)) - min(loads(second)) <= 1
    for m in members:
        assert set(first[m]) <= set(second[m]), m
    assert set(second["C0"]) | set(second["C2"]) == {tp for v in first.values() for tp in v}


def test_sticky_member_joins_minimal_movement() -> None:
    members = {f"C{i}": ["t0", "t1"] for i in range(3)}
    parts = {"t0": 6, "t1": 6}
    first = sticky_round(members, parts, {}, 0)
    assert loads(first) == [4, 4, 4]
    members["C3"] = ["t0", "t1"]
    second = sticky_round(members, parts, first, 1)
    assert loads(second) == [3, 3, 3, 3]
    # the newcomer needs 3 partitions; exactly 3 move, one from each old member
    assert len(moved(first, second)) == 3
    for m in ("C0", "C1", "C2"):
        assert len(set(first[m]) - set(second[m])) == 1


def test_sticky_keeps_a_balanced_assignment_that_roundrobin_would_reshuffle() -> None:
    parts = {"t0": 4, "t1": 4}
    members = {"A": ["t0", "t1"], "B": ["t0", "t1"]}
    previous = {"A": tps("t0p3 t1p1 t1p2 t0p0"), "B": tps("t0p1 t0p2 t1p0 t1p3")}
    assert sticky_round(members, parts, previous, 3) == {m: sorted(v) for m, v in previous.items()}


@pytest.mark.parametrize("cls", [StickyAssignor, CooperativeStickyAssignor])
def test_highest_generation_claim_wins(cls: type) -> None:
    def subscription(claim: list[TP], generation: int) -> Subscription:
        if cls is StickyAssignor:
            return Subscription(["t"], user_data=encode_sticky_user_data(claim, generation))
        return Subscription(["t"], owned_partitions=claim, generation_id=generation)

    for gen_a, gen_b in ((5, 3), (3, 5)):
        s = {
            "A": subscription(tps("tp0 tp1"), gen_a),
            "B": subscription(tps("tp0 tp2"), gen_b),
        }
        out = plain(cls().assign({"t": 4}, s))
        winner, loser = ("A", "B") if gen_a > gen_b else ("B", "A")
        # the older claim was superseded: the newer owner keeps tp0 (for cooperative too, with no
        # revocation round), and the loser does not get it
        assert ("t", 0) in out[winner]
        assert ("t", 0) not in out[loser]
        others = {"A": ("t", 1), "B": ("t", 2)}
        assert others[winner] in out[winner]


def test_same_generation_double_claim_is_kept_by_nobody_as_owned() -> None:
    s = {
        "A": Subscription(["t"], user_data=encode_sticky_user_data(tps("tp0 tp1"), 4)),
        "B": Subscription(["t"], user_data=encode_sticky_user_data(tps("tp0"), 4)),
    }
    out = plain(StickyAssignor().assign({"t": 2}, s))
    assert out == {"A": tps("tp1"), "B": tps("tp0")}
    # cooperative: both still hold tp0, so it goes to nobody until both have revoked it
    s = {
        "A": Subscription(["t"], owned_partitions=tps("tp0 tp1"), generation_id=4),
        "B": Subscription(["t"], owned_partitions=tps("tp0"), generation_id=4),
    }
    assert plain(CooperativeStickyAssignor().assign({"t": 2}, s)) == {"A": tps("tp1"), "B": []}
    s = {
        "A": Subscription(["t"], owned_partitions=tps("tp0 tp1"), generation_id=4),
        "B": Subscription(["t"], owned_partitions=tps("tp0 tp2"), generation_id=4),
    }
    out = plain(CooperativeStickyAssignor().assign({"t": 4}, s))
    assert out == {"A": tps("tp1"), "B": tps("tp2 tp3")}


def test_cooperative_claim_by_a_member_that_unsubscribed_is_revoked_first() -> None:
    # A dropped topic t (still holding t0, t1); balance wants t -> B and u0 -> A: a swap
    s = {
        "A": Subscription(["u"], owned_partitions=tps("tp0 tp1"), generation_id=2),
        "B": Subscription(["t", "u"], owned_partitions=tps("up0"), generation_id=2),
    }
    out = plain(CooperativeStickyAssignor().assign({"t": 2, "u": 1}, s))
    assert out == {"A": [], "B": []}  # phase 1: both give up what the other will get
    s = {
        "A": Subscription(["u"], owned_partitions=[], generation_id=3),
        "B": Subscription(["t", "u"], owned_partitions=[], generation_id=3),
    }
    out = plain(CooperativeStickyAssignor().assign({"t": 2, "u": 1}, s))
    assert out == {"A": tps("up0"), "B": tps("tp0 tp1")}  # phase 2: handed over


# ---------------------------------------------------------------------------------------------
# Cooperative sticky: two-phase revocation


class CoopMember:
    def __init__(self, topics: list[str]) -> None:
        self.topics = topics
        self.assignor = CooperativeStickyAssignor()
        self.owned: list[TP] = []
        self.generation = -1

    def subscription(self) -> Subscription:
        return Subscription(
            list(self.topics),
            user_data=self.assignor.subscription_user_data(set(self.topics)),
            owned_partitions=list(self.owned),
            generation_id=self.generation,
        )


def coop_round(
    members: dict[str, CoopMember], partitions: dict[str, int], generation: int
) -> tuple[dict[str, list[TP]], bool]:
    """One cooperative rebalance; returns the assignment and whether any member revoked something."""
    s = {m: c.subscription() for m, c in members.items()}
    owner_before = {tp: m for m, c in members.items() for tp in c.owned}
    out = plain(CooperativeStickyAssignor().assign(partitions, s))
    for m, assigned in out.items():
        for tp in assigned:
            # the KIP-429 rule: never handed over while another member still owns it
            assert owner_before.get(tp, m) == m, (tp, m, owner_before.get(tp))
    revoked = False
    for m, c in members.items():
        if set(c.owned) - set(out[m]):
            revoked = True
        c.owned = out[m]
        c.generation = generation
        c.assignor.on_assignment(Assignment(out[m]), generation)
    return out, revoked


def test_cooperative_join_revokes_first_then_assigns_next_round() -> None:
    parts = {"t": 6}
    members = {"A": CoopMember(["t"]), "B": CoopMember(["t"])}
    start, revoked = coop_round(members, parts, 1)
    assert loads(start) == [3, 3] and not revoked

    members["C"] = CoopMember(["t"])
    phase1, revoked = coop_round(members, parts, 2)
    assert revoked
    assert phase1["C"] == []  # everything C would take is still owned elsewhere
    withheld = set(start["A"] + start["B"]) - set(phase1["A"] + phase1["B"])
    assert len(withheld) == 2
    assert set(phase1["A"]) <= set(start["A"]) and set(phase1["B"]) <= set(start["B"])

    phase2, revoked = coop_round(members, parts, 3)
    assert not revoked
    assert set(phase2["C"]) == withheld
    assert loads(phase2) == [2, 2, 2]
    assert phase2["A"] == phase1["A"] and phase2["B"] == phase1["B"]


def test_cooperative_leave_reassigns_in_one_round() -> None:
    parts = {"t0": 4, "t1": 5}
    members = {m: CoopMember(["t0", "t1"]) for m in ("A", "B", "C")}
    first, _ = coop_round(members, parts, 1)
    del members["B"]
    second, revoked = coop_round(members, parts, 2)
    assert not revoked
    assert sorted(tp for v in second.values() for tp in v) == sorted(
        tp for v in first.values() for tp in v
    )
    assert set(first["A"]) <= set(second["A"]) and set(first["C"]) <= set(second["C"])


def test_cooperative_generation_from_user_data_when_subscription_has_none() -> None:
    a = CooperativeStickyAssignor()
    assert a.subscription_user_data({"t"}) == struct.pack(">i", -1)
    a.on_assignment(Assignment([]), 9)
    assert a.subscription_user_data({"t"}) == struct.pack(">i", 9)
    s = Subscription(["t"], user_data=struct.pack(">i", 9), owned_partitions=[("t", 0)])
    md = a.member_data(s)
    assert md.generation == 9 and md.partitions == [("t", 0)]
    md = a.member_data(Subscription(["t"], user_data=struct.pack(">i", 9), generation_id=11))
    assert md.generation == 11
    # librdkafka's cooperative-sticky sends StickyAssignorUserData v1 instead of a bare int32
    rdkafka_style = encode_sticky_user_data(tps("tp0 up1"), 13)
    assert a.member_data(Subscription(["t"], user_data=rdkafka_style)).generation == 13
    assert a.member_data(Subscription(["t"], user_data=b"\x00\x01")).generation == -1


# ---------------------------------------------------------------------------------------------
# Registry, protocols, custom assignors


def test_registry_and_protocols() -> None:
    assert set(ASSIGNORS) >= {"range", "roundrobin", "sticky", "cooperative-sticky"}
    for name in ("range", "roundrobin", "sticky", "cooperative-sticky"):
        a = get_assignor(name)
        assert isinstance(a, ConsumerPartitionAssignor) and a.name == name
    assert get_assignor("org.apache.kafka.clients.consumer.CooperativeStickyAssignor").name == (
        "cooperative-sticky"
    )
    assert get_assignor("range").supported_protocols == [EAGER]
    assert get_assignor("roundrobin").supported_protocols == [EAGER]
    assert get_assignor("sticky").supported_protocols == [EAGER]
    assert set(get_assignor("cooperative-sticky").supported_protocols) == {COOPERATIVE, EAGER}
    with pytest.raises(ValueError, match="unknown partition assignor"):
        get_assignor("nope")
    assert select_rebalance_protocol([get_assignor("cooperative-sticky")]) == COOPERATIVE
    assert select_rebalance_protocol([get_assignor("cooperative-sticky"), RangeAssignor()]) == EAGER
    assert get_assignor("sticky") is not get_assignor("sticky")  # fresh member state each time


def test_module_docstring_custom_assignor_example_runs() -> None:
    doc = assignors_pkg.__doc__ or ""
    block = doc.split("::\n", 1)[1].splitlines()
    lines = []
    for line in block:
        if line and not line.startswith("    "):
            break  # the example ends at the first unindented paragraph
        lines.append(line[4:])
    code = "\n".join(lines)
    saved = dict(ASSIGNORS)
    try:
        ns: dict[str, object] = {}
        exec(compile(code, "<assignors docstring>", "exec"), ns)
        assignor = ns["assignor"]
        assert isinstance(assignor, ConsumerPartitionAssignor)
        out = plain(assignor.assign({"t": 2, "u": 1}, subs({"x": ["t", "u"], "y": ["u", "t"]})))
        assert out == {"x": tps("tp0 tp1 up0"), "y": []}
        assert resolve_assignor(type(assignor)).name == "first-takes-all"
        assert resolve_assignor(assignor) is assignor
    finally:
        ASSIGNORS.clear()
        ASSIGNORS.update(saved)
    with pytest.raises(TypeError):
        resolve_assignor(object())  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# Properties


ALL = [RangeAssignor, RoundRobinAssignor, StickyAssignor, CooperativeStickyAssignor]
TOPICS = ["a", "b", "c", "d"]


@st.composite
def groups(
    draw: st.DrawFn, homogeneous: bool = False
) -> tuple[dict[str, int], dict[str, Subscription]]:
    partitions = {
        t: draw(st.integers(0, 7)) for t in draw(st.sets(st.sampled_from(TOPICS), min_size=1))
    }
    n = draw(st.integers(1, 6))
    names = draw(
        st.lists(st.text("abcxyz0123", min_size=1, max_size=4), min_size=n, max_size=n, unique=True)
    )
    if homogeneous:
        shared = draw(st.sets(st.sampled_from([*TOPICS, "ghost"]), min_size=1))
    s: dict[str, Subscription] = {}
    all_tps = [(t, p) for t, k in partitions.items() for p in range(k)]
    for name in names:
        topics = shared if homogeneous else draw(st.sets(st.sampled_from([*TOPICS, "ghost"])))
        claimed = draw(st.lists(st.sampled_from(all_tps), max_size=6)) if all_tps else []
        generation = draw(st.integers(-1, 3))
        s[name] = Subscription(
            sorted(topics),
            user_data=encode_sticky_user_data(claimed, generation) if claimed else None,
            owned_partitions=claimed,
            generation_id=generation,
            group_instance_id=draw(st.none() | st.sampled_from(["i1", "i2", "i3"])),
        )
    return partitions, s


def check_valid(
    partitions: dict[str, int], s: dict[str, Subscription], out: dict[str, list[TP]], complete: bool
) -> None:
    assert set(out) == set(s)
    seen: list[TP] = [tp for v in out.values() for tp in v]
    assert len(seen) == len(set(seen)), "a partition went to two members"
    for m, v in out.items():
        for topic, p in v:
            assert topic in s[m].topics and 0 <= p < partitions.get(topic, 0)
    wanted = {(t, p) for sub in s.values() for t in sub.topics for p in range(partitions.get(t, 0))}
    assert set(seen) <= wanted
    if complete:
        assert set(seen) == wanted


def strongly_balanced(s: dict[str, Subscription], out: dict[str, list[TP]]) -> bool:
    """No chain of moves u -> ... -> v (each step: a partition of a topic the next member subscribes
    to) from a member u to a member v holding two partitions fewer."""
    load = {m: len(v) for m, v in out.items()}
    for u in out:
        reach, queue = {u}, deque([u])
        while queue:
            x = queue.popleft()
            for topic in {t for t, _ in out[x]}:
                for y in out:
                    if y not in reach and topic in s[y].topics:
                        reach.add(y)
                        queue.append(y)
        if any(load[v] <= load[u] - 2 for v in reach):
            return False
    return True


def shuffled(s: dict[str, Subscription], seed: int) -> dict[str, Subscription]:
    keys = list(s)
    random.Random(seed).shuffle(keys)
    return {k: s[k] for k in keys}


FAST = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(groups(), st.sampled_from(ALL), st.integers(0, 1000))
def test_property_valid_and_deterministic(
    group: tuple[dict[str, int], dict[str, Subscription]], cls: type, seed: int
) -> None:
    partitions, s = group
    out = plain(cls().assign(partitions, s))
    # the cooperative assignor may withhold partitions that some member still claims
    check_valid(partitions, s, out, complete=cls is not CooperativeStickyAssignor)
    if cls is CooperativeStickyAssignor:
        claimed = {(t, p) for sub in s.values() for t, p in sub.owned_partitions}
        wanted = {
            (t, p) for sub in s.values() for t in sub.topics for p in range(partitions.get(t, 0))
        }
        assert wanted - {tp for v in out.values() for tp in v} <= claimed
    assert plain(cls().assign(partitions, s)) == out
    assert plain(cls().assign(partitions, shuffled(s, seed))) == out


@FAST
@given(groups(homogeneous=True), st.sampled_from(ALL))
def test_property_balance_for_identical_subscriptions(
    group: tuple[dict[str, int], dict[str, Subscription]], cls: type
) -> None:
    partitions, s = group
    if cls is CooperativeStickyAssignor:  # balance is what it converges to once nothing is withheld
        s = {m: Subscription(sub.topics) for m, sub in s.items()}
    out = plain(cls().assign(partitions, s))
    check_valid(partitions, s, out, complete=True)
    if cls is RangeAssignor:  # range balances topic by topic, not overall
        for topic in partitions:
            per = [sum(1 for t, _ in v if t == topic) for v in out.values()]
            if any(topic in sub.topics for sub in s.values()):
                assert max(per) - min(per) <= 1
    else:
        assert max(loads(out)) - min(loads(out)) <= 1


@FAST
@given(groups())
def test_property_sticky_strongly_balanced_and_stable(
    group: tuple[dict[str, int], dict[str, Subscription]],
) -> None:
    partitions, s = group
    out = plain(StickyAssignor().assign(partitions, s))
    assert strongly_balanced(s, out)
    # feeding the result back as everyone's previous assignment changes nothing
    again = {
        m: Subscription(sub.topics, user_data=encode_sticky_user_data(out[m], 5))
        for m, sub in s.items()
    }
    assert plain(StickyAssignor().assign(partitions, again)) == out


@FAST
@given(st.booleans().flatmap(groups), st.data())
def test_property_sticky_keeps_what_balance_allows(
    group: tuple[dict[str, int], dict[str, Subscription]], data: st.DataObject
) -> None:
    """Start from a balanced assignment, remove members and add newcomers: survivors only gain
    partitions or lose at most what takes them down to the new balanced load."""
    partitions, s = group
    first = plain(
        StickyAssignor().assign(partitions, {m: Subscription(x.topics) for m, x in s.items()})
    )
    leaving = data.draw(st.sets(st.sampled_from(sorted(s))))
    joining = data.draw(st.integers(0, 2))
    members = {m: list(sub.topics) for m, sub in s.items() if m not in leaving}
    topics = sorted({t for sub in s.values() for t in sub.topics})
    for i in range(joining):
        members[f"new{i}"] = topics
    if not members:
        return
    second = sticky_round(members, partitions, first, 1)
    s2 = subs(members)
    check_valid(partitions, s2, second, complete=True)
    assert strongly_balanced(s2, second)
    if all(sorted(sub.topics) == topics for sub in s.values()):  # identical subscriptions
        # a survivor keeps everything it had, up to its new share; nothing else moves
        for m in members:
            if m in first:
                assert len(set(first[m]) & set(second[m])) == min(len(first[m]), len(second[m]))
        expected_moves = sum(max(0, len(first[m]) - len(second[m])) for m in members if m in first)
        assert len(moved(first, second)) == expected_moves


@FAST
@given(groups())
def test_property_cooperative_converges_safely(
    group: tuple[dict[str, int], dict[str, Subscription]],
) -> None:
    partitions, s = group
    members: dict[str, CoopMember] = {}
    # start from a consistent state: each partition owned by at most one member (first claim wins)
    taken: set[TP] = set()
    for m, sub in s.items():
        c = CoopMember(sub.topics)
        c.owned = [tp for tp in dict.fromkeys(sub.owned_partitions) if tp not in taken]
        taken |= set(c.owned)
        c.generation = 0
        members[m] = c
    for generation in range(1, 6):
        out, revoked = coop_round(members, partitions, generation)
        if not revoked:
            break
    else:
        pytest.fail("cooperative rebalancing did not settle in 5 rounds")
    check_valid(partitions, subs({m: c.topics for m, c in members.items()}), out, complete=True)
    assert strongly_balanced({m: Subscription(c.topics) for m, c in members.items()}, out)


def test_sticky_scales_to_a_large_group() -> None:
    members = {f"consumer-{i:03d}": [f"topic-{j}" for j in range(10)] for i in range(60)}
    parts = {f"topic-{j}": 48 for j in range(10)}
    started = time.perf_counter()
    first = sticky_round(members, parts, {}, 0)
    members["consumer-new"] = list(members["consumer-000"])
    second = sticky_round(members, parts, first, 1)
    elapsed = time.perf_counter() - started
    assert max(loads(second)) - min(loads(second)) <= 1
    assert len(moved(first, second)) == len(second["consumer-new"])
    assert elapsed < 5.0, elapsed
