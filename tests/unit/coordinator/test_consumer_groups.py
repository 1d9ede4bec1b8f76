"""KIP-848 groups on the coordinator runtime, on a fake clock: the records as bytes rebuild the group
after a reload, sessions expire, offsets commit with the member epoch, and the classic/consumer
boundary (an empty group changes protocol; a live one refuses the other protocol)."""

from __future__ import annotations

import uuid

from coordinator_helpers import Harness

from kafkalite.coordinator.consumer_assignors import SubscribedTopic
from kafkalite.coordinator.consumer_group import (
    HeartbeatRequest,
    HeartbeatResult,
)
from kafkalite.coordinator.consumer_group_records import (
    parse_key,
    parse_record,
    to_coordinator_record,
)
from kafkalite.coordinator.consumer_group_types import (
    GroupEpochRecord,
)
from kafkalite.coordinator.types import OffsetCommitPartition
from kafkalite.protocol import primitives as p
from kafkalite.protocol.errors import ErrorCode

T = SubscribedTopic(uuid.UUID(int=7), "t", 4)
TOPICS = {"t": T}


def hb(
    h: Harness, mid: str, epoch: int, owned: dict[uuid.UUID, frozenset[int]] | None = None
) -> HeartbeatResult:
    first = epoch == 0
    req = HeartbeatRequest(
        mid,
        epoch,
        rebalance_timeout_ms=30000 if first else -1,
        subscribed_topic_names=("t",) if first else None,
        owned={} if first else owned,
        client_id="app",
    )
    return h.coord.consumer_group_heartbeat("g", req, TOPICS).result()


def settle(h: Harness) -> dict[str, HeartbeatResult]:
    last: dict[str, HeartbeatResult] = {}
    owned: dict[str, dict[uuid.UUID, frozenset[int]]] = {}
    epochs = {m: x.member_epoch for m, x in h.coord.groups["g"].consumer.members.items()}  # type: ignore[union-attr]
    for _ in range(4):
        for mid in sorted(epochs):
            r = hb(h, mid, epochs[mid], owned.get(mid, {}))
            assert r.error == ErrorCode.NO_ERROR, r
            epochs[mid] = r.member_epoch
            if r.assignment is not None:
                owned[mid] = r.assignment
            last[mid] = r
    return last


def test_records_round_trip_as_bytes_and_a_reload_rebuilds_the_group() -> None:
    h = Harness()
    assert hb(h, "a", 0).error == ErrorCode.NO_ERROR
    assert hb(h, "b", 0).error == ErrorCode.NO_ERROR
    settle(h)
    before = h.coord.groups["g"].consumer
    assert before is not None and before.state == "Stable"
    for log in h.topic.logs.values():
        for key, value in log:
            version, pos = p.read_int16(key, 0)
            parsed = parse_key(version, key, pos)
            record = parse_record(parsed, value)
            assert record is not None
            again = to_coordinator_record(record)
            assert (again.key, again.value) == (key, value)
    h.coord = h.new_coordinator()  # a new coordinator loads __consumer_offsets
    after = h.coord.groups["g"].consumer
    assert after is not None
    assert (after.group_epoch, after.assignment_epoch, after.target) == (
        before.group_epoch,
        before.assignment_epoch,
        before.target,
    )
    assert {m: (x.member_epoch, x.assigned) for m, x in after.members.items()} == {
        m: (x.member_epoch, x.assigned) for m, x in before.members.items()
    }


def test_a_silent_member_expires_and_its_partitions_move() -> None:
    h = Harness()
    hb(h, "a", 0)
    hb(h, "b", 0)
    last = settle(h)
    h.advance(20_000)  # both quiet for less than the 45 s session
    assert set(h.coord.groups["g"].consumer.members) == {"a", "b"}  # type: ignore[union-attr]
    for _ in range(6):  # a keeps heartbeating, b is gone
        h.advance(10_000)
        r = hb(h, "a", last["a"].member_epoch, last["a"].assignment)
        last["a"] = HeartbeatResult(
            r.error, None, "a", r.member_epoch, r.assignment or last["a"].assignment
        )
    cg = h.coord.groups["g"].consumer
    assert cg is not None and set(cg.members) == {"a"}
    assert last["a"].assignment == {T.topic_id: frozenset(range(4))}


def test_offsets_commit_with_the_member_epoch() -> None:
    h = Harness()
    r = hb(h, "a", 0)
    part = [OffsetCommitPartition("t", 0, 5)]
    ok = h.coord.commit_offsets("g", part, member_id="a", generation_id=r.member_epoch).result()
    assert set(ok.values()) == {ErrorCode.NO_ERROR}
    stale = h.coord.commit_offsets(
        "g", part, member_id="a", generation_id=r.member_epoch + 3
    ).result()
    assert set(stale.values()) == {ErrorCode.STALE_MEMBER_EPOCH}
    unknown = h.coord.commit_offsets("g", part, member_id="zz", generation_id=1).result()
    assert set(unknown.values()) == {ErrorCode.UNKNOWN_MEMBER_ID}
    anonymous = h.coord.commit_offsets("g", part).result()
    assert set(anonymous.values()) == {ErrorCode.UNKNOWN_MEMBER_ID}


