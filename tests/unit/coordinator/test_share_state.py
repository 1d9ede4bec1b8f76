"""The share coordinator's state: `__share_group_state` records laid out as Kafka's ShareSnapshot/ShareUpdate
v0, placement by Kafka's key hash, fencing, Kafka's batch combination, tombstones and replay == live state.
"""

from __future__ import annotations

import itertools
import struct
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.coordinator.records import java_string_hash, kafka_abs
from kafkalite.coordinator.share_records import (
    PersisterStateBatch,
    SharePartitionKey,
    ShareSnapshot,
    ShareUpdate,
    ShareUpdateKey,
    combine_state_batches,
    kafka_uuid_str,
    parse_key,
    parse_value,
    share_snapshot_key,
    share_update_key,
    share_update_value,
    snapshot_record,
)
from kafkalite.coordinator.share_state import ShareStateManager, ShareStateResult
from kafkalite.coordinator.types import CoordinatorRecord
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.exceptions import DecodeError

E = ErrorCode
B = PersisterStateBatch
TOPIC = uuid.UUID("2f6e1c4a-9d3b-4e8f-a1c2-3b4d5e6f7a8b")
NPART = 3


def key(partition: int = 0, group: str = "g1") -> SharePartitionKey:
    return SharePartitionKey(group, TOPIC, partition)


class Coordinator:
    """A manager leading every partition, that commits what operations return (and keeps the log)."""

    def __init__(self) -> None:
        self.m = ShareStateManager(NPART)
        self.log: dict[int, list[CoordinatorRecord]] = {}
        for p in range(NPART):
            self.m.begin_loading(p, 0)
            self.m.finish_loading(p)

    def commit(self, outcome: tuple[list[CoordinatorRecord], ShareStateResult]) -> ShareStateResult:
        records, result = outcome
        for r in records:
            p = self.m.partition_for(r.parsed_key)
            self.m.apply(p, r)
            self.log.setdefault(p, []).append(r)
        return result


# ---------------------------------------------------------------------------- records and placement


