"""KIP-848's consumer-group APIs: ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69), versions
0-1, flexible; v1 heartbeats carry a topic regex and a member id the client made (KIP-1082).
"""

from __future__ import annotations

from kafkalite.protocol.schema import F, api, request, response

_TOPIC_PARTITIONS = [F("topic_id", "uuid", "0+"), F("partitions", "[]int32", "0+")]

ConsumerGroupHeartbeatRequest = request(
    68,
    "ConsumerGroupHeartbeatRequest",
    valid="0-1",
    flexible="0+",
    fields=[
        F("group_id", "string", "0+"),
        F("member_id", "string", "0+"),
        F("member_epoch", "int32", "0+"),
        F("instance_id", "string", "0+", nullable="0+", default=None),
        F("rack_id", "string", "0+", nullable="0+", default=None),
        F("rebalance_timeout_ms", "int32", "0+", default=-1),
        F("subscribed_topic_names", "[]string", "0+", nullable="0+", default=None),
        F("subscribed_topic_regex", "string", "1+", nullable="1+", default=None),
        F("server_assignor", "string", "0+", nullable="0+", default=None),
        F(
            "topic_partitions",
            "[]TopicPartitions",
            "0+",
            nullable="0+",
            default=None,
            fields=_TOPIC_PARTITIONS,
        ),
    ],
)

ConsumerGroupHeartbeatResponse = response(
    68,
    "ConsumerGroupHeartbeatResponse",
    valid="0-1",
    flexible="0+",
    fields=[
        F("throttle_time_ms", "int32", "0+"),
        F("error_code", "int16", "0+"),
        F("error_message", "string", "0+", nullable="0+", default=None),
        F("member_id", "string", "0+", nullable="0+", default=None),
        F("member_epoch", "int32", "0+"),
        F("heartbeat_interval_ms", "int32", "0+"),
        F(
            "assignment",
            "Assignment",
            "0+",
            nullable="0+",
            default=None,
            fields=[F("topic_partitions", "[]TopicPartitions", "0+", fields=_TOPIC_PARTITIONS)],
        ),
    ],
)

CONSUMER_GROUP_HEARTBEAT = api(
    "ConsumerGroupHeartbeat", ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse
)

ConsumerGroupDescribeRequest = request(
    69,
    "ConsumerGroupDescribeRequest",
    valid="0-1",
    flexible="0+",
    fields=[
        F("group_ids", "[]string", "0+"),
        F("include_authorized_operations", "bool", "0+"),
    ],
)

_DESCRIBED_TOPIC_PARTITIONS = [
    F("topic_id", "uuid", "0+"),
    F("topic_name", "string", "0+"),
    F("partitions", "[]int32", "0+"),
]

ConsumerGroupDescribeResponse = response(
    69,
    "ConsumerGroupDescribeResponse",
    valid="0-1",
    flexible="0+",
    fields=[
        F("throttle_time_ms", "int32", "0+"),
        F(
            "groups",
            "[]DescribedGroup",
            "0+",
            fields=[
                F("error_code", "int16", "0+"),
                F("error_message", "string", "0+", nullable="0+", default=None),
                F("group_id", "string", "0+"),
                F("group_state", "string", "0+"),
                F("group_epoch", "int32", "0+"),
                F("assignment_epoch", "int32", "0+"),
                F("assignor_name", "string", "0+"),
                F(
                    "members",
                    "[]Member",
                    "0+",
                    fields=[
                        F("member_id", "string", "0+"),
                        F("instance_id", "string", "0+", nullable="0+", default=None),
                        F("rack_id", "string", "0+", nullable="0+", default=None),
                        F("member_epoch", "int32", "0+"),
                        F("client_id", "string", "0+"),
                        F("client_host", "string", "0+"),
                        F("subscribed_topic_names", "[]string", "0+"),
                        F("subscribed_topic_regex", "string", "0+", nullable="0+", default=None),
                        F("assignment", "Assignment", "0+"),
                        F("target_assignment", "Assignment", "0+"),
                        F("member_type", "int8", "1+", default=-1, ignorable=True),
                    ],
                ),
                F("authorized_operations", "int32", "0+", default=-(2**31)),
            ],
        ),
    ],
    common={
        "Assignment": [
            F(
                "topic_partitions",
                "[]TopicPartitions",
                "0+",
                fields=_DESCRIBED_TOPIC_PARTITIONS,
            )
        ],
    },
)

CONSUMER_GROUP_DESCRIBE = api(
    "ConsumerGroupDescribe", ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse
)
