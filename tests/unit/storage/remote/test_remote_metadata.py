"""Remote log metadata: the state table, the records' round trip, and the cache rebuilt by replay."""

from __future__ import annotations

import uuid

import pytest

from kafkalite.storage.remote.metadata import (
    InvalidStateTransition,
    RemoteLogMetadataCache,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    RemoteLogSegmentUpdate,
    RemoteLogStartOffsetUpdate,
    check_transition,
    decode_event,
    encode_event,
)

S = RemoteLogSegmentState
TID = uuid.UUID(int=7)


def seg(start: int, end: int, size: int = 100, ts: int = 1000) -> RemoteLogSegmentMetadata:
    return RemoteLogSegmentMetadata(
        TID, "t", 0, uuid.uuid4(), start, end, ts, 1, 5, ((0, start),), size
    )


def upd(m: RemoteLogSegmentMetadata, state: RemoteLogSegmentState) -> RemoteLogSegmentUpdate:
    return RemoteLogSegmentUpdate(TID, "t", 0, m.segment_id, state, 6, 1)


def test_state_table_allows_kafkas_transitions_only() -> None:
    check_transition(None, S.COPY_SEGMENT_STARTED)
    check_transition(S.COPY_SEGMENT_STARTED, S.COPY_SEGMENT_FINISHED)
    check_transition(S.COPY_SEGMENT_STARTED, S.DELETE_SEGMENT_STARTED)  # a dead leader's copy
    check_transition(S.COPY_SEGMENT_FINISHED, S.DELETE_SEGMENT_STARTED)
    check_transition(S.DELETE_SEGMENT_STARTED, S.DELETE_SEGMENT_FINISHED)
    for prev, new in [
        (None, S.COPY_SEGMENT_FINISHED),
        (S.COPY_SEGMENT_FINISHED, S.COPY_SEGMENT_STARTED),
        (S.COPY_SEGMENT_FINISHED, S.DELETE_SEGMENT_FINISHED),
        (S.DELETE_SEGMENT_STARTED, S.COPY_SEGMENT_FINISHED),
    ]:
        with pytest.raises(InvalidStateTransition):
            check_transition(prev, new)


def test_records_round_trip() -> None:
    m = seg(10, 19)
    for event in (m, upd(m, S.COPY_SEGMENT_FINISHED)):
        key, value = encode_event(event)
        assert key == f"{TID}:0".encode()
        assert value[0] == (0 if event is m else 1)
        assert decode_event(value) == event
    with pytest.raises(ValueError):
        decode_event(b"\x07\x00{}")


def test_cache_answers_only_from_finished_copies_and_replay_rebuilds_it() -> None:
    a, b, c = seg(0, 9, 100), seg(10, 19, 200), seg(20, 29, 300)
    events = [a, upd(a, S.COPY_SEGMENT_FINISHED), b, upd(b, S.COPY_SEGMENT_FINISHED), c]
    cache = RemoteLogMetadataCache()
    for e in events:
        cache.apply(e)
    assert cache.highest_copied_offset("t", 0) == 19  # c is only STARTED
    assert cache.log_start_offset("t", 0) == 0
    assert cache.size_in_bytes("t", 0) == 300
    assert cache.segment_for_offset("t", 0, 12) == cache.copied_segments("t", 0)[1]
    assert cache.segment_for_offset("t", 0, 25) is None
    # a's deletion: gone once finished
    cache.apply(upd(a, S.DELETE_SEGMENT_STARTED))
    assert cache.log_start_offset("t", 0) == 10
    assert cache.apply(upd(a, S.DELETE_SEGMENT_FINISHED)) is None
    assert [m.start_offset for m in cache.segments("t", 0)] == [10, 20]
    # a replay of the same records (decoded) gives the same state; a stray one is skipped
    replayed = RemoteLogMetadataCache()
    stray = upd(seg(90, 99), S.COPY_SEGMENT_FINISHED)
    for e in [*events, upd(a, S.DELETE_SEGMENT_STARTED), upd(a, S.DELETE_SEGMENT_FINISHED), stray]:
        replayed.replay(decode_event(encode_event(e)[1]))
    assert replayed.segments("t", 0) == cache.segments("t", 0)
    with pytest.raises(InvalidStateTransition):
        cache.apply(stray)


def test_delete_records_cut_moves_the_remote_log_start_forward_only() -> None:
    cache = RemoteLogMetadataCache()
    a, b, c = seg(0, 9), seg(10, 19), seg(20, 29)
    for m in (a, b, c):
        cache.apply(m)
        cache.apply(upd(m, S.COPY_SEGMENT_FINISHED))
    cut = RemoteLogStartOffsetUpdate(TID, "t", 0, 13, 7, 1)
    assert decode_event(encode_event(cut)[1]) == cut
    cache.apply(cut)
    assert cache.log_start_offset("t", 0) == 13
    assert [m.start_offset for m in cache.below_log_start("t", 0)] == [0]
    assert cache.segment_for_offset("t", 0, 2) is not None
    assert cache.segment_for_offset("t", 0, 2).start_offset == 10  # type: ignore[union-attr]
    cache.apply(RemoteLogStartOffsetUpdate(TID, "t", 0, 5, 8, 1))  # never backwards
    assert cache.log_start_offset("t", 0) == 13
    cache.apply(RemoteLogStartOffsetUpdate(TID, "t", 0, 30, 9, 1))  # past every remote segment
    assert cache.log_start_offset("t", 0) is None
    assert len(cache.below_log_start("t", 0)) == 3