def test_snapshot_key_and_value_bytes_are_kafkas() -> None:
    k = SharePartitionKey("grp", TOPIC, 7)
    snap = ShareSnapshot(3, 2, 5, 100, (B(100, 109, 0, 1), B(110, 110, 2, 1)))
    rec = snapshot_record(k, snap)
    # key: int16 record type 0, ShareSnapshotKey v0 (not flexible): string, uuid, int32
    assert rec.key == struct.pack(">hh", 0, 3) + b"grp" + TOPIC.bytes + struct.pack(">i", 7)
    # value: int16 version 0, then flexible v0: uint16, int32, int32, int64, compact array, tags
    batches = b"".join(
        struct.pack(">qqbh", b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
        + b"\x00"
        for b in snap.state_batches
    )
    assert rec.value == struct.pack(">hHiiq", 0, 3, 2, 5, 100) + b"\x03" + batches + b"\x00"
    assert parse_key(rec.key) == (0, k)
    assert rec.value is not None and parse_value(0, rec.value) == snap


def test_update_records_parse() -> None:
    k = SharePartitionKey("grp", TOPIC, 1)
    raw_key = struct.pack(">h", 1) + ShareUpdateKey(
        group_id="grp", topic_id=TOPIC, partition=1
    ).encode(1)
    update = ShareUpdate(0, 4, -1, (B(5, 6, 2, 1),))
    assert parse_key(raw_key) == (1, k)
    assert parse_value(1, share_update_value(update)) == update


@pytest.mark.parametrize(
    "bad",
    [b"", b"\x00", struct.pack(">h", 2) + b"\x00\x01g" + bytes(20), share_snapshot_key(key())[:-1]],
)
def test_malformed_keys_are_decode_errors(bad: bytes) -> None:
    with pytest.raises(DecodeError):
        parse_key(bad)


def test_coordinator_key_and_placement_follow_kafka() -> None:
    assert kafka_uuid_str(uuid.UUID(int=1)) == "AAAAAAAAAAAAAAAAAAAAAQ"
    k = SharePartitionKey("group", uuid.UUID(int=1), 4)
    assert k.coordinator_key() == "group:AAAAAAAAAAAAAAAAAAAAAQ:4"
    m = ShareStateManager(50)
    assert m.partition_for(k) == kafka_abs(java_string_hash(k.coordinator_key())) % 50


# ---------------------------------------------------------------------------- ownership


def test_keys_of_partitions_not_led_or_loading() -> None:
    m = ShareStateManager(NPART)
    records, result = m.read(key(), 0)
    assert (records, result.error) == ([], E.NOT_COORDINATOR)
    p = m.partition_for(key())
    m.begin_loading(p, 3)
    assert m.write(key(), 0, 0, 0, ())[1].error == E.COORDINATOR_LOAD_IN_PROGRESS
    m.finish_loading(p)
    assert m.read(key(), 0)[1].error == E.NO_ERROR
    m.unload(p)
    assert m.initialize(key(), 0, 0)[1].error == E.NOT_COORDINATOR


def test_invalid_keys() -> None:
    c = Coordinator()
    assert c.m.read(SharePartitionKey("", TOPIC, 0), 0)[1].error == E.INVALID_REQUEST
    assert c.m.write(SharePartitionKey("g", TOPIC, -1), 0, 0, 0, ())[1].error == E.INVALID_REQUEST


# ---------------------------------------------------------------------------- operations


def test_uninitialized_reads_as_kafka_answers() -> None:
    c = Coordinator()
    records, result = c.m.read(key(), 0)
    assert records == []
    assert result == ShareStateResult(E.NO_ERROR, None, 0, -1, ())
    assert c.m.read_summary(key(), 0)[1] == ShareStateResult(E.NO_ERROR, None, 0, -1)
    assert c.m.delete(key()) == ([], ShareStateResult(E.NO_ERROR))


def test_initialize_write_read() -> None:
    c = Coordinator()
    assert c.commit(c.m.initialize(key(), 1, 10)).error == E.NO_ERROR
    assert c.m.read(key(), 0)[1] == ShareStateResult(E.NO_ERROR, None, 1, 10, ())
    batches = (B(10, 14, 2, 1), B(15, 19, 0, 1))
    assert c.commit(c.m.write(key(), 1, 0, 10, batches)).error == E.NO_ERROR
    assert c.m.read(key(), 0)[1].batches == batches
    assert c.m.read_summary(key(), 0)[1] == ShareStateResult(E.NO_ERROR, None, 1, 10)
    snap = c.m.state(key())
    # initialize wrote snapshot 0; the write is a ShareUpdate against it
    assert snap is not None and snap.snapshot_epoch == 0
    log = c.log[c.m.partition_for(key())]
    assert [parse_key(r.key)[0] for r in log] == [0, 1]


def test_write_is_fenced_by_state_epoch() -> None:
    c = Coordinator()
    c.commit(c.m.initialize(key(), 5, 0))
    records, result = c.m.write(key(), 4, 0, 0, (B(0, 1, 2, 1),))
    assert (records, result.error) == ([], E.FENCED_STATE_EPOCH)
    assert c.m.initialize(key(), 4, 0)[1].error == E.FENCED_STATE_EPOCH
    assert c.commit(c.m.write(key(), 5, 0, 0, ())).error == E.NO_ERROR
    assert c.commit(c.m.write(key(), 6, 0, 0, ())).error == E.NO_ERROR
    assert c.m.read_summary(key(), 0)[1].state_epoch == 6


def test_write_is_fenced_by_leader_epoch_and_reads_raise_it() -> None:
    c = Coordinator()
    c.commit(c.m.write(key(), 0, 3, 0, (B(0, 4, 0, 1),)))
    assert c.m.write(key(), 0, 2, 0, ())[1].error == E.FENCED_LEADER_EPOCH
    assert c.m.read(key(), 2)[1].error == E.FENCED_LEADER_EPOCH
    # a new leader (epoch 4) reads: the old one (3) may no longer write
    assert c.m.read(key(), 4)[1].error == E.NO_ERROR
    assert c.m.write(key(), 0, 3, 0, ())[1].error == E.FENCED_LEADER_EPOCH
    assert c.commit(c.m.write(key(), 0, 4, 0, ())).error == E.NO_ERROR


def test_write_merges_offset_by_offset_and_cuts_at_the_start_offset() -> None:
    c = Coordinator()
    c.commit(c.m.write(key(), 0, 0, 0, (B(0, 9, 0, 1), B(10, 19, 0, 1))))
    assert c.m.state(key()).state_batches == (B(0, 19, 0, 1),)  # type: ignore[union-attr]
    # 5-7 acknowledged: the stored run is split around them
    c.commit(c.m.write(key(), 0, 0, -1, (B(5, 7, 2, 1),)))
    snap = c.m.state(key())
    assert snap is not None and snap.start_offset == 0  # -1: unchanged
    assert snap.state_batches == (B(0, 4, 0, 1), B(5, 7, 2, 1), B(8, 19, 0, 1))
    # start offset 6: everything below goes, the batch straddling it is cut
    c.commit(c.m.write(key(), 0, 0, 6, (B(12, 13, 0, 2),)))
    snap = c.m.state(key())
    assert snap is not None and snap.start_offset == 6
    assert snap.state_batches == (B(6, 7, 2, 1), B(8, 11, 0, 1), B(12, 13, 0, 2), B(14, 19, 0, 1))
    # epochs are checked before -1 can mean "unchanged" (as in Kafka): -1 is older than 0
    assert c.m.write(key(), 0, -1, -1, ())[1].error == E.FENCED_LEADER_EPOCH
    assert c.m.write(key(), -1, 0, -1, ())[1].error == E.FENCED_STATE_EPOCH
    # with no leader epoch recorded yet (only initialized), -1 keeps it
    fresh = key(1)
    c.commit(c.m.initialize(fresh, 2, 0))
    assert c.commit(c.m.write(fresh, 2, -1, -1, (B(0, 0, 2, 1),))).error == E.NO_ERROR
    assert c.m.state(fresh) == ShareSnapshot(0, 2, -1, 0, (B(0, 0, 2, 1),))


def test_delete_writes_a_tombstone() -> None:
    c = Coordinator()
    c.commit(c.m.write(key(), 2, 1, 5, (B(5, 6, 0, 1),)))
    records, result = c.m.delete(key())
    assert result.error == E.NO_ERROR
    # both keys: a ShareUpdate left alone by compaction must not bring the state back
    assert [(r.key, r.value) for r in records] == [
        (share_snapshot_key(key()), None),
        (share_update_key(key()), None),
    ]
    c.commit((records, result))
    assert c.m.read(key(), 0)[1] == ShareStateResult(E.NO_ERROR)
    # the fences went with the state
    assert c.commit(c.m.write(key(), 0, 0, 0, ())).error == E.NO_ERROR


def test_writes_are_deltas_against_the_last_snapshot_with_a_snapshot_every_n() -> None:
    c = Coordinator()
    c.m.updates_per_snapshot = 2
    k = key()
    log = c.log.setdefault(c.m.partition_for(k), [])
    c.commit(c.m.initialize(k, 1, 0))
    c.commit(c.m.write(k, 1, 0, 0, (B(0, 9, 0, 1), B(10, 19, 0, 1))))
    c.commit(c.m.write(k, 1, 0, 5, (B(5, 7, 2, 1),)))
    kinds = [parse_key(r.key)[0] for r in log]
    assert kinds == [0, 1, 1]
    # an update holds what differs from the last snapshot (initialize's, empty) at its start
    last = parse_value(1, log[-1].value or b"")
    assert isinstance(last, ShareUpdate) and last.start_offset == 5
    assert last.state_batches == (B(5, 7, 2, 1), B(8, 19, 0, 1))
    c.commit(c.m.write(k, 1, 0, 8, ()))  # the third write: two updates since the snapshot
    assert parse_key(log[-1].key)[0] == 0
    snap = c.m.state(k)
    assert snap is not None and snap.snapshot_epoch == 1
    assert snap.state_batches == (B(8, 19, 0, 1),)
    c.commit(c.m.write(k, 1, 0, 9, (B(12, 12, 2, 1),)))
    last = parse_value(1, log[-1].value or b"")
    assert isinstance(last, ShareUpdate) and last.snapshot_epoch == 1
    assert last.state_batches == (B(9, 11, 0, 1), B(12, 12, 2, 1), B(13, 19, 0, 1))
    # a new state epoch (an offsets reset) and a start offset moved back are snapshots
    c.commit(c.m.write(k, 2, 0, 9, ()))
    assert parse_key(log[-1].key)[0] == 0
    c.commit(c.m.write(k, 2, 0, 10, ()))
    assert parse_key(log[-1].key)[0] == 1
    c.commit(c.m.write(k, 2, 0, 3, (B(3, 3, 2, 1),)))
    assert parse_key(log[-1].key)[0] == 0


_batch = st.builds(
    lambda first, size, state, count: B(first, first + size, state, count),
    st.integers(0, 40),
    st.integers(0, 6),
    st.sampled_from([0, 2, 4]),
    st.integers(1, 4),
)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.lists(_batch, max_size=4), st.integers(0, 3), st.booleans()),
        min_size=1,
        max_size=25,
    ),
    st.integers(0, 4),
)
def test_the_last_snapshot_and_the_last_update_rebuild_the_state(
    writes: list[tuple[list[PersisterStateBatch], int, bool]], per_snapshot: int
) -> None:
    """Replay gives the live state from the whole log, and from what compaction leaves of it (the
    last record of each key) too: an update is taken against the last snapshot."""
    c = Coordinator()
    c.m.updates_per_snapshot = per_snapshot
    k = key()
    start = 0
    c.commit(c.m.initialize(k, 0, 0))
    for batches, advance, keep in writes:
        start += advance
        c.commit(c.m.write(k, 0, 0, -1 if keep else start, tuple(batches)))
    p = c.m.partition_for(k)
    assert _reload(c).states[p] == c.m.states[p]
    log = c.log[p]
    last_of = {r.key: i for i, r in enumerate(log)}
    compacted = ShareStateManager(NPART)
    compacted.begin_loading(p, 1)
    for i, r in enumerate(log):
        if last_of[r.key] == i:
            compacted.replay(p, r.key, r.value)
    compacted.finish_loading(p)
    assert compacted.states[p] == c.m.states[p]


