"""KIP-932's share-group APIs: ShareGroupHeartbeat (76), ShareGroupDescribe (77), ShareFetch (78) and
ShareAcknowledge (79), flexible; v1 is Kafka 4.1's stable version (v0 was Kafka 4.0's early access), and
ShareFetch / ShareAcknowledge v2 (Kafka 4.2) add the acquire mode (KIP-1206) and RENEW (KIP-1222).

kafkalite's fetch filter (issue 35) rides on ShareFetch with Fetch's tag numbers: request tag 10035
`filter`, response tags 10035 `filtered` and 10036 `filter_error` (docs/fetch-filter.md).
"""

from __future__ import annotations

from kafkalite.protocol.messages.fetch import FILTER_ERROR_TAG, FILTER_TAG
from kafkalite.protocol.schema import NULL, F, api, request, response

ShareGroupHeartbeatRequest = request(
    76,
    "ShareGroupHeartbeatRequest",
    valid="0-1",
    flexible="0+",
    fields=[
        F("group_id", "string", "0+"),
        F("member_id", "string", "0+"),
        F("member_epoch", "int32", "0+"),
        F("rack_id", "string", "0+", nullable="0+", default=None),
        F("subscribed_topic_names", "[]string", "0+", nullable="0+", default=None),
    ],
)

_TOPIC_PARTITIONS = [F("topic_id", "uuid", "0+"), F("partitions", "[]int32", "0+")]

ShareGroupHeartbeatResponse = response(
    76,
    "ShareGroupHeartbeatResponse",
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

SHARE_GROUP_HEARTBEAT = api(
    "ShareGroupHeartbeat", ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse
)

ShareGroupDescribeRequest = request(
    77,
    "ShareGroupDescribeRequest",
    valid="0-1",
    flexible="0+",
    fields=[
        F("group_ids", "[]string", "0+"),
        F("include_authorized_operations", "bool", "0+"),
    ],
)

ShareGroupDescribeResponse = response(
    77,
    "ShareGroupDescribeResponse",
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
                        F("rack_id", "string", "0+", nullable="0+", default=None),
                        F("member_epoch", "int32", "0+"),
                        F("client_id", "string", "0+"),
                        F("client_host", "string", "0+"),
                        F("subscribed_topic_names", "[]string", "0+"),
                        F(
                            "assignment",
                            "Assignment",
                            "0+",
                            fields=[
                                F(
                                    "topic_partitions",
                                    "[]TopicPartitions",
                                    "0+",
                                    fields=[
                                        F("topic_id", "uuid", "0+"),
                                        F("topic_name", "string", "0+"),
                                        F("partitions", "[]int32", "0+"),
                                    ],
                                )
                            ],
                        ),
                    ],
                ),
                F("authorized_operations", "int32", "0+", default=-2147483648),
            ],
        ),
    ],
)

SHARE_GROUP_DESCRIBE = api(
    "ShareGroupDescribe", ShareGroupDescribeRequest, ShareGroupDescribeResponse
)

_ACK_BATCHES = F(
    "acknowledgement_batches",
    "[]AcknowledgementBatch",
    "0+",
    fields=[
        F("first_offset", "int64", "0+"),
        F("last_offset", "int64", "0+"),
        F("acknowledge_types", "[]int8", "0+"),
    ],
)

ShareFetchRequest = request(
    78,
    "ShareFetchRequest",
    valid="0-2",
    flexible="0+",
    fields=[
        F("group_id", "string", "0+", nullable="0+", default=None),
        F("member_id", "string", "0+", nullable="0+"),
        F("share_session_epoch", "int32", "0+"),
        F("max_wait_ms", "int32", "0+"),
        F("min_bytes", "int32", "0+"),
        F("max_bytes", "int32", "0+", default=0x7FFFFFFF),
        F("max_records", "int32", "1+"),
        F("batch_size", "int32", "1+"),
        F("share_acquire_mode", "int8", "2+"),  # 0 batch-optimized, 1 record-limit
        F("is_renew_ack", "bool", "2+"),
        F(
            "topics",
            "[]FetchTopic",
            "0+",
            fields=[
                F("topic_id", "uuid", "0+"),
                F(
                    "partitions",
                    "[]FetchPartition",
                    "0+",
                    fields=[
                        F("partition_index", "int32", "0+"),
                        F("partition_max_bytes", "int32", "0"),
                        _ACK_BATCHES,
                    ],
                ),
            ],
        ),
        F(
            "forgotten_topics_data",
            "[]ForgottenTopic",
            "0+",
            fields=[F("topic_id", "uuid", "0+"), F("partitions", "[]int32", "0+")],
        ),
        F(
            "filter",
            "string",
            "0+",
            nullable="0+",
            tag=FILTER_TAG,
            tagged="0+",
            ignorable=True,
            default=NULL,
        ),
    ],
)

