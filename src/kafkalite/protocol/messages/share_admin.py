"""KIP-932's share-group offset administration, v0 and flexible as Kafka 4.1 declares them:
DescribeShareGroupOffsets (90), AlterShareGroupOffsets (91) and DeleteShareGroupOffsets (92).
"""

from __future__ import annotations

from kafkalite.protocol.schema import NULL, F, api, request, response

# Kafka 4.2 adds DescribeShareGroupOffsets v1 with a per-partition Lag (KIP-1226); 4.1 has v0 only.

DescribeShareGroupOffsetsRequest = request(
    90,
    "DescribeShareGroupOffsetsRequest",
    valid="0-1",
    flexible="0+",
    fields=[
        F(
            "groups",
            "[]DescribeShareGroupOffsetsRequestGroup",
            "0+",
            fields=[
                F("group_id", "string", "0+"),
                F(
                    "topics",
                    "[]DescribeShareGroupOffsetsRequestTopic",
                    "0+",
                    nullable="0+",
                    fields=[
                        F("topic_name", "string", "0+"),
                        F("partitions", "[]int32", "0+"),
                    ],
                ),
            ],
        )
    ],
)

DescribeShareGroupOffsetsResponse = response(
    90,
    "DescribeShareGroupOffsetsResponse",
    valid="0-1",
    flexible="0+",
    fields=[
        F("throttle_time_ms", "int32", "0+"),
        F(
            "groups",
            "[]DescribeShareGroupOffsetsResponseGroup",
            "0+",
            fields=[
                F("group_id", "string", "0+"),
                F(
                    "topics",
                    "[]DescribeShareGroupOffsetsResponseTopic",
                    "0+",
                    fields=[
                        F("topic_name", "string", "0+"),
                        F("topic_id", "uuid", "0+"),
                        F(
                            "partitions",
                            "[]DescribeShareGroupOffsetsResponsePartition",
                            "0+",
                            fields=[
                                F("partition_index", "int32", "0+"),
                                F("start_offset", "int64", "0+"),
                                F("leader_epoch", "int32", "0+"),
                                # KIP-1226 (Kafka 4.2): records not yet acknowledged or archived
                                F("lag", "int64", "1+", default=-1, ignorable=True),
                                F("error_code", "int16", "0+"),
                                F("error_message", "string", "0+", nullable="0+", default=NULL),
                                # kafkalite's own tagged field: records fetched and not yet
                                # finished (acquired or released); other clients skip it
                                F(
                                    "in_flight_records",
                                    "int64",
                                    "0+",
                                    tag=10000,
                                    tagged="0+",
                                    default=-1,
                                    ignorable=True,
                                ),
                            ],
                        ),
                    ],
                ),
                F("error_code", "int16", "0+"),
                F("error_message", "string", "0+", nullable="0+", default=NULL),
            ],
        ),
    ],
)

DESCRIBE_SHARE_GROUP_OFFSETS = api(
    "DescribeShareGroupOffsets", DescribeShareGroupOffsetsRequest, DescribeShareGroupOffsetsResponse
)

AlterShareGroupOffsetsRequest = request(
    91,
    "AlterShareGroupOffsetsRequest",
    valid="0",
    flexible="0+",
    fields=[
        F("group_id", "string", "0+"),
        F(
            "topics",
            "[]AlterShareGroupOffsetsRequestTopic",
            "0+",
            fields=[
                F("topic_name", "string", "0+"),
                F(
                    "partitions",
                    "[]AlterShareGroupOffsetsRequestPartition",
                    "0+",
                    fields=[
                        F("partition_index", "int32", "0+"),
                        F("start_offset", "int64", "0+"),
                    ],
                ),
            ],
        ),
    ],
)

AlterShareGroupOffsetsResponse = response(
    91,
    "AlterShareGroupOffsetsResponse",
    valid="0",
    flexible="0+",
    fields=[
        F("throttle_time_ms", "int32", "0+"),
        F("error_code", "int16", "0+"),
        F("error_message", "string", "0+", nullable="0+", default=NULL),
        F(
            "responses",
            "[]AlterShareGroupOffsetsResponseTopic",
            "0+",
            fields=[
                F("topic_name", "string", "0+"),
                F("topic_id", "uuid", "0+"),
                F(
                    "partitions",
                    "[]AlterShareGroupOffsetsResponsePartition",
                    "0+",
                    fields=[
                        F("partition_index", "int32", "0+"),
                        F("error_code", "int16", "0+"),
                        F("error_message", "string", "0+", nullable="0+", default=NULL),
                    ],
                ),
            ],
        ),
    ],
)

ALTER_SHARE_GROUP_OFFSETS = api(
    "AlterShareGroupOffsets", AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse
)

DeleteShareGroupOffsetsRequest = request(
    92,
    "DeleteShareGroupOffsetsRequest",
    valid="0",
    flexible="0+",
    fields=[
        F("group_id", "string", "0+"),
        F(
            "topics",
            "[]DeleteShareGroupOffsetsRequestTopic",
            "0+",
            fields=[F("topic_name", "string", "0+")],
        ),
    ],
)

DeleteShareGroupOffsetsResponse = response(
    92,
    "DeleteShareGroupOffsetsResponse",
    valid="0",
    flexible="0+",
    fields=[
        F("throttle_time_ms", "int32", "0+"),
        F("error_code", "int16", "0+"),
        F("error_message", "string", "0+", nullable="0+", default=NULL),
        F(
            "responses",
            "[]DeleteShareGroupOffsetsResponseTopic",
            "0+",
            fields=[
                F("topic_name", "string", "0+"),
                F("topic_id", "uuid", "0+"),
                F("error_code", "int16", "0+"),
                F("error_message", "string", "0+", nullable="0+", default=NULL),
            ],
        ),
    ],
)

DELETE_SHARE_GROUP_OFFSETS = api(
    "DeleteShareGroupOffsets", DeleteShareGroupOffsetsRequest, DeleteShareGroupOffsetsResponse
)