# ---------------------------------------------------------------------------- replay


def _reload(c: Coordinator) -> ShareStateManager:
    m = ShareStateManager(NPART)
    for p in range(NPART):
        m.begin_loading(p, 1)
        for r in c.log.get(p, []):
            m.replay(p, r.key, r.value)
        m.finish_loading(p)
    return m


def test_replay_rebuilds_the_live_state() -> None:
    c = Coordinator()
    for i, g in enumerate(["a", "b", "c", "d"]):
        for part in range(3):
            k = key(part, g)
            c.commit(c.m.initialize(k, 1, 0))
            c.commit(c.m.write(k, 1, i, 0, (B(0, 9, 0, 1),)))
            c.commit(c.m.write(k, 1, i, 3, (B(4, 5, 2, 1), B(9, 12, 0, 2))))
    c.commit(c.m.delete(key(1, "b")))
    reloaded = _reload(c)
    assert reloaded.states == c.m.states
    assert reloaded.leader_epochs == c.m.leader_epochs
    assert reloaded.read(key(1, "b"), 0)[1] == ShareStateResult(E.NO_ERROR)


def test_replay_skips_unreadable_records_and_applies_kafkas_updates() -> None:
    m = ShareStateManager(NPART)
    k = key()
    p = m.partition_for(k)
    m.begin_loading(p, 0)
    m.replay(p, b"\x00\x09junk", b"x")
    m.replay(p, None, b"x")
    snap = snapshot_record(k, ShareSnapshot(0, 2, 1, 0, (B(0, 9, 0, 1),)))
    m.replay(p, snap.key, snap.value)
    upd_key = struct.pack(">h", 1) + ShareUpdateKey(
        group_id=k.group_id, topic_id=TOPIC, partition=0
    ).encode(1)
    m.replay(p, upd_key, share_update_value(ShareUpdate(0, 3, 2, (B(2, 3, 2, 1),))))
    m.finish_loading(p)
    assert m.state(k) == ShareSnapshot(0, 2, 3, 2, (B(2, 3, 2, 1), B(4, 9, 0, 1)))


