"""The KIP-848 consumer group as pure logic: joins, leaves, expiries and reconciliation driven by
simulated clients. No partition is ever owned by two live members; the group converges to a balanced
target; replaying the records rebuilds the same group."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.coordinator.consumer_assignors import (
    AssignmentMember,
    SubscribedTopic,
    range_assign,
    uniform_assign,
)
from kafkalite.coordinator.consumer_group import (
    ConsumerGroup,
    GroupConfig,
    HeartbeatRequest,
    MemberState,
)
from kafkalite.coordinator.consumer_group_types import (
    CurrentAssignmentRecord,
    GroupEpochRecord,
    MemberSubscriptionRecord,
    TargetAssignmentMemberRecord,
)
from kafkalite.protocol.errors import ErrorCode

T1 = SubscribedTopic(uuid.UUID(int=1), "orders", 6)
T2 = SubscribedTopic(uuid.UUID(int=2), "payments", 3)
TOPICS = {T1.name: T1, T2.name: T2}
CONFIG = GroupConfig()


@dataclass
class Client:
    """A consumer as KIP-848 asks it to behave: it takes what it is given at once, keeps processing
    what it must give up until its next heartbeat (revocation takes time: commits, callbacks), drops
    it then, and says what it owns whenever that changed."""

    member_id: str
    epoch: int = 0
    owned: dict[uuid.UUID, frozenset[int]] = field(default_factory=dict)
    topics: tuple[str, ...] = ("orders", "payments")
    revoking: dict[uuid.UUID, frozenset[int]] = field(default_factory=dict)
    changed: bool = False
    instance_id: str | None = None


class Harness:
    def __init__(self) -> None:
        self.group = ConsumerGroup("g")
        self.log: list[object] = []
        self.clients: dict[str, Client] = {}
        self.now = 0
        self.ids = (f"m{i}" for i in itertools.count())
        self.topics = dict(TOPICS)

    def _apply(self, records: Sequence[object]) -> None:
        for r in records:
            self.group.replay(r)  # type: ignore[arg-type]
        self.log += records

    def heartbeat(self, c: Client, *, full: bool = True, busy: bool = False) -> ErrorCode:
        if c.revoking and not busy:  # the revocation finished since the last heartbeat
            c.owned = {t: ps - c.revoking.get(t, frozenset()) for t, ps in c.owned.items()}
            c.owned = {t: ps for t, ps in c.owned.items() if ps}
            c.revoking, c.changed = {}, True
        req = HeartbeatRequest(
            member_id=c.member_id,
            member_epoch=c.epoch,
            instance_id=c.instance_id,
            rebalance_timeout_ms=60000 if c.epoch == 0 else -1,
            subscribed_topic_names=c.topics if c.epoch == 0 else None,
            owned=dict(c.owned) if full or c.changed else None,
        )
        c.changed = False
        result, records = self.group.heartbeat(req, self.topics, CONFIG, lambda: "unused")
        self._apply(records)
        if result.error != ErrorCode.NO_ERROR:
            return result.error
        self.group.touch(c.member_id, CONFIG, self.now)
        c.epoch = result.member_epoch
        if result.assignment is not None:
            given = {t: ps for t, ps in result.assignment.items() if ps}
            c.revoking = {t: ps - given.get(t, frozenset()) for t, ps in c.owned.items()}
            c.revoking = {t: ps for t, ps in c.revoking.items() if ps}
            for t, ps in given.items():
                c.owned[t] = c.owned.get(t, frozenset()) | ps
        return ErrorCode.NO_ERROR

    def join(self, instance_id: str | None = None) -> Client:
        c = Client(next(self.ids), instance_id=instance_id)
        self.clients[c.member_id] = c
        assert self.heartbeat(c) == ErrorCode.NO_ERROR
        return c

    def leave(self, c: Client) -> None:
        c.owned = {}
        req = HeartbeatRequest(member_id=c.member_id, member_epoch=-1)
        result, records = self.group.heartbeat(req, self.topics, CONFIG, lambda: "unused")
        assert result.error == ErrorCode.NO_ERROR
        self._apply(records)
        del self.clients[c.member_id]

    def expire(self, c: Client) -> None:
        """The member's session ends (a SIGKILL): the server removes it; the zombie owns nothing
        any live member could be refused for."""
        self._apply(self.group.remove_members([c.member_id]))
        del self.clients[c.member_id]

    def check_exclusive(self) -> None:
        seen: dict[tuple[uuid.UUID, int], str] = {}
        for c in self.clients.values():
            for t, ps in c.owned.items():
                for p in ps:
                    assert (t, p) not in seen, f"{(t, p)} owned by {seen[(t, p)]} and {c.member_id}"
                    seen[(t, p)] = c.member_id

    def settle(self, rounds: int = 6) -> None:
        for _ in range(rounds):
            for c in list(self.clients.values()):
                assert self.heartbeat(c) == ErrorCode.NO_ERROR
                self.check_exclusive()


def all_partitions() -> set[tuple[uuid.UUID, int]]:
    return {(t.topic_id, p) for t in TOPICS.values() for p in range(t.partitions)}


def test_three_members_converge_to_a_balanced_disjoint_assignment() -> None:
    h = Harness()
    for _ in range(3):
        h.join()
    h.settle()
    owned = [{(t, p) for t, ps in c.owned.items() for p in ps} for c in h.clients.values()]
    assert set().union(*owned) == all_partitions()
    assert sorted(len(o) for o in owned) == [3, 3, 3]
    assert h.group.state == "Stable"
    assert all(m.member_epoch == h.group.group_epoch for m in h.group.members.values())


def test_a_partition_moves_only_after_its_owner_revoked_it() -> None:
    h = Harness()
    a = h.join()
    h.settle()
    assert sum(len(ps) for ps in a.owned.values()) == 9
    b = h.join()  # b joins: its target partitions are still a's
    assert not b.owned
    assert h.group.members[b.member_id].state is MemberState.UNRELEASED_PARTITIONS
    # a heartbeats and is told to drop some; until a reports it did, b gets none of them
    assert h.heartbeat(a, full=False) == ErrorCode.NO_ERROR
    assert h.group.members[a.member_id].state is MemberState.UNREVOKED_PARTITIONS
    assert h.heartbeat(b) == ErrorCode.NO_ERROR
    assert not b.owned
    h.check_exclusive()
    h.settle()
    assert sum(len(ps) for ps in b.owned.values()) in (4, 5)


def test_a_busy_old_owner_keeps_its_partitions_from_the_new_one() -> None:
    h = Harness()
    a = h.join()
    h.settle()
    b = h.join()
    assert h.heartbeat(a) == ErrorCode.NO_ERROR  # told to give some up
    assert a.revoking
    assert h.heartbeat(a, busy=True) == ErrorCode.NO_ERROR  # still committing: still owns them
    assert h.heartbeat(b) == ErrorCode.NO_ERROR
    h.check_exclusive()
    assert not b.owned
    assert h.heartbeat(a) == ErrorCode.NO_ERROR  # done: says so
    assert h.heartbeat(b) == ErrorCode.NO_ERROR
    assert b.owned
    h.check_exclusive()


def test_fenced_and_unknown_members() -> None:
    h = Harness()
    a = h.join()
    h.settle()
    stale = Client(
        a.member_id, epoch=a.epoch - 1 if a.epoch > 1 else 99, owned={T1.topic_id: frozenset({0})}
    )
    h.join()
    h.settle()
    assert h.heartbeat(stale) == ErrorCode.FENCED_MEMBER_EPOCH
    assert h.heartbeat(Client("nobody", epoch=3)) == ErrorCode.UNKNOWN_MEMBER_ID


def _lose_answer(h: Harness, c: Client) -> None:
    """A heartbeat the coordinator wrote and answered, its answer lost (the coordinator died)."""
    saved = (c.epoch, dict(c.owned), dict(c.revoking), c.changed)
    assert h.heartbeat(c) == ErrorCode.NO_ERROR
    c.epoch, c.owned, c.revoking, c.changed = saved


def test_a_lost_answer_is_recovered_by_a_full_heartbeat_at_the_previous_epoch() -> None:
    h = Harness()
    a, b, c, d = h.join(), h.join(), h.join(), h.join()
    h.settle()
    h.leave(d)  # a new group epoch: c's next answer moves it there with more partitions
    _lose_answer(h, c)
    member = h.group.members[c.member_id]
    assert member.member_epoch > c.epoch and member.previous_member_epoch == c.epoch
    # a partial heartbeat at the previous epoch says nothing of what it owns: fenced (as Kafka)
    assert h.heartbeat(c, full=False) == ErrorCode.FENCED_MEMBER_EPOCH
    # a full one is accepted and carries the assignment of the epoch it is moved to
    assert h.heartbeat(c) == ErrorCode.NO_ERROR
    assert c.epoch == h.group.members[c.member_id].member_epoch
    assert c.owned == {t: ps for t, ps in h.group.members[c.member_id].assigned.items() if ps}
    h.settle()
    h.check_exclusive()
    owned = [{(t, p) for t, ps in x.owned.items() for p in ps} for x in (a, b, c)]
    assert set().union(*owned) == all_partitions()


def test_bad_first_heartbeats() -> None:
    g = ConsumerGroup("g")
    bad_assignor = HeartbeatRequest(
        "m", 0, rebalance_timeout_ms=1, subscribed_topic_names=("orders",), server_assignor="zigzag"
    )
    result, records = g.heartbeat(bad_assignor, TOPICS, CONFIG, lambda: "x")
    assert result.error == ErrorCode.UNSUPPORTED_ASSIGNOR and not records
    no_topics = HeartbeatRequest("m", 0, rebalance_timeout_ms=1)
    assert g.heartbeat(no_topics, TOPICS, CONFIG, lambda: "x")[0].error == ErrorCode.INVALID_REQUEST
    bad_regex = HeartbeatRequest("m", 0, rebalance_timeout_ms=1, subscribed_topic_regex="(")
    assert (
        g.heartbeat(bad_regex, TOPICS, CONFIG, lambda: "x")[0].error
        == ErrorCode.INVALID_REGULAR_EXPRESSION
    )
    # Python's re takes lookaround and backreferences; RE2, which Kafka validates with, does not
    for pattern in ("orders(?=x)", "(o)\\1", "o*+", "(?>o)"):
        req = HeartbeatRequest("m", 0, rebalance_timeout_ms=1, subscribed_topic_regex=pattern)
        result, records = g.heartbeat(req, TOPICS, CONFIG, lambda: "x")
        assert result.error == ErrorCode.INVALID_REGULAR_EXPRESSION, pattern
        assert "not RE2 syntax" in (result.message or "") and not records
    assert not g.members


def test_regex_subscription_and_new_topics() -> None:
    h = Harness()
    c = Client("r1", topics=())
    h.clients[c.member_id] = c
    req = HeartbeatRequest("r1", 0, rebalance_timeout_ms=1000, subscribed_topic_regex="ord.*")
    result, records = h.group.heartbeat(req, h.topics, CONFIG, lambda: "x")
    h._apply(records)
    assert result.assignment == {T1.topic_id: frozenset(range(6))}
    c.epoch = result.member_epoch
    # a matching topic appears: the next heartbeat bumps the group epoch and assigns it
    t3 = SubscribedTopic(uuid.UUID(int=3), "ordersx", 2)
    h.topics[t3.name] = t3
    epoch = h.group.group_epoch
    assert h.heartbeat(c, full=False) == ErrorCode.NO_ERROR
    assert h.group.group_epoch == epoch + 1
    assert c.owned[t3.topic_id] == frozenset({0, 1})


def test_replaying_the_records_rebuilds_the_group() -> None:
    h = Harness()
    members = [h.join() for _ in range(3)]
    h.settle()
    h.leave(members[0])
    h.settle()
    again = ConsumerGroup("g")
    for r in h.log:
        again.replay(r)  # type: ignore[arg-type]
    assert again.group_epoch == h.group.group_epoch
    assert again.assignment_epoch == h.group.assignment_epoch
    assert again.target == h.group.target
    assert {m: (x.member_epoch, x.state, x.assigned) for m, x in again.members.items()} == {
        m: (x.member_epoch, x.state, x.assigned) for m, x in h.group.members.items()
    }


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.sampled_from(["join", "leave", "expire", "beat", "beat", "beat", "grow"]), max_size=40
    )
)
def test_no_partition_is_ever_owned_twice(actions: list[str]) -> None:
    h = Harness()
    h.join()
    for i, action in enumerate(actions):
        live = sorted(h.clients)
        pick = h.clients[live[i % len(live)]] if live else None
        if action == "join" or pick is None:
            if len(h.clients) < 6:
                h.join()
        elif action == "leave":
            h.leave(pick)
        elif action == "expire":
            h.expire(pick)
        elif action == "grow":
            t = h.topics["payments"]
            h.topics["payments"] = SubscribedTopic(t.topic_id, t.name, t.partitions + 1)
        else:  # "busy": a heartbeat sent while the client is still revoking
            assert h.heartbeat(pick, full=i % 2 == 0, busy=action == "busy") == ErrorCode.NO_ERROR
        h.check_exclusive()
    if h.clients:
        h.settle(rounds=len(h.clients) + 4)
        owned = [{(t, p) for t, ps in c.owned.items() for p in ps} for c in h.clients.values()]
        expected = {(t.topic_id, p) for t in h.topics.values() for p in range(t.partitions)}
        assert set().union(*owned) == expected
        assert max(map(len, owned)) - min(map(len, owned)) <= 1
        assert h.group.state == "Stable"


def test_assignors() -> None:
    topics = {T1.topic_id: T1, T2.topic_id: T2}
    both = frozenset(topics)
    members = [AssignmentMember(f"m{i}", both, {}) for i in range(2)]
    r = range_assign(members, topics)
    assert r["m0"] == {T1.topic_id: frozenset({0, 1, 2}), T2.topic_id: frozenset({0, 1})}
    assert r["m1"] == {T1.topic_id: frozenset({3, 4, 5}), T2.topic_id: frozenset({2})}
    u = uniform_assign(members, topics)
    assert sorted(sum(len(ps) for ps in a.values()) for a in u.values()) == [4, 5]
    # sticky: a third member takes partitions from the others, the rest stay where they were
    third = [AssignmentMember(m, both, u[m]) for m in u] + [AssignmentMember("m2", both, {})]
    v = uniform_assign(third, topics)
    for m in ("m0", "m1"):
        kept = {(t, p) for t, ps in v[m].items() for p in ps}
        before = {(t, p) for t, ps in u[m].items() for p in ps}
        assert kept <= before
    assert sorted(sum(len(ps) for ps in a.values()) for a in v.values()) == [3, 3, 3]
    # a member subscribed to one topic only gets partitions of that topic
    only = [AssignmentMember("a", frozenset({T1.topic_id}), {}), AssignmentMember("b", both, {})]
    w = uniform_assign(only, topics)
    assert set(w["a"]) <= {T1.topic_id}
    assert set(w["b"]) >= {T2.topic_id}


# -- static members (group.instance.id) -------------------------------------------------------------
def owned_set(c: Client) -> set[tuple[uuid.UUID, int]]:
    return {(t, p) for t, ps in c.owned.items() for p in ps}


def static_group() -> tuple[Harness, list[Client]]:
    h = Harness()
    members = [h.join(instance_id=f"i{i}") for i in range(3)]
    h.settle()
    assert h.group.state == "Stable"
    return h, members


def static_leave(h: Harness, c: Client) -> list[object]:
    req = HeartbeatRequest(c.member_id, -2, instance_id=c.instance_id)
    result, records = h.group.heartbeat(req, h.topics, CONFIG, lambda: "unused")
    assert (result.error, result.member_id, result.member_epoch) == (
        ErrorCode.NO_ERROR,
        c.member_id,
        -2,
    )
    h._apply(records)
    h.group.touch(c.member_id, CONFIG, h.now)
    del h.clients[c.member_id]
    return list(records)


def test_a_static_member_leaving_with_epoch_minus_2_keeps_its_partitions() -> None:
    h, (a, b, c) = static_group()
    epoch, target = h.group.group_epoch, dict(h.group.target)
    assigned = dict(h.group.members[b.member_id].assigned)
    records = static_leave(h, b)
    # one record: its current assignment under member epoch -2, nothing else
    assert len(records) == 1 and isinstance(records[0], CurrentAssignmentRecord)
    assert records[0].member_epoch == -2 and records[0].assigned == assigned
    gone = h.group.members[b.member_id]
    assert gone.member_epoch == -2 and gone.assigned == assigned
    assert gone.subscription.instance_id == "i1"
    assert h.group.group_epoch == epoch and h.group.target == target
    # the others are not disturbed and do not get its partitions
    before = {x.member_id: owned_set(x) for x in (a, c)}
    h.settle()
    assert {x.member_id: owned_set(x) for x in (a, c)} == before
    assert h.group.group_epoch == epoch


def test_a_new_instance_takes_over_the_static_members_partitions() -> None:
    h, (a, b, c) = static_group()
    epoch, assignment_epoch = h.group.group_epoch, h.group.assignment_epoch
    others = {x.member_id: (owned_set(x), x.epoch) for x in (a, c)}
    static_leave(h, b)
    mark = len(h.log)
    b2 = h.join(instance_id="i1")  # a new process, a new member id, the same instance id
    assert b2.member_id != b.member_id
    assert owned_set(b2) == owned_set(b)
    assert b2.epoch == assignment_epoch
    assert b.member_id not in h.group.members
    assert h.group.members[b2.member_id].subscription.instance_id == "i1"
    assert (h.group.group_epoch, h.group.assignment_epoch) == (epoch, assignment_epoch)
    written = h.log[mark:]
    assert not any(isinstance(r, GroupEpochRecord) for r in written)
    tombstones = {
        type(r)
        for r in written
        if getattr(r, "member_id", None) == b.member_id
        and (
            getattr(r, "tombstone", False)
            or getattr(r, "subscription", 0) is None
            or getattr(r, "partitions", 0) is None
        )
    }
    assert tombstones == {
        CurrentAssignmentRecord,
        TargetAssignmentMemberRecord,
        MemberSubscriptionRecord,
    }
    # the other members' next heartbeats change nothing for them
    for x in (a, c):
        req = HeartbeatRequest(x.member_id, x.epoch, instance_id=x.instance_id)
        result, records = h.group.heartbeat(req, h.topics, CONFIG, lambda: "unused")
        assert result.error == ErrorCode.NO_ERROR and result.assignment is None and not records
    h.settle()
    assert {x.member_id: (owned_set(x), x.epoch) for x in (a, c)} == others
    h.check_exclusive()
    assert h.group.state == "Stable"


def test_an_instance_id_still_in_use_is_refused() -> None:
    h, (a, b, c) = static_group()
    req = HeartbeatRequest(
        "intruder", 0, instance_id="i1", rebalance_timeout_ms=1, subscribed_topic_names=("orders",)
    )
    result, records = h.group.heartbeat(req, h.topics, CONFIG, lambda: "unused")
    assert result.error == ErrorCode.UNRELEASED_INSTANCE_ID and not records
    assert "i1" in (result.message or "") and b.member_id in (result.message or "")
    assert set(h.group.members) == {a.member_id, b.member_id, c.member_id}


def test_a_replaced_instance_is_fenced() -> None:
    h, (a, b, _c) = static_group()
    static_leave(h, b)
    h.join(instance_id="i1")
    # the old member id heartbeats, or leaves, with the instance id now owned by the new member
    for epoch in (b.epoch, -1, -2):
        req = HeartbeatRequest(b.member_id, epoch, instance_id="i1")
        result, records = h.group.heartbeat(req, h.topics, CONFIG, lambda: "unused")
        assert result.error == ErrorCode.FENCED_INSTANCE_ID and not records, epoch
    unknown = HeartbeatRequest(a.member_id, a.epoch, instance_id="nope")
    result, _ = h.group.heartbeat(unknown, h.topics, CONFIG, lambda: "unused")
    assert result.error == ErrorCode.UNKNOWN_MEMBER_ID


def test_a_static_member_that_never_returns_expires_and_the_group_rebalances() -> None:
    h, (a, b, c) = static_group()
    h.now = 1000
    for x in (a, b, c):
        h.group.touch(x.member_id, CONFIG, h.now)
    deadline = h.group.members[b.member_id].session_deadline_ms
    h.now = 5000
    static_leave(h, b)  # the leave does not extend its session
    assert h.group.members[b.member_id].session_deadline_ms == deadline
    h.now = deadline - 1
    for x in (a, c):
        h.group.touch(x.member_id, CONFIG, h.now)
    assert h.group.expired_members(h.now) == []
    h.now = deadline
    assert h.group.expired_members(h.now) == [b.member_id]
    epoch = h.group.group_epoch
    h._apply(h.group.remove_members([b.member_id]))
    assert b.member_id not in h.group.members and h.group.group_epoch == epoch + 1
    h.settle()
    assert owned_set(a) | owned_set(c) == all_partitions()
    # the instance id is free again: a new instance joins as a new member
    b2 = h.join(instance_id="i1")
    h.settle()
    assert owned_set(b2) and h.group.state == "Stable"


def test_a_static_leave_and_takeover_replay_to_the_same_group() -> None:
    h, (_a, b, _c) = static_group()
    static_leave(h, b)
    snapshot_after_leave = ConsumerGroup("g")
    for r in h.log:
        snapshot_after_leave.replay(r)  # type: ignore[arg-type]
    assert snapshot_after_leave.members[b.member_id].member_epoch == -2
    assert (
        snapshot_after_leave.members[b.member_id].assigned == h.group.members[b.member_id].assigned
    )
    h.join(instance_id="i1")
    h.settle()
    again = ConsumerGroup("g")
    for r in h.log:
        again.replay(r)  # type: ignore[arg-type]
    assert (again.group_epoch, again.assignment_epoch, again.target) == (
        h.group.group_epoch,
        h.group.assignment_epoch,
        h.group.target,
    )

    def view(g: ConsumerGroup) -> dict[str, object]:
        return {
            m: (x.subscription, x.member_epoch, x.previous_member_epoch, x.state, x.assigned)
            for m, x in g.members.items()
        }

    assert view(again) == view(h.group)