_LEADER = F(
    "current_leader",
    "LeaderIdAndEpoch",
    "0+",
    fields=[F("leader_id", "int32", "0+"), F("leader_epoch", "int32", "0+")],
)

_NODE_ENDPOINTS = F(
    "node_endpoints",
    "[]NodeEndpoint",
    "0+",
    fields=[
        F("node_id", "int32", "0+"),
        F("host", "string", "0+"),
        F("port", "int32", "0+"),
        F("rack", "string", "0+", nullable="0+", default=None),
    ],
)

ShareFetchResponse = response(
    78,
    "ShareFetchResponse",
    valid="0-2",
    flexible="0+",
    fields=[
        F("throttle_time_ms", "int32", "0+"),
        F("error_code", "int16", "0+"),
        F("error_message", "string", "0+", nullable="0+", default=None),
        F("acquisition_lock_timeout_ms", "int32", "1+"),
        F(
            "responses",
            "[]ShareFetchableTopicResponse",
            "0+",
            fields=[
                F("topic_id", "uuid", "0+"),
                F(
                    "partitions",
                    "[]PartitionData",
                    "0+",
                    fields=[
                        F("partition_index", "int32", "0+"),
                        F("error_code", "int16", "0+"),
                        F("error_message", "string", "0+", nullable="0+", default=None),
                        F("acknowledge_error_code", "int16", "0+"),
                        F("acknowledge_error_message", "string", "0+", nullable="0+", default=None),
                        _LEADER,
                        F("records", "records", "0+", nullable="0"),
                        F(
                            "acquired_records",
                            "[]AcquiredRecords",
                            "0+",
                            fields=[
                                F("first_offset", "int64", "0+"),
                                F("last_offset", "int64", "0+"),
                                F("delivery_count", "int16", "0+"),
                            ],
                        ),
                    ],
                ),
            ],
        ),
        _NODE_ENDPOINTS,
        F("filtered", "bool", "0+", tag=FILTER_TAG, tagged="0+", ignorable=True),
        F(
            "filter_error",
            "string",
            "0+",
            nullable="0+",
            tag=FILTER_ERROR_TAG,
            tagged="0+",
            ignorable=True,
            default=NULL,
        ),
    ],
)

SHARE_FETCH = api("ShareFetch", ShareFetchRequest, ShareFetchResponse)

ShareAcknowledgeRequest = request(
    79,
    "ShareAcknowledgeRequest",
    valid="0-2",
    flexible="0+",
    fields=[
        F("group_id", "string", "0+", nullable="0+", default=None),
        F("member_id", "string", "0+", nullable="0+"),
        F("share_session_epoch", "int32", "0+"),
        F("is_renew_ack", "bool", "2+"),
        F(
            "topics",
            "[]AcknowledgeTopic",
            "0+",
            fields=[
                F("topic_id", "uuid", "0+"),
                F(
                    "partitions",
                    "[]AcknowledgePartition",
                    "0+",
                    fields=[F("partition_index", "int32", "0+"), _ACK_BATCHES],
                ),
            ],
        ),
    ],
)

ShareAcknowledgeResponse = response(
    79,
    "ShareAcknowledgeResponse",
    valid="0-2",
    flexible="0+",
    fields=[
        F("throttle_time_ms", "int32", "0+"),
        F("error_code", "int16", "0+"),
        F("error_message", "string", "0+", nullable="0+", default=None),
        F("acquisition_lock_timeout_ms", "int32", "2+"),
        F(
            "responses",
            "[]ShareAcknowledgeTopicResponse",
            "0+",
            fields=[
                F("topic_id", "uuid", "0+"),
                F(
                    "partitions",
                    "[]PartitionData",
                    "0+",
                    fields=[
                        F("partition_index", "int32", "0+"),
                        F("error_code", "int16", "0+"),
                        F("error_message", "string", "0+", nullable="0+", default=None),
                        _LEADER,
                    ],
                ),
            ],
        ),
        _NODE_ENDPOINTS,
    ],
)

SHARE_ACKNOWLEDGE = api("ShareAcknowledge", ShareAcknowledgeRequest, ShareAcknowledgeResponse)