# ---------------------------------------------------------------------------- combining batches


def _model(batches: list[PersisterStateBatch], start: int) -> tuple[PersisterStateBatch, ...]:
    """Offset by offset: the covering batch of highest (count, state) wins; equal runs are joined."""
    best: dict[int, tuple[int, int]] = {}
    for b in batches:
        for o in range(b.first_offset, b.last_offset + 1):
            if start != -1 and o < start:
                continue
            info = (b.delivery_count, b.delivery_state)
            if o not in best or info > best[o]:
                best[o] = info
    out: list[PersisterStateBatch] = []
    for o in sorted(best):
        count, state = best[o]
        if (
            out
            and out[-1].last_offset == o - 1
            and (out[-1].delivery_count, out[-1].delivery_state) == (count, state)
        ):
            out[-1] = B(out[-1].first_offset, o, state, count)
        else:
            out.append(B(o, o, state, count))
    return tuple(out)


_batch = st.builds(
    lambda first, length, state, count: B(first, first + length, state, count),
    st.integers(0, 40),
    st.integers(0, 10),
    st.sampled_from([0, 2, 4]),
    st.integers(0, 3),
)


@settings(max_examples=300, deadline=None)
@given(
    so_far=st.lists(_batch, max_size=6),
    new=st.lists(_batch, max_size=6),
    start=st.one_of(st.just(-1), st.integers(0, 45)),
)
def test_combine_matches_the_offset_by_offset_model(
    so_far: list[PersisterStateBatch], new: list[PersisterStateBatch], start: int
) -> None:
    got = combine_state_batches(so_far, new, start)
    assert got == _model(so_far + new, start)
    for a, b in itertools.pairwise(got):
        assert a.last_offset < b.first_offset


def test_combine_kafka_examples() -> None:
    # a newer delivery (higher count) overlays the older one; a contiguous equal run is joined
    assert combine_state_batches([B(100, 110, 0, 1)], [B(105, 107, 0, 2)], -1) == (
        B(100, 104, 0, 1),
        B(105, 107, 0, 2),
        B(108, 110, 0, 1),
    )
    assert combine_state_batches([B(100, 104, 2, 1)], [B(105, 110, 2, 1)], -1) == (
        B(100, 110, 2, 1),
    )
    assert combine_state_batches([B(100, 110, 0, 1)], [], 120) == ()
