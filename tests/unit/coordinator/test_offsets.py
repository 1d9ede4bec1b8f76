"""OffsetCommit / OffsetFetch / OffsetDelete / DescribeGroups / ListGroups / DeleteGroups and the
offsets.retention.minutes cleanup, on a fake clock."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from coordinator_helpers import Harness, done, subscription

from kafkalite.coordinator import records as rec
from kafkalite.coordinator.state import GroupState
from kafkalite.coordinator.types import LeavingMember, OffsetCommitPartition, TopicPartition
from kafkalite.protocol.errors import ErrorCode

E = ErrorCode
S = GroupState
G = "group-o"
TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)


def commit(
    h: Harness, group: str, offsets: dict[TopicPartition, int], **kw: object
) -> dict[TopicPartition, ErrorCode]:
    parts = [
        OffsetCommitPartition(tp.topic, tp.partition, off, metadata=f"m{off}")
        for tp, off in offsets.items()
    ]
    return done(h.coord.commit_offsets(group, parts, **kw))  # type: ignore[arg-type]


def fetched(
    h: Harness, group: str, tps: list[TopicPartition] | None = None
) -> dict[TopicPartition, int]:
    res = h.coord.fetch_offsets(group, tps)
    assert res.error == E.NO_ERROR
    return {TopicPartition(p.topic, p.partition): p.offset for p in res.partitions}


# ---------------------------------------------------------------------------- commit checks


def test_member_commit_with_generation(h: Harness) -> None:
    (a,) = h.stable_group(G, 1)
    r = commit(h, G, {TP0: 10, TP1: 20}, member_id=a.member_id, generation_id=1)
    assert r == {TP0: E.NO_ERROR, TP1: E.NO_ERROR}
    res = h.coord.fetch_offsets(G, [TP0, TP1, TopicPartition("u", 0)])
    assert [(p.offset, p.metadata, p.error) for p in res.partitions] == [
        (10, "m10", E.NO_ERROR),
        (20, "m20", E.NO_ERROR),
        (-1, "", E.NO_ERROR),
    ]


@pytest.mark.parametrize(
    ("member", "generation", "instance", "expected"),
    [
        ("stranger", 1, None, E.UNKNOWN_MEMBER_ID),
        ("LEADER", 2, None, E.ILLEGAL_GENERATION),
        ("LEADER", 0, None, E.ILLEGAL_GENERATION),
        ("", -1, None, E.UNKNOWN_MEMBER_ID),  # standalone commit into a group with members
        ("stranger", 1, "inst-a", E.FENCED_INSTANCE_ID),
    ],
)
def test_commit_rejections(
    h: Harness, member: str, generation: int, instance: str | None, expected: ErrorCode
) -> None:
    (a,) = h.stable_group(G, 1, instances=["inst-a"])
    member = a.member_id if member == "LEADER" else member
    r = commit(
        h, G, {TP0: 1}, member_id=member, generation_id=generation, group_instance_id=instance
    )
    assert r == {TP0: expected}
    assert fetched(h, G) == {}


def test_commit_during_completing_rebalance_is_rebalance_in_progress(h: Harness) -> None:
    d = h.join(G)
    h.advance(0)
    j = done(d)
    r = commit(h, G, {TP0: 1}, member_id=j.member_id, generation_id=j.generation_id)
    assert r == {TP0: E.REBALANCE_IN_PROGRESS}


def test_commit_allowed_while_preparing_rebalance(h: Harness) -> None:
    a, _b = h.stable_group(G, 2)
    h.join(G)  # newcomer
    assert h.coord.groups[G].state is S.PREPARING_REBALANCE
    assert commit(h, G, {TP0: 7}, member_id=a.member_id, generation_id=1) == {TP0: E.NO_ERROR}


def test_standalone_commit_creates_offsets_only_group(h: Harness) -> None:
    assert commit(h, "solo", {TP0: 5}) == {TP0: E.NO_ERROR}
    g = h.coord.groups["solo"]
    assert g.protocol_type is None and g.state is S.EMPTY
    assert fetched(h, "solo") == {TP0: 5}
    # a generation for a group the coordinator never saw: rejected
    assert commit(h, "ghost", {TP0: 5}, member_id="m", generation_id=3) == {
        TP0: E.ILLEGAL_GENERATION
    }
    assert "ghost" not in h.coord.groups


def test_empty_group_id_may_store_offsets(h: Harness) -> None:
    assert commit(h, "", {TP0: 5}) == {TP0: E.NO_ERROR}
    assert fetched(h, "") == {TP0: 5}


def test_metadata_too_large_per_partition(make_harness: Callable[..., Harness]) -> None:
    h = make_harness(offset_metadata_max_bytes=4)
    parts = [
        OffsetCommitPartition("t", 0, 1, metadata="abcd"),
        OffsetCommitPartition("t", 1, 1, metadata="abcde"),
    ]
    r = done(h.coord.commit_offsets("s", parts))
    assert r == {TP0: E.NO_ERROR, TP1: E.OFFSET_METADATA_TOO_LARGE}
    assert fetched(h, "s") == {TP0: 1}


def test_commit_answered_only_after_append_and_cache_follows_the_log(h: Harness) -> None:
    h.topic.mode = "hold"
    d = h.coord.commit_offsets(
        "s", [OffsetCommitPartition("t", 0, 9, leader_epoch=3, metadata="x")]
    )
    assert not d.done()
    assert fetched(h, "s", [TP0]) == {TP0: -1}
    h.topic.release()
    assert done(d) == {TP0: E.NO_ERROR}
    p = h.coord.fetch_offsets("s", [TP0]).partitions[0]
    assert (p.offset, p.leader_epoch, p.metadata) == (9, 3, "x")


@pytest.mark.parametrize(
    ("storage_error", "client_error"),
    [
        (E.NOT_LEADER_OR_FOLLOWER, E.NOT_COORDINATOR),
        (E.KAFKA_STORAGE_ERROR, E.NOT_COORDINATOR),
        (E.NOT_ENOUGH_REPLICAS, E.COORDINATOR_NOT_AVAILABLE),
        (E.MESSAGE_TOO_LARGE, E.INVALID_COMMIT_OFFSET_SIZE),
        (E.CORRUPT_MESSAGE, E.CORRUPT_MESSAGE),
    ],
)
def test_failed_append_maps_error_and_leaves_cache(
    h: Harness, storage_error: ErrorCode, client_error: ErrorCode
) -> None:
    commit(h, "s", {TP0: 1})
    h.topic.mode, h.topic.fail_code = "fail", storage_error
    assert commit(h, "s", {TP0: 2}) == {TP0: client_error}
    assert fetched(h, "s") == {TP0: 1}


def test_commit_records_carry_retention_as_expire_timestamp(h: Harness) -> None:
    parts = [
        OffsetCommitPartition("t", 0, 1, retention_ms=60_000),
        OffsetCommitPartition("t", 1, 1, commit_timestamp=5),
    ]
    done(h.coord.commit_offsets("s", parts))
    values = [
        rec.parse_offset_value(v)
        for _, v in h.topic.logs[h.coord.partition_for("s")]
        if v is not None
    ]
    assert (
        values[0].expire_timestamp == h.clock.ms + 60_000
        and values[0].commit_timestamp == h.clock.ms
    )
    assert values[1].expire_timestamp is None and values[1].commit_timestamp == 5


# ---------------------------------------------------------------------------- fetch


def test_fetch_all_and_unknown_group(h: Harness) -> None:
    commit(h, "s", {TP1: 2, TP0: 1, TopicPartition("a", 3): 3})
    assert list(fetched(h, "s")) == [TopicPartition("a", 3), TP0, TP1]  # sorted
    assert fetched(h, "unknown") == {}
    assert fetched(h, "unknown", [TP0]) == {TP0: -1}
    assert h.coord.fetch_offsets("s", require_stable=True).error == E.NO_ERROR


# ---------------------------------------------------------------------------- delete offsets


def test_delete_offsets_of_empty_group_then_group_disappears(h: Harness) -> None:
    commit(h, "s", {TP0: 1, TP1: 2})
    r = done(h.coord.delete_offsets("s", [TP0]))
    assert r.error == E.NO_ERROR and r.partitions == {TP0: E.NO_ERROR}
    assert fetched(h, "s") == {TP1: 2}
    done(h.coord.delete_offsets("s", [TP1]))
    assert (
        "s" not in h.coord.groups
    )  # an Empty group with no offsets is removed (tombstone written)
    key, value = h.topic.logs[h.coord.partition_for("s")][-1]
    assert rec.parse_key(key) == rec.GroupKey("s") and value is None


def test_delete_offsets_of_active_consumer_group(h: Harness) -> None:
    (a,) = h.stable_group(G, 1)  # subscribed to topic "t"
    commit(h, G, {TP0: 1, TopicPartition("other", 0): 5}, member_id=a.member_id, generation_id=1)
    r = done(h.coord.delete_offsets(G, [TP0, TopicPartition("other", 0)]))
    assert r.partitions == {
        TP0: E.GROUP_SUBSCRIBED_TO_TOPIC,
        TopicPartition("other", 0): E.NO_ERROR,
    }
    assert fetched(h, G) == {TP0: 1}


def test_delete_offsets_errors(h: Harness) -> None:
    assert done(h.coord.delete_offsets("nope", [TP0])).error == E.GROUP_ID_NOT_FOUND
    d = h.join("conn", protocol_type="connect", protocols=[("v1", b"")])
    h.advance(0)
    done(d)
    assert done(h.coord.delete_offsets("conn", [TP0])).error == E.NON_EMPTY_GROUP


# ---------------------------------------------------------------------------- delete groups


def test_delete_groups(h: Harness) -> None:
    commit(h, "empty", {TP0: 1})
    h.stable_group(G, 1)
    r = done(h.coord.delete_groups(["empty", G, "missing", "empty"]))
    assert r == {"empty": E.NO_ERROR, G: E.NON_EMPTY_GROUP, "missing": E.GROUP_ID_NOT_FOUND}
    assert "empty" not in h.coord.groups
    assert fetched(h, "empty") == {}
    log = h.topic.logs[h.coord.partition_for("empty")]
    assert (rec.offset_key("empty", "t", 0), None) in log and (rec.group_key("empty"), None) in log


def test_delete_group_answers_after_the_tombstones(h: Harness) -> None:
    commit(h, "empty", {TP0: 1})
    h.topic.mode = "hold"
    d = h.coord.delete_groups(["empty"])
    assert not d.done()
    assert h.coord.groups["empty"].state is S.DEAD
    assert done(h.join("empty")).error == E.COORDINATOR_NOT_AVAILABLE
    h.topic.release()
    assert done(d) == {"empty": E.NO_ERROR} and "empty" not in h.coord.groups


# ---------------------------------------------------------------------------- describe / list


def test_describe_groups(h: Harness) -> None:
    a, b = h.stable_group(G, 2)
    (desc, missing) = h.coord.describe_groups([G, "missing"])
    assert (desc.state, desc.protocol_type, desc.protocol_data) == ("Stable", "consumer", "range")
    assert [m.member_id for m in desc.members] == [a.member_id, b.member_id]
    assert desc.members[1].assignment == f"assign-{b.member_id}".encode()
    assert desc.members[1].metadata == subscription(["t"])
    assert (missing.error, missing.state, missing.members) == (E.NO_ERROR, "Dead", [])
    h.join(G)  # rebalancing: no protocol, no metadata or assignments
    desc = h.coord.describe_groups([G])[0]
    assert desc.state == "PreparingRebalance" and desc.protocol_data == ""
    assert all(m.assignment == b"" and m.metadata == b"" for m in desc.members)


def test_list_groups_with_state_filter(h: Harness) -> None:
    h.stable_group("g-stable", 1)
    commit(h, "g-simple", {TP0: 1})
    all_groups = h.coord.list_groups()
    assert [(o.group_id, o.protocol_type, o.state) for o in all_groups.groups] == [
        ("g-simple", "", "Empty"),
        ("g-stable", "consumer", "Stable"),
    ]
    assert [o.group_id for o in h.coord.list_groups(["stable"]).groups] == ["g-stable"]
    assert h.coord.list_groups(["Dead"]).groups == []
    assert h.coord.list_groups(types=["consumer"]).groups == []
    assert len(h.coord.list_groups(types=["Classic"]).groups) == 2


# ---------------------------------------------------------------------------- retention


def test_offset_expiry_through_tick(make_harness: Callable[..., Harness]) -> None:
    h = make_harness(offsets_retention_minutes=60, offsets_retention_check_interval_ms=60_000)
    commit(h, "solo", {TP0: 1})  # standalone: counts from the commit
    (a,) = h.stable_group(G, 1, session=60_000)  # subscribed to "t"
    commit(h, G, {TP0: 1, TopicPartition("gone", 0): 1}, member_id=a.member_id, generation_id=1)
    for _ in range(140):  # keep the member alive for 70 minutes
        h.advance(30_000)
        assert h.coord.heartbeat(G, a.member_id, 1) == E.NO_ERROR
    assert fetched(h, G) == {TP0: 1}  # the subscribed topic stays, the other expired
    assert "solo" not in h.coord.groups  # all its offsets expired and the empty group went too
    # once the group is Empty, even its subscribed topic's offset counts from then
    h.coord.leave_group(G, [LeavingMember(a.member_id)])
    assert h.coord.groups[G].state is S.EMPTY
    h.advance(59 * 60_000)
    assert fetched(h, G) == {TP0: 1}
    h.advance(2 * 60_000)
    assert G not in h.coord.groups


def test_next_deadline_reports_the_earliest_timer(h: Harness) -> None:
    (a,) = h.stable_group(G, 1)
    h.coord.tick()
    nd = h.coord.next_deadline()
    assert nd is not None and nd == h.coord.groups[G].get(a.member_id).heartbeat_deadline
