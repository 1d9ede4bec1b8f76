"""Log offset lookups (ListOffsets, OffsetForLeaderEpoch) and a group's committed offsets.

ListOffsets v0-8, OffsetForLeaderEpoch v0-4, OffsetCommit v0-9, OffsetFetch v0-9, OffsetDelete v0.
"""

from __future__ import annotations

from kafkalite.protocol.schema import NULL, F, api, request, response

# ---------------------------------------------------------------------------
# ListOffsets (key 2): v0 returns a list of offsets, v1+ one offset and its timestamp; v6+ flexible;
# v9 (KIP-1005, latest tiered -5) and v10 (KIP-1075, timeout_ms) change nothing else

ListOffsetsRequest = request(
    2,
    "ListOffsetsRequest",
    valid="0-10",
    flexible="6+",
    fields=[
        F("replica_id", "int32", "0+"),
        F("isolation_level", "int8", "2+"),
        F(
            "topics",
            "[]ListOffsetsTopic",
            "0+",
            fields=[
                F("name", "string", "0+"),
                F(
                    "partitions",
                    "[]ListOffsetsPartition",
                    "0+",
                    fields=[
                        F("partition_index", "int32", "0+"),
                        F("current_leader_epoch", "int32", "4+", default=-1, ignorable=True),
                        F("timestamp", "int64", "0+"),
                        F("max_num_offsets", "int32", "0", default=1),
                    ],
                ),
            ],
        ),
        # v10 (KIP-1075): how long to wait on remote storage (there is none here)
        F("timeout_ms", "int32", "10+", default=0, ignorable=True),
    ],
)

ListOffsetsResponse = response(
    2,
    "ListOffsetsResponse",
    valid="0-10",
    flexible="6+",
    fields=[
        F("throttle_time_ms", "int32", "2+", ignorable=True),
        F(
            "topics",
            "[]ListOffsetsTopicResponse",
            "0+",
            fields=[
                F("name", "string", "0+"),
                F(
                    "partitions",
                    "[]ListOffsetsPartitionResponse",
                    "0+",
                    fields=[
                        F("partition_index", "int32", "0+"),
                        F("error_code", "int16", "0+"),
                        F("old_style_offsets", "[]int64", "0"),
                        F("timestamp", "int64", "1+", default=-1),
                        F("offset", "int64", "1+", default=-1),
                        F("leader_epoch", "int32", "4+", default=-1),
                    ],
                ),
            ],
        ),
    ],
)

LIST_OFFSETS = api("ListOffsets", ListOffsetsRequest, ListOffsetsResponse)

# ---------------------------------------------------------------------------
# OffsetCommit (key 8): v1 adds generation, member and a per-partition timestamp; v2-4 carry a
# retention time; v8+ flexible

OffsetCommitRequest = request(
    8,
    "OffsetCommitRequest",
    valid="0-9",
    flexible="8+",
    fields=[
        F("group_id", "string", "0+"),
        F("generation_id_or_member_epoch", "int32", "1+", default=-1, ignorable=True),
        F("member_id", "string", "1+", ignorable=True),
        F("group_instance_id", "string", "7+", nullable="7+", default=NULL),
        F("retention_time_ms", "int64", "2-4", default=-1, ignorable=True),
        F(
            "topics",
            "[]OffsetCommitRequestTopic",
            "0+",
            fields=[
                F("name", "string", "0-9", ignorable=True),
                F(
                    "partitions",
                    "[]OffsetCommitRequestPartition",
                    "0+",
                    fields=[
                        F("partition_index", "int32", "0+"),
                        F("committed_offset", "int64", "0+"),
                        F("committed_leader_epoch", "int32", "6+", default=-1, ignorable=True),
                        F("commit_timestamp", "int64", "1", default=-1),
                        F("committed_metadata", "string", "0+", nullable="0+"),
                    ],
                ),
            ],
        ),
    ],
)

OffsetCommitResponse = response(
    8,
    "OffsetCommitResponse",
    valid="0-9",
    flexible="8+",
    fields=[
        F("throttle_time_ms", "int32", "3+", ignorable=True),
        F(
            "topics",
            "[]OffsetCommitResponseTopic",
            "0+",
            fields=[
                F("name", "string", "0-9", ignorable=True),
                F(
                    "partitions",
                    "[]OffsetCommitResponsePartition",
                    "0+",
                    fields=[
                        F("partition_index", "int32", "0+"),
                        F("error_code", "int16", "0+"),
                    ],
                ),
            ],
        ),
    ],
)

OFFSET_COMMIT = api("OffsetCommit", OffsetCommitRequest, OffsetCommitResponse)

# ---------------------------------------------------------------------------
# OffsetFetch (key 9): v2+ null topics = all topics, v6+ flexible, v8+ batches several groups

OffsetFetchRequest = request(
    9,
    "OffsetFetchRequest",
    valid="0-9",
    flexible="6+",
    fields=[
        F("group_id", "string", "0-7"),
        F(
            "topics",
            "[]OffsetFetchRequestTopic",
            "0-7",
            nullable="2-7",
            fields=[
                F("name", "string", "0-7"),
                F("partition_indexes", "[]int32", "0-7"),
            ],
        ),
        F(
            "groups",
            "[]OffsetFetchRequestGroup",
            "8+",
            fields=[
                F("group_id", "string", "8+"),
                F("member_id", "string", "9+", nullable="9+", ignorable=True, default=NULL),
                F("member_epoch", "int32", "9+", default=-1, ignorable=True),
                F(
                    "topics",
                    "[]OffsetFetchRequestTopics",
                    "8+",
                    nullable="8+",
                    fields=[
                        F("name", "string", "8-9", ignorable=True),
                        F("partition_indexes", "[]int32", "8+"),
                    ],
                ),
            ],
        ),
        F("require_stable", "bool", "7+", default=False),
    ],
)

