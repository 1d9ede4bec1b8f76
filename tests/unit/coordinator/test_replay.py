"""Reloading `__consumer_offsets` after a restart rebuilds exactly the state live traffic left behind."""

from __future__ import annotations

from typing import Any

from coordinator_helpers import Harness, done

from kafkalite.coordinator import GroupCoordinator
from kafkalite.coordinator import records as rec
from kafkalite.coordinator.state import GroupState
from kafkalite.coordinator.types import LeavingMember, OffsetCommitPartition, TopicPartition
from kafkalite.protocol.errors import ErrorCode

E = ErrorCode
S = GroupState


def snapshot(coord: GroupCoordinator) -> dict[str, Any]:
    return {gid: (g.state, g.persisted_view()) for gid, g in sorted(coord.groups.items())}


def commit(
    h: Harness, group: str, offsets: dict[tuple[str, int], int], member: str = "", gen: int = -1
) -> None:
    parts = [
        OffsetCommitPartition(t, p, o, leader_epoch=2, metadata=f"meta-{o}")
        for (t, p), o in offsets.items()
    ]
    r = done(h.coord.commit_offsets(group, parts, member_id=member, generation_id=gen))
    assert set(r.values()) == {E.NO_ERROR}


def build_history(h: Harness) -> None:
    # a stable consumer group with a static member, commits by members
    a, b, _c = h.stable_group("stable", 3, instances=[None, "inst-b", None])
    commit(h, "stable", {("t", 0): 10, ("t", 1): 11}, a.member_id, 1)
    commit(h, "stable", {("t", 0): 12}, b.member_id, 1)
    # the static member restarts: new member id persisted, no rebalance
    rb = done(h.join("stable", instance="inst-b"))
    assert rb.error == E.NO_ERROR
    # a group that rebalanced twice then emptied, keeping its offsets
    x, y = h.stable_group("emptied", 2)
    commit(h, "emptied", {("u", 0): 5}, x.member_id, 1)
    h.coord.leave_group("emptied", [LeavingMember(y.member_id)])
    rx = h.join("emptied", x.member_id)
    h.advance(0)
    jx = done(rx)
    done(h.sync("emptied", jx, {x.member_id: b"all"}))
    h.coord.leave_group("emptied", [LeavingMember(x.member_id)])
    assert h.coord.groups["emptied"].state is S.EMPTY
    # standalone commits, overwritten and partly deleted
    commit(h, "solo", {("v", 0): 1, ("v", 1): 2})
    commit(h, "solo", {("v", 0): 3})
    done(h.coord.delete_offsets("solo", [TopicPartition("v", 1)]))
    # a group created and deleted
    commit(h, "deleted", {("w", 0): 1})
    assert done(h.coord.delete_groups(["deleted"])) == {"deleted": E.NO_ERROR}
    h.advance(1)


def test_reload_equals_live_state() -> None:
    h = Harness()
    build_history(h)
    live = snapshot(h.coord)
    assert set(live) == {"stable", "emptied", "solo"}
    reloaded = h.new_coordinator()
    assert snapshot(reloaded) == live


def test_reload_is_idempotent_and_order_of_compaction_does_not_matter() -> None:
    h = Harness()
    build_history(h)
    live = snapshot(h.coord)
    # keep only the last record per key, as the log cleaner would
    for partition, log in h.topic.logs.items():
        last: dict[bytes, bytes | None] = {}
        for k, v in log:
            last.pop(k, None)
            last[k] = v
        h.topic.logs[partition] = list(last.items())
    assert snapshot(h.new_coordinator()) == live


def test_reloaded_members_resume_without_rejoining() -> None:
    h = Harness()
    a, b = h.stable_group("g", 2)
    h.coord = h.new_coordinator()
    g = h.coord.groups["g"]
    assert (g.state, g.generation_id, g.leader_id, g.protocol_name) == (
        S.STABLE,
        1,
        a.member_id,
        "range",
    )
    assert h.coord.heartbeat("g", a.member_id, 1) == E.NO_ERROR
    s = done(h.sync("g", b))
    assert s.assignment == f"assign-{b.member_id}".encode()
    # loaded members still expire if they never come back (b synced but never heartbeats)
    h.advance(5_000)
    assert h.coord.heartbeat("g", a.member_id, 1) == E.NO_ERROR
    h.advance(5_000)
    assert h.coord.groups["g"].state is S.PREPARING_REBALANCE
    assert not h.coord.groups["g"].has(b.member_id)


def test_reload_of_a_group_caught_mid_rebalance_gives_its_last_stored_generation() -> None:
    h = Harness()
    a, b = h.stable_group("g", 2)
    h.join("g")  # rebalance in flight: nothing of it is stored
    assert h.coord.groups["g"].state is S.PREPARING_REBALANCE
    reloaded = h.new_coordinator()
    g = reloaded.groups["g"]
    assert (
        g.state is S.STABLE
        and g.generation_id == 1
        and set(g.members) == {a.member_id, b.member_id}
    )


def test_load_in_progress_until_every_record_is_replayed() -> None:
    h = Harness()
    commit(h, "solo", {("v", 0): 7})
    coord = h.new_coordinator(load=False)
    p = coord.partition_for("solo")
    coord.begin_loading(p)
    for key, value in h.topic.logs[p]:
        coord.replay(p, key, value)
        assert coord.fetch_offsets("solo").error == E.COORDINATOR_LOAD_IN_PROGRESS
    assert coord.list_groups().error == E.COORDINATOR_LOAD_IN_PROGRESS
    coord.finish_loading(p)
    assert [x.offset for x in coord.fetch_offsets("solo").partitions] == [7]


def test_unreadable_records_are_skipped() -> None:
    h = Harness()
    commit(h, "solo", {("v", 0): 7})
    p = h.coord.partition_for("solo")
    h.topic.logs[p][0:0] = [
        (b"\x00\x09junk", b"x"),  # a record type from the future
        (rec.offset_key("solo", "v", 1), b"\x00"),  # a truncated value
        (None, b"no key"),  # type: ignore[list-item]
        (rec.group_key("solo"), b"\x00\x63"),  # a group value version we do not know
    ]
    coord = h.new_coordinator()
    assert [(x.partition, x.offset) for x in coord.fetch_offsets("solo").partitions] == [(0, 7)]