def test_the_classic_and_consumer_protocols_meet_only_in_an_empty_group() -> None:
    h = Harness()
    r = hb(h, "a", 0)
    classic = h.join("g", protocols=[("range", b"")]).result()
    assert classic.error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert (
        h.coord.consumer_group_heartbeat("g", HeartbeatRequest("a", -1), TOPICS).result().error
        == ErrorCode.NO_ERROR
    )
    del r
    # empty now: a classic member turns it back into a classic group
    pending = h.join("g", protocols=[("range", b"")])
    h.advance(100)
    joined = pending.result()
    assert joined.error == ErrorCode.NO_ERROR
    assert h.coord.groups["g"].consumer is None
    # and a consumer heartbeat is refused while the classic group has members
    assert hb(h, "c", 0).error == ErrorCode.GROUP_ID_NOT_FOUND
    # the reload agrees: a classic group, not a consumer group
    h.coord = h.new_coordinator()
    assert h.coord.groups["g"].consumer is None


def test_unreadable_consumer_group_records_are_skipped_on_load() -> None:
    """Garbage in a consumer-group value (or an unknown member state) is a DecodeError the load
    skips with a warning; the rest of the partition still loads."""
    import pytest

    from kafkalite.coordinator.consumer_group_records import ConsumerGroupKey
    from kafkalite.protocol.exceptions import DecodeError

    for record_type in (3, 5, 6, 7, 8):
        key = ConsumerGroupKey(record_type, "g", "m")
        with pytest.raises(DecodeError):
            parse_record(key, b"\x00\x00\xff\xff")  # version 0, then a struct cut short
        with pytest.raises(DecodeError):
            parse_record(key, b"\x00\x07")  # a value version nobody wrote
    h = Harness()
    hb(h, "a", 0)
    partition = next(iter(h.topic.logs))
    bad_key = to_coordinator_record(GroupEpochRecord("g", 9)).key
    h.topic.logs[partition].append((bad_key, b"\x00\x00\x01"))
    h.coord = h.new_coordinator()
    cg = h.coord.groups["g"].consumer
    assert cg is not None and set(cg.members) == {"a"} and cg.group_epoch == 1


def static_hb(
    h: Harness,
    mid: str,
    epoch: int,
    instance: str,
    owned: dict[uuid.UUID, frozenset[int]] | None = None,
) -> HeartbeatResult:
    first = epoch == 0
    req = HeartbeatRequest(
        mid,
        epoch,
        instance_id=instance,
        rebalance_timeout_ms=30000 if first else -1,
        subscribed_topic_names=("t",) if first else None,
        owned={} if first else owned,
    )
    return h.coord.consumer_group_heartbeat("g", req, TOPICS).result()


def test_a_static_member_away_survives_a_reload_and_its_new_instance_takes_over() -> None:
    h = Harness()
    static_hb(h, "a", 0, "ia")
    static_hb(h, "b", 0, "ib")
    last = settle(h)
    cg = h.coord.groups["g"].consumer
    assert cg is not None
    epoch, b_parts = cg.group_epoch, last["b"].assignment
    assert static_hb(h, "b", last["b"].member_epoch, "ib").error == ErrorCode.NO_ERROR
    left = static_hb(h, "b", -2, "ib")
    assert (left.error, left.member_epoch) == (ErrorCode.NO_ERROR, -2)
    described = h.coord.describe_consumer_groups(["g"])[0]
    assert {(m.member_id, m.instance_id, m.member_epoch) for m in described.members} == {
        ("a", "ia", last["a"].member_epoch),
        ("b", "ib", -2),
    }
    h.coord = h.new_coordinator()  # the -2 member is in the log: a reload keeps it
    cg = h.coord.groups["g"].consumer
    assert cg is not None and cg.group_epoch == epoch
    assert (cg.members["b"].member_epoch, cg.members["b"].assigned) == (-2, b_parts)
    again = static_hb(h, "b2", 0, "ib")
    assert again.error == ErrorCode.NO_ERROR and again.assignment == b_parts
    cg = h.coord.groups["g"].consumer
    assert cg is not None and set(cg.members) == {"a", "b2"} and cg.group_epoch == epoch
    a = static_hb(h, "a", last["a"].member_epoch, "ia")
    assert a.error == ErrorCode.NO_ERROR and a.member_epoch == last["a"].member_epoch
    assert static_hb(h, "b", left.member_epoch, "ib").error == ErrorCode.FENCED_INSTANCE_ID


def test_a_static_member_that_does_not_return_expires_with_its_session() -> None:
    h = Harness()
    static_hb(h, "a", 0, "ia")
    static_hb(h, "b", 0, "ib")
    last = settle(h)
    assert static_hb(h, "b", -2, "ib").error == ErrorCode.NO_ERROR
    epoch = h.coord.groups["g"].consumer.group_epoch  # type: ignore[union-attr]
    owned = last["a"].assignment
    for _ in range(6):  # a keeps heartbeating for 60 s; b's 45 s session ends
        h.advance(10_000)
        r = static_hb(h, "a", last["a"].member_epoch, "ia", owned)
        assert r.error == ErrorCode.NO_ERROR
        last["a"] = r
        owned = r.assignment or owned
    cg = h.coord.groups["g"].consumer
    assert cg is not None and set(cg.members) == {"a"} and cg.group_epoch > epoch
    assert owned == {T.topic_id: frozenset(range(4))}