OffsetFetchResponse = response(
    9,
    "OffsetFetchResponse",
    valid="0-9",
    flexible="6+",
    fields=[
        F("throttle_time_ms", "int32", "3+", ignorable=True),
        F(
            "topics",
            "[]OffsetFetchResponseTopic",
            "0-7",
            fields=[
                F("name", "string", "0-7"),
                F(
                    "partitions",
                    "[]OffsetFetchResponsePartition",
                    "0-7",
                    fields=[
                        F("partition_index", "int32", "0-7"),
                        F("committed_offset", "int64", "0-7"),
                        F("committed_leader_epoch", "int32", "5-7", default=-1, ignorable=True),
                        F("metadata", "string", "0-7", nullable="0-7"),
                        F("error_code", "int16", "0-7"),
                    ],
                ),
            ],
        ),
        F("error_code", "int16", "2-7", default=0, ignorable=True),
        F(
            "groups",
            "[]OffsetFetchResponseGroup",
            "8+",
            fields=[
                F("group_id", "string", "8+"),
                F(
                    "topics",
                    "[]OffsetFetchResponseTopics",
                    "8+",
                    fields=[
                        F("name", "string", "8-9", ignorable=True),
                        F(
                            "partitions",
                            "[]OffsetFetchResponsePartitions",
                            "8+",
                            fields=[
                                F("partition_index", "int32", "8+"),
                                F("committed_offset", "int64", "8+"),
                                F(
                                    "committed_leader_epoch",
                                    "int32",
                                    "8+",
                                    default=-1,
                                    ignorable=True,
                                ),
                                F("metadata", "string", "8+", nullable="8+"),
                                F("error_code", "int16", "8+"),
                            ],
                        ),
                    ],
                ),
                F("error_code", "int16", "8+", default=0),
            ],
        ),
    ],
)

OFFSET_FETCH = api("OffsetFetch", OffsetFetchRequest, OffsetFetchResponse)

# ---------------------------------------------------------------------------
# OffsetDelete (key 47): removes a group's committed offsets for partitions it no longer consumes

OffsetDeleteRequest = request(
    47,
    "OffsetDeleteRequest",
    valid="0",
    flexible="none",
    fields=[
        F("group_id", "string", "0+"),
        F(
            "topics",
            "[]OffsetDeleteRequestTopic",
            "0+",
            fields=[
                F("name", "string", "0+"),
                F(
                    "partitions",
                    "[]OffsetDeleteRequestPartition",
                    "0+",
                    fields=[F("partition_index", "int32", "0+")],
                ),
            ],
        ),
    ],
)

OffsetDeleteResponse = response(
    47,
    "OffsetDeleteResponse",
    valid="0",
    flexible="none",
    fields=[
        F("error_code", "int16", "0+"),
        F("throttle_time_ms", "int32", "0+", ignorable=True),
        F(
            "topics",
            "[]OffsetDeleteResponseTopic",
            "0+",
            fields=[
                F("name", "string", "0+"),
                F(
                    "partitions",
                    "[]OffsetDeleteResponsePartition",
                    "0+",
                    fields=[
                        F("partition_index", "int32", "0+"),
                        F("error_code", "int16", "0+"),
                    ],
                ),
            ],
        ),
    ],
)

OFFSET_DELETE = api("OffsetDelete", OffsetDeleteRequest, OffsetDeleteResponse)

# ---------------------------------------------------------------------------
# OffsetForLeaderEpoch (key 23): the end offset of a leader epoch (truncation after a leader change)

OffsetForLeaderEpochRequest = request(
    23,
    "OffsetForLeaderEpochRequest",
    valid="0-4",
    flexible="4+",
    fields=[
        F("replica_id", "int32", "3+", default=-2, ignorable=True),
        F(
            "topics",
            "[]OffsetForLeaderTopic",
            "0+",
            fields=[
                F("topic", "string", "0+"),
                F(
                    "partitions",
                    "[]OffsetForLeaderPartition",
                    "0+",
                    fields=[
                        F("partition", "int32", "0+"),
                        F("current_leader_epoch", "int32", "2+", default=-1, ignorable=True),
                        F("leader_epoch", "int32", "0+"),
                    ],
                ),
            ],
        ),
    ],
)

OffsetForLeaderEpochResponse = response(
    23,
    "OffsetForLeaderEpochResponse",
    valid="0-4",
    flexible="4+",
    fields=[
        F("throttle_time_ms", "int32", "2+", ignorable=True),
        F(
            "topics",
            "[]OffsetForLeaderTopicResult",
            "0+",
            fields=[
                F("topic", "string", "0+"),
                F(
                    "partitions",
                    "[]EpochEndOffset",
                    "0+",
                    fields=[
                        F("error_code", "int16", "0+"),
                        F("partition", "int32", "0+"),
                        F("leader_epoch", "int32", "1+", default=-1, ignorable=True),
                        F("end_offset", "int64", "0+", default=-1),
                    ],
                ),
            ],
        ),
    ],
)

OFFSET_FOR_LEADER_EPOCH = api(
    "OffsetForLeaderEpoch", OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse
)
