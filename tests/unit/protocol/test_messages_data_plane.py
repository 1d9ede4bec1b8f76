"""Byte-level checks of the data-plane declarations: Produce, Fetch, Metadata and the offset APIs.

Each expected frame body is assembled by hand from the protocol's layout rules; the systematic
round-trip and kafka-python oracle suites live elsewhere.
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

import pytest

from kafkalite.protocol.exceptions import EncodeError
from kafkalite.protocol.messages.fetch import FetchRequest, FetchResponse
from kafkalite.protocol.messages.metadata import MetadataRequest, MetadataResponse
from kafkalite.protocol.messages.offsets import (
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)
from kafkalite.protocol.messages.produce import ProduceRequest, ProduceResponse
from kafkalite.protocol.schema import APIS

# ---------------------------------------------------------------------------
# hand-written wire builders


def i8(v: int) -> bytes:
    return struct.pack(">b", v)


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def boolean(v: bool) -> bytes:
    return b"\x01" if v else b"\x00"


def uv(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def s(x: str | None) -> bytes:
    if x is None:
        return i16(-1)
    data = x.encode()
    return i16(len(data)) + data


def cs(x: str | None) -> bytes:
    if x is None:
        return uv(0)
    data = x.encode()
    return uv(len(data) + 1) + data


def by(x: bytes | None) -> bytes:
    return i32(-1) if x is None else i32(len(x)) + x


def cby(x: bytes | None) -> bytes:
    return uv(0) if x is None else uv(len(x) + 1) + x


def arr(n: int) -> bytes:
    return i32(n)


def carr(n: int) -> bytes:
    return uv(n + 1)


def cat(*parts: bytes) -> bytes:
    return b"".join(parts)


def tags(*pairs: tuple[int, bytes]) -> bytes:
    return uv(len(pairs)) + b"".join(uv(t) + uv(len(d)) + d for t, d in pairs)


NO_TAGS = tags()
TOPIC_ID = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")


def check(msg: Any, version: int, expected: bytes) -> None:
    """Our encoding equals the hand-built bytes, and decoding them gives the message back."""
    assert msg.encode(version) == expected
    assert type(msg).decode(expected, version) == msg


# ---------------------------------------------------------------------------
# registration


@pytest.mark.parametrize(
    ("key", "name", "lo", "hi"),
    [
        (0, "Produce", 0, 11),
        (1, "Fetch", 0, 18),
        (3, "Metadata", 0, 12),
        (2, "ListOffsets", 0, 10),
        (8, "OffsetCommit", 0, 9),
        (9, "OffsetFetch", 0, 9),
        (47, "OffsetDelete", 0, 0),
        (23, "OffsetForLeaderEpoch", 0, 4),
    ],
)
def test_registered_ranges(key: int, name: str, lo: int, hi: int) -> None:
    api = APIS[key]
    assert (api.name, api.min_version, api.max_version) == (name, lo, hi)
    assert api.request.VALID_VERSIONS == api.response.VALID_VERSIONS
    assert api.request.RESPONSE is api.response


# ---------------------------------------------------------------------------
# Produce


def _produce(records: bytes | None, txn: str | None = None) -> Any:
    R = ProduceRequest
    part = R.TopicProduceData.PartitionProduceData(index=2, records=records)
    return R(
        transactional_id=txn,
        acks=-1,
        timeout_ms=30000,
        topic_data=[R.TopicProduceData(name="t", partition_data=[part])],
    )


def test_produce_defaults() -> None:
    req = ProduceRequest()
    assert req.transactional_id is None
    part = ProduceRequest.TopicProduceData.PartitionProduceData()
    assert part.records is None
    p = ProduceResponse.TopicProduceResponse.PartitionProduceResponse()
    assert (p.log_append_time_ms, p.log_start_offset, p.error_message) == (-1, -1, None)
    assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (-1, -1)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_produce_request_v0_to_v2_has_no_transactional_id(version: int) -> None:
    body = i16(-1) + i32(30000) + arr(1) + s("t") + arr(1) + i32(2) + by(b"\x01\x02\x03")
    check(_produce(b"\x01\x02\x03"), version, body)
    with pytest.raises(EncodeError):
        _produce(b"", txn="tx").encode(version)


def test_produce_request_v3_null_transactional_id() -> None:
    body = s(None) + i16(-1) + i32(30000) + arr(1) + s("t") + arr(1) + i32(2) + by(b"\x01\x02\x03")
    check(_produce(b"\x01\x02\x03"), 3, body)


def test_produce_request_v9_flexible() -> None:
    body = cat(
        cs("tx") + i16(-1) + i32(30000) + carr(1) + cs("t") + carr(1) + i32(2) + cby(None),
        NO_TAGS + NO_TAGS + NO_TAGS,
    )
    check(_produce(None, txn="tx"), 9, body)


def test_produce_response_v0_and_v2() -> None:
    R = ProduceResponse
    P = R.TopicProduceResponse.PartitionProduceResponse
    v0 = R(
        responses=[
            R.TopicProduceResponse(
                name="t", partition_responses=[P(index=1, error_code=0, base_offset=77)]
            )
        ]
    )
    check(v0, 0, arr(1) + s("t") + arr(1) + i32(1) + i16(0) + i64(77))
    v2 = R(
        responses=[
            R.TopicProduceResponse(
                name="t",
                partition_responses=[
                    P(index=1, error_code=0, base_offset=77, log_append_time_ms=1234)
                ],
            )
        ],
        throttle_time_ms=5,
    )
    check(v2, 2, arr(1) + s("t") + arr(1) + i32(1) + i16(0) + i64(77) + i64(1234) + i32(5))
    # log_append_time_ms and throttle_time_ms are ignorable: an older version silently drops them
    assert v2.encode(0) == v0.encode(0)
    assert v2.encode(1) == v0.encode(0) + i32(5)


def test_produce_response_v8_record_errors() -> None:
    R = ProduceResponse
    P = R.TopicProduceResponse.PartitionProduceResponse
    E = P.BatchIndexAndErrorMessage
    resp = R(
        responses=[
            R.TopicProduceResponse(
                name="t",
                partition_responses=[
                    P(
                        index=0,
                        error_code=87,
                        base_offset=-1,
                        log_start_offset=3,
                        record_errors=[E(batch_index=4, batch_index_error_message=None)],
                        error_message="bad",
                    )
                ],
            )
        ],
    )
    body = cat(
        arr(1) + s("t") + arr(1) + i32(0) + i16(87) + i64(-1) + i64(-1) + i64(3) + arr(1),
        i32(4) + s(None) + s("bad") + i32(0),
    )
    check(resp, 8, body)


def test_produce_response_v10_tagged_leader_and_endpoints() -> None:
    R = ProduceResponse
    P = R.TopicProduceResponse.PartitionProduceResponse
    resp = R(
        responses=[
            R.TopicProduceResponse(
                name="t",
                partition_responses=[
                    P(
                        index=0,
                        error_code=6,
                        base_offset=-1,
                        current_leader=P.LeaderIdAndEpoch(leader_id=2, leader_epoch=7),
                    )
                ],
            )
        ],
        node_endpoints=[R.NodeEndpoint(node_id=2, host="h", port=9092)],
    )
    partition = cat(
        i32(0) + i16(6) + i64(-1) + i64(-1) + i64(-1) + carr(0) + cs(None),
        tags((0, i32(2) + i32(7) + NO_TAGS)),
    )
    endpoints = carr(1) + i32(2) + cs("h") + i32(9092) + cs(None) + NO_TAGS
    body = carr(1) + cs("t") + carr(1) + partition + NO_TAGS + i32(0) + tags((0, endpoints))
    check(resp, 10, body)
    # at the default leader (-1, -1) and with no endpoints, no tag is written
    resp.responses[0].partition_responses[0].current_leader = P.LeaderIdAndEpoch()
    resp.node_endpoints = []
    plain = i32(0) + i16(6) + i64(-1) + i64(-1) + i64(-1) + carr(0) + cs(None) + NO_TAGS
    check(resp, 10, carr(1) + cs("t") + carr(1) + plain + NO_TAGS + i32(0) + NO_TAGS)


# ---------------------------------------------------------------------------
# Fetch


def _fetch_partition(**kw: Any) -> Any:
    return FetchRequest.FetchTopic.FetchPartition(
        partition=0, fetch_offset=42, partition_max_bytes=1 << 20, **kw
    )


def test_fetch_request_v0_and_v3() -> None:
    req = FetchRequest(
        max_wait_ms=500,
        min_bytes=1,
        topics=[FetchRequest.FetchTopic(topic="t", partitions=[_fetch_partition()])],
    )
    assert req.replica_id == -1 and req.max_bytes == 0x7FFFFFFF and req.session_epoch == -1
    tail = arr(1) + s("t") + arr(1) + i32(0) + i64(42) + i32(1 << 20)
    check(req, 0, i32(-1) + i32(500) + i32(1) + tail)
    req.max_bytes = 1000
    check(req, 3, i32(-1) + i32(500) + i32(1) + i32(1000) + tail)


def test_fetch_request_v7_session_and_forgotten() -> None:
    F = FetchRequest
    req = F(
        max_wait_ms=500,
        min_bytes=1,
        isolation_level=1,
        session_id=9,
        session_epoch=2,
        topics=[F.FetchTopic(topic="t", partitions=[_fetch_partition(log_start_offset=5)])],
        forgotten_topics_data=[F.ForgottenTopic(topic="u", partitions=[1, 3])],
    )
    body = cat(
        i32(-1) + i32(500) + i32(1) + i32(0x7FFFFFFF) + i8(1) + i32(9) + i32(2) + arr(1),
        s("t") + arr(1) + i32(0) + i64(42) + i64(5) + i32(1 << 20) + arr(1) + s("u"),
        arr(2) + i32(1) + i32(3),
    )
    check(req, 7, body)


def test_fetch_request_v12_cluster_id_tag() -> None:
    F = FetchRequest
    req = F(
        cluster_id="c1",
        max_wait_ms=500,
        min_bytes=1,
        isolation_level=1,
        topics=[
            F.FetchTopic(
                topic="t",
                partitions=[_fetch_partition(current_leader_epoch=5, last_fetched_epoch=4)],
            )
        ],
    )
    partition = i32(0) + i32(5) + i64(42) + i32(4) + i64(-1) + i32(1 << 20) + NO_TAGS
    body = cat(
        i32(-1) + i32(500) + i32(1) + i32(0x7FFFFFFF) + i8(1) + i32(0) + i32(-1) + carr(1),
        cs("t") + carr(1) + partition + NO_TAGS + carr(0) + cs("") + tags((0, cs("c1"))),
    )
    check(req, 12, body)


def test_fetch_request_v15_replica_state_replaces_replica_id() -> None:
    F = FetchRequest
    req = F(
        replica_state=F.ReplicaState(replica_id=1, replica_epoch=3),
        max_wait_ms=500,
        min_bytes=1,
        topics=[F.FetchTopic(topic_id=TOPIC_ID, partitions=[_fetch_partition()])],
    )
    partition = i32(0) + i32(-1) + i64(42) + i32(-1) + i64(-1) + i32(1 << 20) + NO_TAGS
    body = cat(
        i32(500) + i32(1) + i32(0x7FFFFFFF) + i8(0) + i32(0) + i32(-1) + carr(1),
        TOPIC_ID.bytes + carr(1) + partition + NO_TAGS + carr(0) + cs(""),
        tags((1, i32(1) + i64(3) + NO_TAGS)),
    )
    check(req, 15, body)
    check(req, 16, body)
    req.replica_id = 1  # a replica id outside the tag cannot be sent at v15
    with pytest.raises(EncodeError):
        req.encode(15)


def test_fetch_response_v4_aborted_transactions() -> None:
    R = FetchResponse
    P = R.FetchableTopicResponse.PartitionData
    part = P(
        partition_index=0,
        high_watermark=100,
        last_stable_offset=90,
        aborted_transactions=[P.AbortedTransaction(producer_id=7, first_offset=80)],
        records=b"xyz",
    )
    resp = R(responses=[R.FetchableTopicResponse(topic="t", partitions=[part])])
    head = i32(0) + arr(1) + s("t") + arr(1) + i32(0) + i16(0) + i64(100) + i64(90)
    check(resp, 4, head + arr(1) + i64(7) + i64(80) + by(b"xyz"))
    part.aborted_transactions = None
    part.records = None
    check(resp, 4, head + arr(-1) + by(None))
    # v0 has neither throttle time nor LSO nor aborted transactions
    v0 = R.decode(arr(1) + s("t") + arr(1) + i32(0) + i16(1) + i64(5) + by(b"r"), 0)
    assert v0.responses[0].partitions[0].records == b"r"
    assert v0.responses[0].partitions[0].last_stable_offset == -1


def test_fetch_response_v12_tags_in_tag_order() -> None:
    R = FetchResponse
    P = R.FetchableTopicResponse.PartitionData
    part = P(
        partition_index=1,
        error_code=0,
        high_watermark=10,
        snapshot_id=P.SnapshotId(end_offset=8, epoch=2),
        diverging_epoch=P.EpochEndOffset(epoch=3, end_offset=6),
        preferred_read_replica=-1,
        records=b"",
    )
    resp = R(session_id=4, responses=[R.FetchableTopicResponse(topic="t", partitions=[part])])
    partition = cat(
        i32(1) + i16(0) + i64(10) + i64(-1) + i64(-1) + carr(0) + i32(-1) + cby(b""),
        tags((0, i32(3) + i64(6) + NO_TAGS), (2, i64(8) + i32(2) + NO_TAGS)),
    )
    body = i32(0) + i16(0) + i32(4) + carr(1) + cs("t") + carr(1) + partition + NO_TAGS + NO_TAGS
    check(resp, 12, body)


# ---------------------------------------------------------------------------
# Metadata


def test_metadata_request_null_topics() -> None:
    M = MetadataRequest
    req = M(topics=[M.MetadataRequestTopic(name="a"), M.MetadataRequestTopic(name="b")])
    check(req, 0, arr(2) + s("a") + s("b"))
    assert M().allow_auto_topic_creation is True
    with pytest.raises(EncodeError):
        M(topics=None).encode(0)  # v0 cannot say "all topics" with null
    check(M(topics=None), 1, arr(-1))
    check(M(topics=None, allow_auto_topic_creation=False), 4, arr(-1) + boolean(False))


def test_metadata_request_v9_to_v11() -> None:
    M = MetadataRequest
    req = M(
        topics=[M.MetadataRequestTopic(name="a")],
        include_cluster_authorized_operations=True,
        include_topic_authorized_operations=True,
    )
    check(req, 8, arr(1) + s("a") + boolean(True) + boolean(True) + boolean(True))
    check(
        req,
        9,
        carr(1) + cs("a") + NO_TAGS + boolean(True) + boolean(True) + boolean(True) + NO_TAGS,
    )
    by_id = M(
        topics=[M.MetadataRequestTopic(topic_id=TOPIC_ID, name=None)],
        include_cluster_authorized_operations=True,
    )
    check(
        by_id,
        10,
        cat(
            carr(1) + TOPIC_ID.bytes + cs(None) + NO_TAGS + boolean(True) + boolean(True),
            boolean(False) + NO_TAGS,
        ),
    )
    with pytest.raises(EncodeError):
        by_id.encode(11)  # cluster authorized operations were removed in v11


def test_metadata_response_v0_and_v12() -> None:
    M = MetadataResponse
    T = M.MetadataResponseTopic
    P = T.MetadataResponsePartition
    partition = P(
        error_code=0,
        partition_index=0,
        leader_id=1,
        leader_epoch=4,
        replica_nodes=[1, 2],
        isr_nodes=[1],
        offline_replicas=[2],
    )
    resp = M(
        throttle_time_ms=3,
        brokers=[M.MetadataResponseBroker(node_id=1, host="h", port=9092, rack="r1")],
        cluster_id="cid",
        controller_id=1,
        topics=[T(error_code=0, name="t", topic_id=TOPIC_ID, partitions=[partition])],
    )
    assert M().cluster_id is None and M().cluster_authorized_operations == -(2**31)
    body0 = cat(
        arr(1) + i32(1) + s("h") + i32(9092) + arr(1) + i16(0) + s("t") + arr(1) + i16(0),
        i32(0) + i32(1) + arr(2) + i32(1) + i32(2) + arr(1) + i32(1),
    )
    assert resp.encode(0) == body0  # the v1+ fields here are all ignorable
    resp.topics[0].topic_authorized_operations = 8
    with pytest.raises(EncodeError):
        resp.encode(7)  # authorized operations are not ignorable
    body12 = cat(
        i32(3) + carr(1) + i32(1) + cs("h") + i32(9092) + cs("r1") + NO_TAGS + cs("cid"),
        i32(1) + carr(1) + i16(0) + cs("t") + TOPIC_ID.bytes + boolean(False) + carr(1),
        i16(0) + i32(0) + i32(1) + i32(4) + carr(2) + i32(1) + i32(2) + carr(1) + i32(1),
        carr(1) + i32(2) + NO_TAGS + i32(8) + NO_TAGS + NO_TAGS,
    )
    check(resp, 12, body12)
    resp.topics[0].name = None  # nullable from v12 (unknown topic id)
    assert MetadataResponse.decode(resp.encode(12), 12).topics[0].name is None


# ---------------------------------------------------------------------------
# ListOffsets


def test_list_offsets_v0_old_style() -> None:
    L = ListOffsetsRequest
    req = L(
        replica_id=-1,
        topics=[
            L.ListOffsetsTopic(
                name="t",
                partitions=[
                    L.ListOffsetsTopic.ListOffsetsPartition(
                        partition_index=0, timestamp=-1, max_num_offsets=3
                    )
                ],
            )
        ],
    )
    check(req, 0, i32(-1) + arr(1) + s("t") + arr(1) + i32(0) + i64(-1) + i32(3))
    with pytest.raises(EncodeError):
        req.encode(1)  # max_num_offsets exists only in v0
    R = ListOffsetsResponse
    resp = R(
        topics=[
            R.ListOffsetsTopicResponse(
                name="t",
                partitions=[
                    R.ListOffsetsTopicResponse.ListOffsetsPartitionResponse(
                        partition_index=0, old_style_offsets=[10, 0]
                    )
                ],
            )
        ]
    )
    check(resp, 0, arr(1) + s("t") + arr(1) + i32(0) + i16(0) + arr(2) + i64(10) + i64(0))


def test_list_offsets_v4_and_v6() -> None:
    L = ListOffsetsRequest
    P = L.ListOffsetsTopic.ListOffsetsPartition
    req = L(
        replica_id=-1,
        isolation_level=1,
        topics=[
            L.ListOffsetsTopic(
                name="t", partitions=[P(partition_index=1, current_leader_epoch=2, timestamp=-2)]
            )
        ],
    )
    check(req, 4, i32(-1) + i8(1) + arr(1) + s("t") + arr(1) + i32(1) + i32(2) + i64(-2))
    check(
        req,
        6,
        cat(
            i32(-1) + i8(1) + carr(1) + cs("t") + carr(1) + i32(1) + i32(2) + i64(-2) + NO_TAGS,
            NO_TAGS + NO_TAGS,
        ),
    )
    R = ListOffsetsResponse
    RP = R.ListOffsetsTopicResponse.ListOffsetsPartitionResponse
    v1 = R(
        topics=[
            R.ListOffsetsTopicResponse(
                name="t", partitions=[RP(partition_index=1, timestamp=5, offset=6)]
            )
        ]
    )
    check(v1, 1, arr(1) + s("t") + arr(1) + i32(1) + i16(0) + i64(5) + i64(6))
    resp = R(
        throttle_time_ms=1,
        topics=[
            R.ListOffsetsTopicResponse(
                name="t", partitions=[RP(partition_index=1, timestamp=5, offset=6, leader_epoch=7)]
            )
        ],
    )
    with pytest.raises(EncodeError):
        resp.encode(3)  # leader_epoch is not ignorable
    check(resp, 4, i32(1) + arr(1) + s("t") + arr(1) + i32(1) + i16(0) + i64(5) + i64(6) + i32(7))


# ---------------------------------------------------------------------------
# OffsetCommit / OffsetFetch / OffsetDelete


def _commit(**kw: Any) -> Any:
    C = OffsetCommitRequest
    P = C.OffsetCommitRequestTopic.OffsetCommitRequestPartition
    part = P(partition_index=0, committed_offset=100, committed_metadata="m", **kw)
    return C(group_id="g", topics=[C.OffsetCommitRequestTopic(name="t", partitions=[part])])


def test_offset_commit_request_v0_v1_v2_v7() -> None:
    # CommittedMetadata is nullable but declares no default: Kafka's default is the empty string
    partition_cls = OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition
    assert partition_cls().committed_metadata == ""
    check(_commit(), 0, s("g") + arr(1) + s("t") + arr(1) + i32(0) + i64(100) + s("m"))
    v1 = _commit(commit_timestamp=1700)
    v1.generation_id_or_member_epoch = 3
    v1.member_id = "m1"
    check(
        v1,
        1,
        cat(
            s("g") + i32(3) + s("m1") + arr(1) + s("t") + arr(1) + i32(0) + i64(100),
            i64(1700) + s("m"),
        ),
    )
    with pytest.raises(EncodeError):
        v1.encode(2)  # the per-partition timestamp is v1 only
    v2 = _commit()
    v2.generation_id_or_member_epoch = 3
    v2.member_id = "m1"
    v2.retention_time_ms = 60000
    check(
        v2,
        2,
        cat(
            s("g") + i32(3) + s("m1") + i64(60000) + arr(1) + s("t") + arr(1) + i32(0),
            i64(100) + s("m"),
        ),
    )
    v7 = _commit(committed_leader_epoch=9)
    v7.group_instance_id = None
    check(
        v7,
        7,
        cat(
            s("g") + i32(-1) + s("") + s(None) + arr(1) + s("t") + arr(1) + i32(0) + i64(100),
            i32(9) + s("m"),
        ),
    )


def test_offset_commit_v8_flexible_and_response() -> None:
    req = _commit()
    req.group_instance_id = "i"
    body = cat(
        cs("g") + i32(-1) + cs("") + cs("i") + carr(1) + cs("t") + carr(1) + i32(0),
        i64(100) + i32(-1) + cs("m") + NO_TAGS + NO_TAGS + NO_TAGS,
    )
    check(req, 8, body)
    R = OffsetCommitResponse
    P = R.OffsetCommitResponseTopic.OffsetCommitResponsePartition
    topics = [
        R.OffsetCommitResponseTopic(name="t", partitions=[P(partition_index=0, error_code=25)])
    ]
    check(R(topics=topics), 0, arr(1) + s("t") + arr(1) + i32(0) + i16(25))
    check(
        R(throttle_time_ms=2, topics=topics),
        3,
        i32(2) + arr(1) + s("t") + arr(1) + i32(0) + i16(25),
    )
    check(
        R(throttle_time_ms=2, topics=topics),
        8,
        i32(2) + carr(1) + cs("t") + carr(1) + i32(0) + i16(25) + NO_TAGS + NO_TAGS + NO_TAGS,
    )


def test_offset_fetch_request_v1_v2_v8_v9() -> None:
    OF = OffsetFetchRequest
    req = OF(group_id="g", topics=[OF.OffsetFetchRequestTopic(name="t", partition_indexes=[0, 1])])
    check(req, 1, s("g") + arr(1) + s("t") + arr(2) + i32(0) + i32(1))
    with pytest.raises(EncodeError):
        OF(group_id="g", topics=None).encode(1)  # "all topics" (null) arrived in v2
    check(OF(group_id="g", topics=None), 2, s("g") + arr(-1))
    check(
        OF(group_id="g", topics=None, require_stable=True),
        7,
        cs("g") + carr(-1) + boolean(True) + NO_TAGS,
    )
    G = OF.OffsetFetchRequestGroup
    batched = OF(
        groups=[
            G(group_id="g", topics=None),
            G(group_id="h", topics=[G.OffsetFetchRequestTopics(name="t", partition_indexes=[2])]),
        ]
    )
    v8 = cat(
        carr(2) + cs("g") + carr(-1) + NO_TAGS + cs("h") + carr(1) + cs("t") + carr(1),
        i32(2) + NO_TAGS + NO_TAGS + boolean(False) + NO_TAGS,
    )
    check(batched, 8, v8)
    assert G().member_id is None and G().member_epoch == -1
    batched.groups[0].member_id = "m"
    batched.groups[0].member_epoch = 5
    v9 = cat(
        carr(2) + cs("g") + cs("m") + i32(5) + carr(-1) + NO_TAGS + cs("h") + cs(None),
        i32(-1) + carr(1) + cs("t") + carr(1) + i32(2) + NO_TAGS + NO_TAGS + boolean(False),
        NO_TAGS,
    )
    check(batched, 9, v9)


def test_offset_fetch_response_v0_v5_v8() -> None:
    R = OffsetFetchResponse
    P = R.OffsetFetchResponseTopic.OffsetFetchResponsePartition
    resp = R(
        throttle_time_ms=1,
        topics=[
            R.OffsetFetchResponseTopic(
                name="t",
                partitions=[
                    P(
                        partition_index=0,
                        committed_offset=5,
                        committed_leader_epoch=2,
                        metadata=None,
                        error_code=0,
                    )
                ],
            )
        ],
        error_code=16,
    )
    v0 = R(
        topics=[
            R.OffsetFetchResponseTopic(
                name="t", partitions=[P(partition_index=0, committed_offset=5, metadata=None)]
            )
        ]
    )
    check(v0, 0, arr(1) + s("t") + arr(1) + i32(0) + i64(5) + s(None) + i16(0))
    check(
        resp,
        5,
        i32(1) + arr(1) + s("t") + arr(1) + i32(0) + i64(5) + i32(2) + s(None) + i16(0) + i16(16),
    )
    G = R.OffsetFetchResponseGroup
    T = G.OffsetFetchResponseTopics
    grouped = R(
        groups=[
            G(
                group_id="g",
                topics=[
                    T(
                        name="t",
                        partitions=[
                            T.OffsetFetchResponsePartitions(
                                partition_index=0, committed_offset=5, metadata="md"
                            )
                        ],
                    )
                ],
                error_code=15,
            )
        ]
    )
    v8 = cat(
        i32(0) + carr(1) + cs("g") + carr(1) + cs("t") + carr(1) + i32(0) + i64(5),
        i32(-1) + cs("md") + i16(0) + NO_TAGS + NO_TAGS + i16(15) + NO_TAGS + NO_TAGS,
    )
    check(grouped, 8, v8)


def test_offset_delete_v0() -> None:
    D = OffsetDeleteRequest
    req = D(
        group_id="g",
        topics=[
            D.OffsetDeleteRequestTopic(
                name="t",
                partitions=[
                    D.OffsetDeleteRequestTopic.OffsetDeleteRequestPartition(partition_index=3)
                ],
            )
        ],
    )
    check(req, 0, s("g") + arr(1) + s("t") + arr(1) + i32(3))
    R = OffsetDeleteResponse
    resp = R(
        error_code=0,
        throttle_time_ms=7,
        topics=[
            R.OffsetDeleteResponseTopic(
                name="t",
                partitions=[
                    R.OffsetDeleteResponseTopic.OffsetDeleteResponsePartition(
                        partition_index=3, error_code=86
                    )
                ],
            )
        ],
    )
    check(resp, 0, i16(0) + i32(7) + arr(1) + s("t") + arr(1) + i32(3) + i16(86))


# ---------------------------------------------------------------------------
# OffsetForLeaderEpoch


def test_offset_for_leader_epoch() -> None:
    OE = OffsetForLeaderEpochRequest
    P = OE.OffsetForLeaderTopic.OffsetForLeaderPartition
    req = OE(
        topics=[
            OE.OffsetForLeaderTopic(
                topic="t", partitions=[P(partition=1, current_leader_epoch=6, leader_epoch=5)]
            )
        ]
    )
    assert req.replica_id == -2
    v0 = arr(1) + s("t") + arr(1) + i32(1) + i32(5)
    assert req.encode(0) == v0  # current_leader_epoch is ignorable: dropped before v2
    assert (
        OffsetForLeaderEpochRequest.decode(v0, 0).topics[0].partitions[0].current_leader_epoch == -1
    )
    check(req, 2, arr(1) + s("t") + arr(1) + i32(1) + i32(6) + i32(5))
    req.replica_id = -1
    check(req, 3, i32(-1) + arr(1) + s("t") + arr(1) + i32(1) + i32(6) + i32(5))
    check(
        req,
        4,
        cat(
            i32(-1) + carr(1) + cs("t") + carr(1) + i32(1) + i32(6) + i32(5) + NO_TAGS,
            NO_TAGS + NO_TAGS,
        ),
    )
    R = OffsetForLeaderEpochResponse
    E = R.OffsetForLeaderTopicResult.EpochEndOffset
    resp = R(
        throttle_time_ms=4,
        topics=[
            R.OffsetForLeaderTopicResult(
                topic="t", partitions=[E(error_code=0, partition=1, leader_epoch=5, end_offset=99)]
            )
        ],
    )
    check(
        R(
            topics=[
                R.OffsetForLeaderTopicResult(
                    topic="t", partitions=[E(error_code=0, partition=1, end_offset=99)]
                )
            ]
        ),
        0,
        arr(1) + s("t") + arr(1) + i16(0) + i32(1) + i64(99),
    )
    check(resp, 2, i32(4) + arr(1) + s("t") + arr(1) + i16(0) + i32(1) + i32(5) + i64(99))


# ---------------------------------------------------------------------------
# the versions Kafka 4 dropped, against kafka-python's hand-written classes of those versions


@pytest.mark.parametrize(
    ("ours", "module", "old_name", "version"),
    [
        (_produce(b"\x00\x01"), "produce", "ProduceRequest", 0),
        (_produce(b"\x00\x01"), "produce", "ProduceRequest", 2),
        (
            FetchRequest(
                max_wait_ms=1,
                min_bytes=2,
                max_bytes=3,
                topics=[FetchRequest.FetchTopic(topic="t", partitions=[_fetch_partition()])],
            ),
            "fetch",
            "FetchRequest",
            3,
        ),
        (_commit(), "commit", "OffsetCommitRequest", 0),
        (
            OffsetFetchRequest(
                group_id="g",
                topics=[
                    OffsetFetchRequest.OffsetFetchRequestTopic(name="t", partition_indexes=[4])
                ],
            ),
            "commit",
            "OffsetFetchRequest",
            0,
        ),
    ],
)
def test_removed_low_versions_match_kafka_python_old_classes(
    ours: Any, module: str, old_name: str, version: int
) -> None:
    old = pytest.importorskip(f"kafka.protocol.old.{module}")
    cls = getattr(old, f"{old_name}_v{version}")
    data = ours.encode(version)
    assert cls.decode(data).encode() == data
    assert type(ours).decode(data, version) == ours
