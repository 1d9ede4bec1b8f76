"""Leader election API: ElectLeaders (43), versions 0-2 (v1: election type and a top-level error code,
v2: flexible), as Kafka's ZooKeeper-mode controller answers it.
"""

from __future__ import annotations

from kafkalite.protocol.schema import F, api, request, response

ELECTION_PREFERRED = 0
ELECTION_UNCLEAN = 1

ElectLeadersRequest = request(
    43,
    "ElectLeadersRequest",
    valid="0-2",
    flexible="2+",
    fields=[
        F("election_type", "int8", "1+", default=ELECTION_PREFERRED),
        # null: every partition of the cluster
        F(
            "topic_partitions",
            "[]TopicPartitions",
            "0+",
            nullable="0+",
            fields=[
                F("topic", "string", "0+"),
                F("partitions", "[]int32", "0+"),
            ],
        ),
        F("timeout_ms", "int32", "0+", default=60000),
    ],
)

ElectLeadersResponse = response(
    43,
    "ElectLeadersResponse",
    valid="0-2",
    flexible="2+",
    fields=[
        F("throttle_time_ms", "int32", "0+"),
        F("error_code", "int16", "1+"),
        F(
            "replica_election_results",
            "[]ReplicaElectionResult",
            "0+",
            fields=[
                F("topic", "string", "0+"),
                F(
                    "partition_result",
                    "[]PartitionResult",
                    "0+",
                    fields=[
                        F("partition_id", "int32", "0+"),
                        F("error_code", "int16", "0+"),
                        F("error_message", "string", "0+", nullable="0+"),
                    ],
                ),
            ],
        ),
    ],
)

ELECT_LEADERS = api("ElectLeaders", ElectLeadersRequest, ElectLeadersResponse)
