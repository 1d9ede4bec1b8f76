"""The inter-broker APIs of ZooKeeper mode (Kafka 3.x): LeaderAndIsr v0-7, StopReplica v0-4,
UpdateMetadata v0-8, ControlledShutdown v0-3 and AlterPartition v0-3 (KIP-497/704/841/903).

The controller sends the first three to brokers; brokers send the last two to the controller.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kafkalite.protocol.schema import NULL, F, api, request, response

# ---------------------------------------------------------------------------
# LeaderAndIsr (4): v2 groups partitions by topic, v4+ flexible, v5 topic ids and the request type,
# v6 leader recovery state (KIP-704), v7 the KRaft-controller flag (KIP-866)

_LEADER_AND_ISR_PARTITION = [
    F("topic_name", "string", "0-1", ignorable=True),
    F("partition_index", "int32", "0+"),
    F("controller_epoch", "int32", "0+"),
    F("leader", "int32", "0+"),
    F("leader_epoch", "int32", "0+"),
    F("isr", "[]int32", "0+"),
    F("partition_epoch", "int32", "0+"),  # the partition state znode's version
    F("replicas", "[]int32", "0+"),
    F("adding_replicas", "[]int32", "3+", ignorable=True),
    F("removing_replicas", "[]int32", "3+", ignorable=True),
    F("is_new", "bool", "1+", default=False, ignorable=True),
    F("leader_recovery_state", "int8", "6+", default=0),
]

LeaderAndIsrRequest = request(
    4,
    "LeaderAndIsrRequest",
    valid="0-7",
    flexible="4+",
    fields=[
        F("controller_id", "int32", "0+"),
        F("is_kraft_controller", "bool", "7+", default=False),
        F("controller_epoch", "int32", "0+"),
        F("broker_epoch", "int64", "2+", default=-1, ignorable=True),
        F("type", "int8", "5+"),
        F("ungrouped_partition_states", "[]LeaderAndIsrPartitionState", "0-1"),
        F(
            "topic_states",
            "[]LeaderAndIsrTopicState",
            "2+",
            fields=[
                F("topic_name", "string", "2+"),
                F("topic_id", "uuid", "5+", ignorable=True),
                F("partition_states", "[]LeaderAndIsrPartitionState", "2+"),
            ],
        ),
        F(
            "live_leaders",
            "[]LeaderAndIsrLiveLeader",
            "0+",
            fields=[
                F("broker_id", "int32", "0+"),
                F("host_name", "string", "0+"),
                F("port", "int32", "0+"),
            ],
        ),
    ],
    common={"LeaderAndIsrPartitionState": _LEADER_AND_ISR_PARTITION},
)

LeaderAndIsrResponse = response(
    4,
    "LeaderAndIsrResponse",
    valid="0-7",
    flexible="4+",
    fields=[
        F("error_code", "int16", "0+"),
        F("partition_errors", "[]LeaderAndIsrPartitionError", "0-4"),
        F(
            "topics",
            "[]LeaderAndIsrTopicError",
            "5+",
            fields=[
                F("topic_id", "uuid", "5+"),
                F("partition_errors", "[]LeaderAndIsrPartitionError", "5+"),
            ],
        ),
    ],
    common={
        "LeaderAndIsrPartitionError": [
            F("topic_name", "string", "0-4"),
            F("partition_index", "int32", "0+"),
            F("error_code", "int16", "0+"),
        ]
    },
)

LEADER_AND_ISR = api("LeaderAndIsr", LeaderAndIsrRequest, LeaderAndIsrResponse)

# ---------------------------------------------------------------------------
# StopReplica (5): v1 broker epoch and per-topic grouping, v2+ flexible, v3 per-partition leader
# epoch and delete flag, v4 the KRaft-controller flag

StopReplicaRequest = request(
    5,
    "StopReplicaRequest",
    valid="0-4",
    flexible="2+",
    fields=[
        F("controller_id", "int32", "0+"),
        F("is_kraft_controller", "bool", "4+", default=False),
        F("controller_epoch", "int32", "0+"),
        F("broker_epoch", "int64", "1+", default=-1, ignorable=True),
        F("delete_partitions", "bool", "0-2"),
        F(
            "ungrouped_partitions",
            "[]StopReplicaPartitionV0",
            "0",
            fields=[F("topic_name", "string", "0"), F("partition_index", "int32", "0")],
        ),
        F(
            "topics",
            "[]StopReplicaTopicV1",
            "1-2",
            fields=[F("name", "string", "1-2"), F("partition_indexes", "[]int32", "1-2")],
        ),
        F(
            "topic_states",
            "[]StopReplicaTopicState",
            "3+",
            fields=[
                F("topic_name", "string", "3+"),
                F(
                    "partition_states",
                    "[]StopReplicaPartitionState",
                    "3+",
                    fields=[
                        F("partition_index", "int32", "3+"),
                        F("leader_epoch", "int32", "3+", default=-1),
                        F("delete_partition", "bool", "3+"),
                    ],
                ),
            ],
        ),
    ],
)

StopReplicaResponse = response(
    5,
    "StopReplicaResponse",
    valid="0-4",
    flexible="2+",
    fields=[
        F("error_code", "int16", "0+"),
        F(
            "partition_errors",
            "[]StopReplicaPartitionError",
            "0+",
            fields=[
                F("topic_name", "string", "0+"),
                F("partition_index", "int32", "0+"),
                F("error_code", "int16", "0+"),
            ],
        ),
    ],
)

STOP_REPLICA = api("StopReplica", StopReplicaRequest, StopReplicaResponse)

# ---------------------------------------------------------------------------
# UpdateMetadata (6): v1 endpoints, v2 rack, v3 listener names, v4 offline replicas, v5 broker epoch
# and per-topic grouping, v6+ flexible, v7 topic ids, v8 the KRaft-controller flag

UpdateMetadataRequest = request(
    6,
    "UpdateMetadataRequest",
    valid="0-8",
    flexible="6+",
    fields=[
        F("controller_id", "int32", "0+"),
        F("is_kraft_controller", "bool", "8+", default=False),
        F("controller_epoch", "int32", "0+"),
        F("broker_epoch", "int64", "5+", default=-1, ignorable=True),
        F("ungrouped_partition_states", "[]UpdateMetadataPartitionState", "0-4"),
        F(
            "topic_states",
            "[]UpdateMetadataTopicState",
            "5+",
            fields=[
                F("topic_name", "string", "5+"),
                F("topic_id", "uuid", "7+", ignorable=True),
                F("partition_states", "[]UpdateMetadataPartitionState", "5+"),
            ],
        ),
        F(
            "live_brokers",
            "[]UpdateMetadataBroker",
            "0+",
            fields=[
                F("id", "int32", "0+"),
                F("v0_host", "string", "0", ignorable=True),
                F("v0_port", "int32", "0", ignorable=True),
                F(
                    "endpoints",
                    "[]UpdateMetadataEndpoint",
                    "1+",
                    ignorable=True,
                    fields=[
                        F("port", "int32", "1+"),
                        F("host", "string", "1+"),
                        F("listener", "string", "3+", ignorable=True),
                        F("security_protocol", "int16", "1+"),
                    ],
                ),
                F("rack", "string", "2+", nullable="0+", ignorable=True, default=NULL),
            ],
        ),
    ],
    common={
        "UpdateMetadataPartitionState": [
            F("topic_name", "string", "0-4", ignorable=True),
            F("partition_index", "int32", "0+"),
            F("controller_epoch", "int32", "0+"),
            F("leader", "int32", "0+"),
            F("leader_epoch", "int32", "0+"),
            F("isr", "[]int32", "0+"),
            F("zk_version", "int32", "0+"),
            F("replicas", "[]int32", "0+"),
            F("offline_replicas", "[]int32", "4+", ignorable=True),
        ]
    },
)

UpdateMetadataResponse = response(
    6,
    "UpdateMetadataResponse",
    valid="0-8",
    flexible="6+",
    fields=[F("error_code", "int16", "0+")],
)

UPDATE_METADATA = api("UpdateMetadata", UpdateMetadataRequest, UpdateMetadataResponse)

# ---------------------------------------------------------------------------
# ControlledShutdown (7): v0 has a request header without a client id, v2 the broker epoch, v3+ flexible

ControlledShutdownRequest = request(
    7,
    "ControlledShutdownRequest",
    valid="0-3",
    flexible="3+",
    fields=[
        F("broker_id", "int32", "0+"),
        F("broker_epoch", "int64", "2+", default=-1, ignorable=True),
    ],
)

ControlledShutdownResponse = response(
    7,
    "ControlledShutdownResponse",
    valid="0-3",
    flexible="3+",
    fields=[
        F("error_code", "int16", "0+"),
        F(
            "remaining_partitions",
            "[]RemainingPartition",
            "0+",
            fields=[F("topic_name", "string", "0+"), F("partition_index", "int32", "0+")],
        ),
    ],
)

CONTROLLED_SHUTDOWN = api(
    "ControlledShutdown", ControlledShutdownRequest, ControlledShutdownResponse
)

# ---------------------------------------------------------------------------
# AlterPartition (56, KIP-497): a leader asks the controller to change its ISR. Always flexible;
# v1 leader recovery state (KIP-704), v2 topic ids (KIP-841), v3 ISR members with broker epochs
# (KIP-903)

AlterPartitionRequest = request(
    56,
    "AlterPartitionRequest",
    valid="0-3",
    flexible="0+",
    fields=[
        F("broker_id", "int32", "0+"),
        F("broker_epoch", "int64", "0+", default=-1),
        F(
            "topics",
            "[]TopicData",
            "0+",
            fields=[
                F("topic_name", "string", "0-1", ignorable=True),
                F("topic_id", "uuid", "2+", ignorable=True),
                F(
                    "partitions",
                    "[]PartitionData",
                    "0+",
                    fields=[
                        F("partition_index", "int32", "0+"),
                        F("leader_epoch", "int32", "0+"),
                        F("new_isr", "[]int32", "0-2"),
                        F(
                            "new_isr_with_epochs",
                            "[]BrokerState",
                            "3+",
                            fields=[
                                F("broker_id", "int32", "3+"),
                                F("broker_epoch", "int64", "3+", default=-1),
                            ],
                        ),
                        F("leader_recovery_state", "int8", "1+", default=0),
                        F("partition_epoch", "int32", "0+"),
                    ],
                ),
            ],
        ),
    ],
)

AlterPartitionResponse = response(
    56,
    "AlterPartitionResponse",
    valid="0-3",
    flexible="0+",
    fields=[
        F("throttle_time_ms", "int32", "0+"),
        F("error_code", "int16", "0+"),
        F(
            "topics",
            "[]TopicData",
            "0+",
            fields=[
                F("topic_name", "string", "0-1", ignorable=True),
                F("topic_id", "uuid", "2+", ignorable=True),
                F(
                    "partitions",
                    "[]PartitionData",
                    "0+",
                    fields=[
                        F("partition_index", "int32", "0+"),
                        F("error_code", "int16", "0+"),
                        F("leader_id", "int32", "0+"),
                        F("leader_epoch", "int32", "0+"),
                        F("isr", "[]int32", "0+"),
                        F("leader_recovery_state", "int8", "1+", default=0, ignorable=True),
                        F("partition_epoch", "int32", "0+"),
                    ],
                ),
            ],
        ),
    ],
)

ALTER_PARTITION = api("AlterPartition", AlterPartitionRequest, AlterPartitionResponse)


def grouped_partition_states(
    request: Any, grouped: bool, with_ids: bool
) -> Iterator[tuple[str, Any, Any]]:
    """(topic, topic id or None, partition state) of a LeaderAndIsr / UpdateMetadata request,
    whether its partition states come grouped by topic (`grouped`: LeaderAndIsr v2+,
    UpdateMetadata v5+; topic ids when `with_ids`) or in one flat list naming their topics."""
    if grouped:
        for t in request.topic_states:
            for ps in t.partition_states:
                yield t.topic_name, (t.topic_id if with_ids else None), ps
    else:
        for ps in request.ungrouped_partition_states:
            yield ps.topic_name, None, ps
