"""The share-state APIs (83-87) v0 are laid out byte for byte as Kafka's flexible messages of the same
declaration; a hand-encoded request and response pin the field order and the compact encodings.
"""

from __future__ import annotations

import struct
import uuid

from kafkalite.protocol.messages.share_state import (
    ReadShareGroupStateResponse,
    WriteShareGroupStateRequest,
)

TOPIC = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")


def test_write_request_bytes() -> None:
    data = WriteShareGroupStateRequest.WriteStateData
    req = WriteShareGroupStateRequest(
        group_id="g",
        topics=[
            data(
                topic_id=TOPIC,
                partitions=[
                    data.PartitionData(
                        partition=2,
                        state_epoch=1,
                        leader_epoch=7,
                        start_offset=10,
                        state_batches=[
                            data.PartitionData.StateBatch(
                                first_offset=10, last_offset=12, delivery_state=2, delivery_count=1
                            )
                        ],
                    )
                ],
            )
        ],
    )
    batch = struct.pack(">qqbh", 10, 12, 2, 1) + b"\x00"
    partition = struct.pack(">iiiq", 2, 1, 7, 10) + b"\x02" + batch + b"\x00"
    topic = TOPIC.bytes + b"\x02" + partition + b"\x00"
    expected = b"\x02g" + b"\x02" + topic + b"\x00"
    assert req.encode(0) == expected
    assert WriteShareGroupStateRequest.decode(expected, 0) == req


def test_read_response_bytes_with_a_null_message() -> None:
    result = ReadShareGroupStateResponse.ReadStateResult
    part = result.PartitionResult
    resp = ReadShareGroupStateResponse(
        results=[
            result(
                topic_id=TOPIC,
                partitions=[part(partition=0, error_code=0, state_epoch=0, start_offset=-1)],
            )
        ]
    )
    assert resp.results[0].partitions[0].error_message is None
    body = struct.pack(">ih", 0, 0) + b"\x00" + struct.pack(">iq", 0, -1) + b"\x01" + b"\x00"
    expected = b"\x02" + TOPIC.bytes + b"\x02" + body + b"\x00" + b"\x00"
    assert resp.encode(0) == expected
    assert ReadShareGroupStateResponse.decode(expected, 0) == resp
