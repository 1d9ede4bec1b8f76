"""The hand-written Produce codecs agree byte for byte with the schema declarations at every version."""

from __future__ import annotations

import pytest

from kafkalite.broker.apis.data.produce import _PartResp, _Response, _TopicResp, encode_response
from kafkalite.broker.fastpath import decode_produce
from kafkalite.protocol.exceptions import DecodeError
from kafkalite.protocol.schema import APIS
from kafkalite.records.batch import build_batch

P = APIS[0].request
R = APIS[0].response


def request(tid: str | None = None) -> object:
    return P(
        transactional_id=tid,
        acks=-1,
        timeout_ms=1234,
        topic_data=[
            P.TopicProduceData(
                name="a",
                partition_data=[
                    P.TopicProduceData.PartitionProduceData(
                        index=0, records=build_batch([(b"k", b"v")])
                    ),
                    P.TopicProduceData.PartitionProduceData(index=3, records=None),
                ],
            ),
            P.TopicProduceData(
                name="b" * 300,
                partition_data=[P.TopicProduceData.PartitionProduceData(index=1, records=b"")],
            ),
        ],
    )


@pytest.mark.parametrize("version", range(3, 12))
@pytest.mark.parametrize("tid", [None, "txn-1"])
def test_decode_matches_schema(version, tid):
    raw = request(tid).encode(version)
    fast = decode_produce(raw, 0, version)
    slow = P.decode(raw, version)
    assert (fast.transactional_id, fast.acks, fast.timeout_ms) == (
        slow.transactional_id,
        slow.acks,
        slow.timeout_ms,
    )
    assert [
        (t.name, [(p.index, p.records) for p in t.partition_data]) for t in fast.topic_data
    ] == [(t.name, [(p.index, p.records) for p in t.partition_data]) for t in slow.topic_data]


@pytest.mark.parametrize("version", [3, 9, 11])
def test_decode_rejects_truncation(version):
    raw = request().encode(version)
    for cut in (1, 7, len(raw) // 2, len(raw) - 3):
        with pytest.raises(DecodeError):
            decode_produce(raw[:cut], 0, version)


def light_response(with_errors: bool) -> _Response:
    p1 = _PartResp(0)
    p1.base_offset, p1.log_append_time_ms, p1.log_start_offset = 42, 1_700_000_000_000, 7
    p2 = _PartResp(5)
    p2.error_code = 3
    if with_errors:
        p2.error_code = 87
        p2.error_message = "bad"
        p2.record_errors = [(0, "bad batch")]
    return _Response([_TopicResp("topic-x", [p1, p2]), _TopicResp("y", [])])


@pytest.mark.parametrize("version", range(0, 12))
@pytest.mark.parametrize("with_errors", [False, True])
def test_encode_matches_schema(version, with_errors):
    resp = light_response(with_errors)
    fast = bytearray()
    encode_response(fast, resp, version)
    slow = resp.to_schema()
    if version < 8:
        for t in slow.responses:
            for p in t.partition_responses:
                p.record_errors, p.error_message = [], None
    assert bytes(fast) == slow.encode(version)
    decoded = R.decode(bytes(fast), version)
    assert decoded.responses[0].partition_responses[0].base_offset == 42


F = APIS[1].request


def fetch_request(version: int) -> object:
    import uuid

    tid = uuid.UUID("12345678-1234-5678-1234-567812345678")
    return F(
        replica_id=-1,
        max_wait_ms=500,
        min_bytes=7,
        max_bytes=1 << 20,
        isolation_level=1,
        session_id=0,
        session_epoch=-1,
        topics=[
            F.FetchTopic(
                topic="" if version >= 13 else "topic-a",
                topic_id=tid,
                partitions=[
                    F.FetchTopic.FetchPartition(
                        partition=p,
                        fetch_offset=100 + p,
                        partition_max_bytes=4096,
                        current_leader_epoch=3 if version >= 9 else -1,
                        log_start_offset=1 if version >= 5 else -1,
                        last_fetched_epoch=2 if version >= 12 else -1,
                    )
                    for p in range(3)
                ],
            )
        ],
        forgotten_topics_data=[
            F.ForgottenTopic(topic="" if version >= 13 else "old", topic_id=tid, partitions=[1, 2])
        ]
        if version >= 7
        else [],
        rack_id="rack-1" if version >= 11 else "",
    )


@pytest.mark.parametrize("version", range(4, 17))
def test_fetch_decode_matches_schema(version):
    from kafkalite.broker.fastpath import decode_fetch

    raw = fetch_request(version).encode(version)
    fast = decode_fetch(raw, 0, version)
    slow = F.decode(raw, version)
    assert (fast.max_wait_ms, fast.min_bytes, fast.max_bytes, fast.session_id) == (
        slow.max_wait_ms,
        slow.min_bytes,
        slow.max_bytes,
        slow.session_id,
    )
    for ft, st in zip(fast.topics, slow.topics, strict=True):
        if version >= 13:
            assert ft.topic_id == st.topic_id
        else:
            assert ft.topic == st.topic
        assert [(p.partition, p.fetch_offset, p.partition_max_bytes) for p in ft.partitions] == [
            (p.partition, p.fetch_offset, p.partition_max_bytes) for p in st.partitions
        ]
        assert [p.log_start_offset for p in ft.partitions] == [
            p.log_start_offset if version >= 5 else -1 for p in st.partitions
        ]
    for ff, sf in zip(fast.forgotten_topics_data, slow.forgotten_topics_data, strict=True):
        assert (ff.topic_id if version >= 13 else ff.topic) == (
            sf.topic_id if version >= 13 else sf.topic
        )
        assert ff.partitions == sf.partitions
    assert len(fast.forgotten_topics_data) == (1 if version >= 7 else 0)
    assert fast.rack_id == slow.rack_id == ("rack-1" if version >= 11 else "")
    with pytest.raises(DecodeError):
        decode_fetch(raw[: len(raw) // 2], 0, version)


@pytest.mark.parametrize("version", range(0, 17))
def test_fetch_encode_matches_schema(version):
    import uuid

    from kafkalite.broker.apis.data.fetch import encode_response, to_schema
    from kafkalite.broker.fastpath import FetchPartitionResult, FetchResult, FetchTopicResult

    p1 = FetchPartitionResult(0, 0)
    p1.high_watermark, p1.last_stable_offset, p1.log_start_offset = 10, 10, 2
    p1.records = build_batch([(b"k", b"v")])
    if version >= 4:  # read_committed: the aborted transactions of the range
        p1.aborted_transactions = [(5, 0), (7, 3)]
    p2 = FetchPartitionResult(1, 1)
    p2.records = None if version >= 4 else b""
    if version >= 11:  # KIP-392: the leader names a replica to read from instead
        p2.preferred_read_replica = 3
    res = FetchResult([FetchTopicResult("topic-a", uuid.uuid4(), [p1, p2])])
    fast = bytearray()
    encode_response(fast, res, version)
    slow = to_schema(res)
    if version < 5:
        for t in slow.responses:
            for p in t.partitions:
                p.log_start_offset = -1
        p1.log_start_offset = -1
        fast = bytearray()
        encode_response(fast, res, version)
    if version < 4:
        for t in slow.responses:
            for p in t.partitions:
                p.last_stable_offset = -1
        p1.last_stable_offset = -1
        fast = bytearray()
        encode_response(fast, res, version)
    assert bytes(fast) == slow.encode(version)
