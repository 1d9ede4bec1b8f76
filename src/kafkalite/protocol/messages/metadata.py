"""Metadata (key 3), versions 0-12: brokers, topics, partition leaders and replicas of the cluster;
DescribeTopicPartitions (key 75, KIP-966), v0: the same partitions paged by a cursor.
"""

from __future__ import annotations

from kafkalite.protocol.schema import NULL, F, api, request, response

MetadataRequest = request(
    3,
    "MetadataRequest",
    valid="0-12",
    flexible="9+",
    fields=[
        F(
            "topics",
            "[]MetadataRequestTopic",
            "0+",
            nullable="1+",
            fields=[
                F("topic_id", "uuid", "10+", ignorable=True),
                F("name", "string", "0+", nullable="10+"),
            ],
        ),
        F("allow_auto_topic_creation", "bool", "4+", default=True),
        F("include_cluster_authorized_operations", "bool", "8-10"),
        F("include_topic_authorized_operations", "bool", "8+"),
    ],
)

MetadataResponse = response(
    3,
    "MetadataResponse",
    valid="0-12",
    flexible="9+",
    fields=[
        F("throttle_time_ms", "int32", "3+", ignorable=True),
        F(
            "brokers",
            "[]MetadataResponseBroker",
            "0+",
            fields=[
                F("node_id", "int32", "0+"),
                F("host", "string", "0+"),
                F("port", "int32", "0+"),
                F("rack", "string", "1+", nullable="1+", ignorable=True, default=NULL),
            ],
        ),
        F("cluster_id", "string", "2+", nullable="2+", ignorable=True, default=NULL),
        F("controller_id", "int32", "1+", default=-1, ignorable=True),
        F(
            "topics",
            "[]MetadataResponseTopic",
            "0+",
            fields=[
                F("error_code", "int16", "0+"),
                F("name", "string", "0+", nullable="12+"),
                F("topic_id", "uuid", "10+", ignorable=True),
                F("is_internal", "bool", "1+", default=False, ignorable=True),
                F(
                    "partitions",
                    "[]MetadataResponsePartition",
                    "0+",
                    fields=[
                        F("error_code", "int16", "0+"),
                        F("partition_index", "int32", "0+"),
                        F("leader_id", "int32", "0+"),
                        F("leader_epoch", "int32", "7+", default=-1, ignorable=True),
                        F("replica_nodes", "[]int32", "0+"),
                        F("isr_nodes", "[]int32", "0+"),
                        F("offline_replicas", "[]int32", "5+", ignorable=True),
                    ],
                ),
                F("topic_authorized_operations", "int32", "8+", default=-2147483648),
            ],
        ),
        F("cluster_authorized_operations", "int32", "8-10", default=-2147483648),
    ],
)

METADATA = api("Metadata", MetadataRequest, MetadataResponse)

# ---------------------------------------------------------------------------
# DescribeTopicPartitions (key 75, KIP-966): topics' partitions, at most response_partition_limit per
# answer; the next cursor (topic, partition) says where the following request resumes. Only v0, flexible

DescribeTopicPartitionsRequest = request(
    75,
    "DescribeTopicPartitionsRequest",
    valid="0",
    flexible="0+",
    fields=[
        F("topics", "[]TopicRequest", "0+", fields=[F("name", "string", "0+")]),
        F("response_partition_limit", "int32", "0+", default=2000),
        F(
            "cursor",
            "Cursor",
            "0+",
            nullable="0+",
            default=NULL,
            fields=[F("topic_name", "string", "0+"), F("partition_index", "int32", "0+")],
        ),
    ],
)

DescribeTopicPartitionsResponse = response(
    75,
    "DescribeTopicPartitionsResponse",
    valid="0",
    flexible="0+",
    fields=[
        F("throttle_time_ms", "int32", "0+", ignorable=True),
        F(
            "topics",
            "[]DescribeTopicPartitionsResponseTopic",
            "0+",
            fields=[
                F("error_code", "int16", "0+"),
                F("name", "string", "0+", nullable="0+"),
                F("topic_id", "uuid", "0+", ignorable=True),
                F("is_internal", "bool", "0+", default=False, ignorable=True),
                F(
                    "partitions",
                    "[]DescribeTopicPartitionsResponsePartition",
                    "0+",
                    fields=[
                        F("error_code", "int16", "0+"),
                        F("partition_index", "int32", "0+"),
                        F("leader_id", "int32", "0+"),
                        F("leader_epoch", "int32", "0+", default=-1, ignorable=True),
                        F("replica_nodes", "[]int32", "0+"),
                        F("isr_nodes", "[]int32", "0+"),
                        F("eligible_leader_replicas", "[]int32", "0+", nullable="0+", default=NULL),
                        F("last_known_elr", "[]int32", "0+", nullable="0+", default=NULL),
                        F("offline_replicas", "[]int32", "0+", ignorable=True),
                    ],
                ),
                F("topic_authorized_operations", "int32", "0+", default=-2147483648),
            ],
        ),
        F(
            "next_cursor",
            "Cursor",
            "0+",
            nullable="0+",
            default=NULL,
            fields=[F("topic_name", "string", "0+"), F("partition_index", "int32", "0+")],
        ),
    ],
)

DESCRIBE_TOPIC_PARTITIONS = api(
    "DescribeTopicPartitions", DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse
)
