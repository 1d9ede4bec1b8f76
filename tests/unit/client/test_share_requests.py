"""The share consumer's pure parts: acknowledgement batches, the ShareFetch a session sends (new,
acknowledged and forgotten partitions), ShareAcknowledge, and acquired records cut from a fetched blob.
"""

from __future__ import annotations

import uuid

from kafkalite.client.share_requests import (
    GAP,
    AcknowledgeType,
    ShareSession,
    ack_batches,
    acquired_records,
    share_acknowledge_request,
    share_fetch_request,
)
from kafkalite.client.structs import TopicPartition
from kafkalite.filters import compile_filter
from kafkalite.records.builder import build_batch

A, R, J = int(AcknowledgeType.ACCEPT), int(AcknowledgeType.RELEASE), int(AcknowledgeType.REJECT)
T1, T2 = uuid.uuid4(), uuid.uuid4()


def test_ack_batches_merge_consecutive_offsets_of_one_type() -> None:
    assert ack_batches({}) == []
    assert ack_batches({5: A, 3: A, 4: A, 6: R, 8: R, 9: J}) == [
        (3, 5, [A]),
        (6, 6, [R]),
        (8, 8, [R]),
        (9, 9, [J]),
    ]


def test_share_fetch_adds_new_and_acknowledged_partitions_and_forgets_the_rest() -> None:
    session = ShareSession(epoch=3, partitions={(T1, 0), (T1, 1)})
    req = share_fetch_request(
        "g", "m", session, {(T1, 0), (T2, 0)}, {(T1, 0): {7: A, 8: A}},
        max_wait_ms=100, max_records=10, min_bytes=1, max_bytes=1000,
    )  # fmt: skip
    assert req.share_session_epoch == 3 and req.max_records == 10 and req.max_wait_ms == 100
    sent = {
        (t.topic_id, p.partition_index): [
            (b.first_offset, b.last_offset, list(b.acknowledge_types))
            for b in p.acknowledgement_batches
        ]
        for t in req.topics
        for p in t.partitions
    }
    # (T1, 0) is in the session already: listed only for its acknowledgements
    assert sent == {(T1, 0): [(7, 8, [A])], (T2, 0): []}
    assert [(f.topic_id, list(f.partitions)) for f in req.forgotten_topics_data] == [(T1, [1])]


def test_share_fetch_that_only_acknowledges_neither_waits_nor_acquires() -> None:
    req = share_fetch_request(
        "g", "m", ShareSession(epoch=1, partitions={(T1, 0)}), set(), {(T1, 0): {1: R}},
        max_wait_ms=500, max_records=10, min_bytes=1, max_bytes=1000,
    )  # fmt: skip
    assert req.max_wait_ms == 0 and req.max_records == 0


def test_share_acknowledge_request() -> None:
    req = share_acknowledge_request("g", "m", -1, {(T2, 3): {0: J, 1: A}})
    assert req.share_session_epoch == -1
    [t] = req.topics
    [p] = t.partitions
    assert t.topic_id == T2 and p.partition_index == 3
    assert [(b.first_offset, b.last_offset, list(b.acknowledge_types))
            for b in p.acknowledgement_batches] == [(0, 0, [J]), (1, 1, [A])]  # fmt: skip


def test_acquired_records_keep_only_acquired_offsets_and_report_gaps() -> None:
    blob = build_batch([(b"k0", b"v0"), (b"k1", b"v1"), (b"k2", b"v2")], base_offset=10)
    blob += build_batch([(b"x", b"y")], base_offset=13, is_control=True)
    recs, gaps = acquired_records(
        TopicPartition("t", 0), blob, [(11, 13, 2)], None, lambda _t, v: v.decode(), True
    )
    assert [(r.offset, r.key, r.value, r.delivery_count) for r in recs] == [
        (11, b"k1", "v1", 2),
        (12, b"k2", "v2", 2),
    ]
    assert gaps == [13]  # the control record: acquired, acknowledged as GAP, never delivered
    assert GAP == 0
    assert acquired_records(TopicPartition("t", 0), blob, [], None, None, False) == ([], [])


def test_the_local_filter_leaves_out_what_it_does_not_select_and_archives_it_as_gap() -> None:
    """Against a broker that did not filter: the non-matching acquired records are GAP, as the
    broker's own archive would make them, and the filter travels in the ShareFetch's tag."""
    blob = build_batch([(b"user-1", b"a"), (b"user-2", b"b"), (b"user-1", b"c")], base_offset=0)
    flt = compile_filter("key = 'user-1'")
    recs, gaps = acquired_records(TopicPartition("t", 0), blob, [(0, 2, 1)], None, None, True, flt)
    assert [(r.offset, r.value) for r in recs] == [(0, b"a"), (2, b"c")]
    assert gaps == [1]
    req = share_fetch_request(
        "g", "m", ShareSession(), set(), {}, max_wait_ms=0, max_records=1, min_bytes=1,
        max_bytes=1, filter=flt.expression,
    )  # fmt: skip
    assert req.filter == "key = 'user-1'"
