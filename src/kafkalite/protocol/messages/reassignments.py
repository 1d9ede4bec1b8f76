"""Partition reassignment APIs (KIP-455): AlterPartitionReassignments (45) and
ListPartitionReassignments (46), version 0, flexible, as Kafka's ZooKeeper-mode broker serves them.
"""

from __future__ import annotations

from kafkalite.protocol.schema import NULL, F, api, request, response

# -- AlterPartitionReassignments (45) ---------------------------------------------------------------------

AlterPartitionReassignmentsRequest = request(
    45,
    "AlterPartitionReassignmentsRequest",
    valid="0",
    flexible="0+",
    fields=[
        F("timeout_ms", "int32", "0+", default=60000),
        F(
            "topics",
            "[]ReassignableTopic",
            "0+",
            fields=[
                F("name", "string", "0+"),
                F(
                    "partitions",
                    "[]ReassignablePartition",
                    "0+",
                    fields=[
                        F("partition_index", "int32", "0+"),
                        # null cancels the partition's reassignment in flight
                        F("replicas", "[]int32", "0+", nullable="0+", default=NULL),
                    ],
                ),
            ],
        ),
    ],
)

AlterPartitionReassignmentsResponse = response(
    45,
    "AlterPartitionReassignmentsResponse",
    valid="0",
    flexible="0+",
    fields=[
        F("throttle_time_ms", "int32", "0+"),
        F("error_code", "int16", "0+"),
        F("error_message", "string", "0+", nullable="0+"),
        F(
            "responses",
            "[]ReassignableTopicResponse",
            "0+",
            fields=[
                F("name", "string", "0+"),
                F(
                    "partitions",
                    "[]ReassignablePartitionResponse",
                    "0+",
                    fields=[
                        F("partition_index", "int32", "0+"),
                        F("error_code", "int16", "0+"),
                        F("error_message", "string", "0+", nullable="0+"),
                    ],
                ),
            ],
        ),
    ],
)

ALTER_PARTITION_REASSIGNMENTS = api(
    "AlterPartitionReassignments",
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
)

# -- ListPartitionReassignments (46) -----------------------------------------------------------------------

ListPartitionReassignmentsRequest = request(
    46,
    "ListPartitionReassignmentsRequest",
    valid="0",
    flexible="0+",
    fields=[
        F("timeout_ms", "int32", "0+", default=60000),
        F(
            "topics",
            "[]ListPartitionReassignmentsTopics",
            "0+",
            nullable="0+",
            default=NULL,
            fields=[
                F("name", "string", "0+"),
                F("partition_indexes", "[]int32", "0+"),
            ],
        ),
    ],
)

ListPartitionReassignmentsResponse = response(
    46,
    "ListPartitionReassignmentsResponse",
    valid="0",
    flexible="0+",
    fields=[
        F("throttle_time_ms", "int32", "0+"),
        F("error_code", "int16", "0+"),
        F("error_message", "string", "0+", nullable="0+"),
        F(
            "topics",
            "[]OngoingTopicReassignment",
            "0+",
            fields=[
                F("name", "string", "0+"),
                F(
                    "partitions",
                    "[]OngoingPartitionReassignment",
                    "0+",
                    fields=[
                        F("partition_index", "int32", "0+"),
                        F("replicas", "[]int32", "0+"),
                        F("adding_replicas", "[]int32", "0+"),
                        F("removing_replicas", "[]int32", "0+"),
                    ],
                ),
            ],
        ),
    ],
)

LIST_PARTITION_REASSIGNMENTS = api(
    "ListPartitionReassignments",
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
