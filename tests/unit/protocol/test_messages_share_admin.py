"""The share-group offset administration APIs (90-92) v0 are laid out byte for byte as Kafka 4.1's flexible
messages; hand-encoded requests and responses pin the field order, null arrays and compact encodings.
"""

from __future__ import annotations

import struct
import uuid

from kafkalite.protocol.messages.share_admin import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsResponse,
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse,
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsResponse,
)

TOPIC = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")


def test_describe_request_with_null_and_listed_topics() -> None:
    group = DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup
    topic = group.DescribeShareGroupOffsetsRequestTopic
    req = DescribeShareGroupOffsetsRequest(
        groups=[
            group(group_id="a", topics=None),
            group(group_id="b", topics=[topic(topic_name="t", partitions=[0, 2])]),
        ]
    )
    null_group = b"\x02a" + b"\x00" + b"\x00"  # null compact array is length 0
    listed = b"\x02t" + b"\x03" + struct.pack(">ii", 0, 2) + b"\x00"
    expected = b"\x03" + null_group + b"\x02b" + b"\x02" + listed + b"\x00" + b"\x00"
    assert req.encode(0) == expected
    assert DescribeShareGroupOffsetsRequest.decode(expected, 0) == req


def test_describe_response_bytes() -> None:
    group = DescribeShareGroupOffsetsResponse.DescribeShareGroupOffsetsResponseGroup
    topic = group.DescribeShareGroupOffsetsResponseTopic
    part = topic.DescribeShareGroupOffsetsResponsePartition
    resp = DescribeShareGroupOffsetsResponse(
        throttle_time_ms=0,
        groups=[
            group(
                group_id="g",
                topics=[
                    topic(
                        topic_name="t",
                        topic_id=TOPIC,
                        partitions=[
                            part(partition_index=1, start_offset=7, leader_epoch=3, error_code=0)
                        ],
                    )
                ],
                error_code=0,
            )
        ],
    )
    p = struct.pack(">iqih", 1, 7, 3, 0) + b"\x00" + b"\x00"
    t = b"\x02t" + TOPIC.bytes + b"\x02" + p + b"\x00"
    g = b"\x02g" + b"\x02" + t + struct.pack(">h", 0) + b"\x00" + b"\x00"
    expected = struct.pack(">i", 0) + b"\x02" + g + b"\x00"
    assert resp.encode(0) == expected
    assert DescribeShareGroupOffsetsResponse.decode(expected, 0) == resp


def test_alter_request_and_response_bytes() -> None:
    topic = AlterShareGroupOffsetsRequest.AlterShareGroupOffsetsRequestTopic
    part = topic.AlterShareGroupOffsetsRequestPartition
    req = AlterShareGroupOffsetsRequest(
        group_id="g",
        topics=[topic(topic_name="t", partitions=[part(partition_index=0, start_offset=5)])],
    )
    expected = (
        b"\x02g" + b"\x02" + b"\x02t" + b"\x02" + struct.pack(">iq", 0, 5) + b"\x00" + b"\x00"
    ) + b"\x00"
    assert req.encode(0) == expected
    assert AlterShareGroupOffsetsRequest.decode(expected, 0) == req

    rtopic = AlterShareGroupOffsetsResponse.AlterShareGroupOffsetsResponseTopic
    rpart = rtopic.AlterShareGroupOffsetsResponsePartition
    resp = AlterShareGroupOffsetsResponse(
        throttle_time_ms=0,
        error_code=0,
        responses=[
            rtopic(
                topic_name="t",
                topic_id=TOPIC,
                partitions=[rpart(partition_index=0, error_code=0)],
            )
        ],
    )
    body = struct.pack(">ih", 0, 0) + b"\x00" + b"\x00"
    rt = b"\x02t" + TOPIC.bytes + b"\x02" + body + b"\x00"
    rexpected = struct.pack(">ih", 0, 0) + b"\x00" + b"\x02" + rt + b"\x00"
    assert resp.encode(0) == rexpected
    assert AlterShareGroupOffsetsResponse.decode(rexpected, 0) == resp


def test_delete_request_and_response_bytes() -> None:
    topic = DeleteShareGroupOffsetsRequest.DeleteShareGroupOffsetsRequestTopic
    req = DeleteShareGroupOffsetsRequest(group_id="g", topics=[topic(topic_name="t")])
    expected = b"\x02g" + b"\x02" + b"\x02t" + b"\x00" + b"\x00"
    assert req.encode(0) == expected
    assert DeleteShareGroupOffsetsRequest.decode(expected, 0) == req

    rtopic = DeleteShareGroupOffsetsResponse.DeleteShareGroupOffsetsResponseTopic
    resp = DeleteShareGroupOffsetsResponse(
        throttle_time_ms=0,
        error_code=0,
        responses=[rtopic(topic_name="t", topic_id=TOPIC, error_code=3, error_message="x")],
    )
    rt = b"\x02t" + TOPIC.bytes + struct.pack(">h", 3) + b"\x02x" + b"\x00"
    rexpected = struct.pack(">ih", 0, 0) + b"\x00" + b"\x02" + rt + b"\x00"
    assert resp.encode(0) == rexpected
    assert DeleteShareGroupOffsetsResponse.decode(rexpected, 0) == resp
