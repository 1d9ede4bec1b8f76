"""Admin APIs: CreateTopics, DeleteTopics, CreatePartitions, DeleteRecords, DescribeConfigs, AlterConfigs,
IncrementalAlterConfigs, DescribeCluster, DescribeLogDirs, AlterReplicaLogDirs, declared at the version
ranges the broker serves.
"""

from __future__ import annotations

from kafkalite.protocol.schema import NULL, F, api, request, response

# -- CreateTopics (19) ---------------------------------------------------------------------------------

CreateTopicsRequest = request(
    19,
    "CreateTopicsRequest",
    valid="0-7",
    flexible="5+",
    fields=[
        F(
            "topics",
            "[]CreatableTopic",
            "0+",
            fields=[
                F("name", "string", "0+"),
                F("num_partitions", "int32", "0+"),
                F("replication_factor", "int16", "0+"),
                F(
                    "assignments",
                    "[]CreatableReplicaAssignment",
                    "0+",
                    fields=[
                        F("partition_index", "int32", "0+"),
                        F("broker_ids", "[]int32", "0+"),
                    ],
                ),
                F(
                    "configs",
                    "[]CreatableTopicConfig",
                    "0+",
                    fields=[
                        F("name", "string", "0+"),
                        F("value", "string", "0+", nullable="0+"),
                    ],
                ),
            ],
        ),
        F("timeout_ms", "int32", "0+", default=60000),
        F("validate_only", "bool", "1+", default=False),
    ],
)

CreateTopicsResponse = response(
    19,
    "CreateTopicsResponse",
    valid="0-7",
    flexible="5+",
    fields=[
        F("throttle_time_ms", "int32", "2+", ignorable=True),
        F(
            "topics",
            "[]CreatableTopicResult",
            "0+",
            fields=[
                F("name", "string", "0+"),
                F("topic_id", "uuid", "7+", ignorable=True),
                F("error_code", "int16", "0+"),
                F("error_message", "string", "1+", nullable="0+", ignorable=True),
                F(
                    "topic_config_error_code",
                    "int16",
                    "5+",
                    tag=0,
                    tagged="5+",
                    ignorable=True,
                ),
                F("num_partitions", "int32", "5+", default=-1, ignorable=True),
                F("replication_factor", "int16", "5+", default=-1, ignorable=True),
                F(
                    "configs",
                    "[]CreatableTopicConfigs",
                    "5+",
                    nullable="5+",
                    ignorable=True,
                    fields=[
                        F("name", "string", "5+"),
                        F("value", "string", "5+", nullable="5+"),
                        F("read_only", "bool", "5+"),
                        F("config_source", "int8", "5+", default=-1, ignorable=True),
                        F("is_sensitive", "bool", "5+"),
                    ],
                ),
            ],
        ),
    ],
)

CREATE_TOPICS = api("CreateTopics", CreateTopicsRequest, CreateTopicsResponse)

# -- DeleteTopics (20) ---------------------------------------------------------------------------------

DeleteTopicsRequest = request(
    20,
    "DeleteTopicsRequest",
    valid="0-6",
    flexible="4+",
    fields=[
        F(
            "topics",
            "[]DeleteTopicState",
            "6+",
            fields=[
                F("name", "string", "6+", nullable="6+", default=NULL),
                F("topic_id", "uuid", "6+"),
            ],
        ),
        F("topic_names", "[]string", "0-5", ignorable=True),
        F("timeout_ms", "int32", "0+"),
    ],
)

DeleteTopicsResponse = response(
    20,
    "DeleteTopicsResponse",
    valid="0-6",
    flexible="4+",
    fields=[
        F("throttle_time_ms", "int32", "1+", ignorable=True),
        F(
            "responses",
            "[]DeletableTopicResult",
            "0+",
            fields=[
                F("name", "string", "0+", nullable="6+"),
                F("topic_id", "uuid", "6+", ignorable=True),
                F("error_code", "int16", "0+"),
                F("error_message", "string", "5+", nullable="5+", ignorable=True, default=NULL),
            ],
        ),
    ],
)

DELETE_TOPICS = api("DeleteTopics", DeleteTopicsRequest, DeleteTopicsResponse)

# -- DeleteRecords (21) --------------------------------------------------------------------------------

DeleteRecordsRequest = request(
    21,
    "DeleteRecordsRequest",
    valid="0-2",
    flexible="2+",
    fields=[
        F(
            "topics",
            "[]DeleteRecordsTopic",
            "0+",
            fields=[
                F("name", "string", "0+"),
                F(
                    "partitions",
                    "[]DeleteRecordsPartition",
                    "0+",
                    fields=[
                        F("partition_index", "int32", "0+"),
                        F("offset", "int64", "0+"),
                    ],
                ),
            ],
        ),
        F("timeout_ms", "int32", "0+"),
    ],
)

DeleteRecordsResponse = response(
    21,
    "DeleteRecordsResponse",
    valid="0-2",
    flexible="2+",
    fields=[
        F("throttle_time_ms", "int32", "0+"),
        F(
            "topics",
            "[]DeleteRecordsTopicResult",
            "0+",
            fields=[
                F("name", "string", "0+"),
                F(
                    "partitions",
                    "[]DeleteRecordsPartitionResult",
                    "0+",
                    fields=[
                        F("partition_index", "int32", "0+"),
                        F("low_watermark", "int64", "0+"),
                        F("error_code", "int16", "0+"),
                    ],
                ),
            ],
        ),
    ],
)

DELETE_RECORDS = api("DeleteRecords", DeleteRecordsRequest, DeleteRecordsResponse)

# -- DescribeConfigs (32) ------------------------------------------------------------------------------

DescribeConfigsRequest = request(
    32,
    "DescribeConfigsRequest",
    valid="0-4",
    flexible="4+",
    fields=[
        F(
            "resources",
            "[]DescribeConfigsResource",
            "0+",
            fields=[
                F("resource_type", "int8", "0+"),
                F("resource_name", "string", "0+"),
                F("configuration_keys", "[]string", "0+", nullable="0+"),
            ],
        ),
        F("include_synonyms", "bool", "1+", default=False),
        F("include_documentation", "bool", "3+", default=False),
    ],
)

DescribeConfigsResponse = response(
    32,
    "DescribeConfigsResponse",
    valid="0-4",
    flexible="4+",
    fields=[
        F("throttle_time_ms", "int32", "0+"),
        F(
            "results",
            "[]DescribeConfigsResult",
            "0+",
            fields=[
                F("error_code", "int16", "0+"),
                F("error_message", "string", "0+", nullable="0+"),
                F("resource_type", "int8", "0+"),
                F("resource_name", "string", "0+"),
                F(
                    "configs",
                    "[]DescribeConfigsResourceResult",
                    "0+",
                    fields=[
                        F("name", "string", "0+"),
                        F("value", "string", "0+", nullable="0+"),
                        F("read_only", "bool", "0+"),
                        F("config_source", "int8", "1+", default=-1, ignorable=True),
                        F("is_default", "bool", "0"),
                        F("is_sensitive", "bool", "0+"),
                        F(
                            "synonyms",
                            "[]DescribeConfigsSynonym",
                            "1+",
                            ignorable=True,
                            fields=[
                                F("name", "string", "1+"),
                                F("value", "string", "1+", nullable="0+"),
                                F("source", "int8", "1+"),
                            ],
                        ),
                        F("config_type", "int8", "3+", default=0, ignorable=True),
                        F("documentation", "string", "3+", nullable="0+", ignorable=True),
                    ],
                ),
            ],
        ),
    ],
)

DESCRIBE_CONFIGS = api("DescribeConfigs", DescribeConfigsRequest, DescribeConfigsResponse)

# -- AlterConfigs (33) ---------------------------------------------------------------------------------

AlterConfigsRequest = request(
    33,
    "AlterConfigsRequest",
    valid="0-2",
    flexible="2+",
    fields=[
        F(
            "resources",
            "[]AlterConfigsResource",
            "0+",
            fields=[
                F("resource_type", "int8", "0+"),
                F("resource_name", "string", "0+"),
                F(
                    "configs",
                    "[]AlterableConfig",
                    "0+",
                    fields=[
                        F("name", "string", "0+"),
                        F("value", "string", "0+", nullable="0+"),
                    ],
                ),
            ],
        ),
        F("validate_only", "bool", "0+"),
    ],
)

AlterConfigsResponse = response(
    33,
    "AlterConfigsResponse",
    valid="0-2",
    flexible="2+",
    fields=[
        F("throttle_time_ms", "int32", "0+"),
        F(
            "responses",
            "[]AlterConfigsResourceResponse",
            "0+",
            fields=[
                F("error_code", "int16", "0+"),
                F("error_message", "string", "0+", nullable="0+"),
                F("resource_type", "int8", "0+"),
                F("resource_name", "string", "0+"),
            ],
        ),
    ],
)

ALTER_CONFIGS = api("AlterConfigs", AlterConfigsRequest, AlterConfigsResponse)

# -- AlterReplicaLogDirs (34) ---------------------------------------------------------------------------

AlterReplicaLogDirsRequest = request(
    34,
    "AlterReplicaLogDirsRequest",
    valid="0-2",
    flexible="2+",
    fields=[
        F(
            "dirs",
            "[]AlterReplicaLogDir",
            "0+",
            fields=[
                F("path", "string", "0+"),
                F(
                    "topics",
                    "[]AlterReplicaLogDirTopic",
                    "0+",
                    fields=[
                        F("name", "string", "0+"),
                        F("partitions", "[]int32", "0+"),
                    ],
                ),
            ],
        ),
    ],
)

AlterReplicaLogDirsResponse = response(
    34,
    "AlterReplicaLogDirsResponse",
    valid="0-2",
    flexible="2+",
    fields=[
        F("throttle_time_ms", "int32", "0+"),
        F(
            "results",
            "[]AlterReplicaLogDirTopicResult",
            "0+",
            fields=[
                F("topic_name", "string", "0+"),
                F(
                    "partitions",
                    "[]AlterReplicaLogDirPartitionResult",
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

ALTER_REPLICA_LOG_DIRS = api(
    "AlterReplicaLogDirs", AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse
)

# -- DescribeLogDirs (35) ------------------------------------------------------------------------------

DescribeLogDirsRequest = request(
    35,
    "DescribeLogDirsRequest",
    valid="0-4",
    flexible="2+",
    fields=[
        F(
            "topics",
            "[]DescribableLogDirTopic",
            "0+",
            nullable="0+",
            fields=[
                F("topic", "string", "0+"),
                F("partitions", "[]int32", "0+"),
            ],
        ),
    ],
)

DescribeLogDirsResponse = response(
    35,
    "DescribeLogDirsResponse",
    valid="0-4",
    flexible="2+",
    fields=[
        F("throttle_time_ms", "int32", "0+"),
        F("error_code", "int16", "3+", ignorable=True),
        F(
            "results",
            "[]DescribeLogDirsResult",
            "0+",
            fields=[
                F("error_code", "int16", "0+"),
                F("log_dir", "string", "0+"),
                F(
                    "topics",
                    "[]DescribeLogDirsTopic",
                    "0+",
                    fields=[
                        F("name", "string", "0+"),
                        F(
                            "partitions",
                            "[]DescribeLogDirsPartition",
                            "0+",
                            fields=[
                                F("partition_index", "int32", "0+"),
                                F("partition_size", "int64", "0+"),
                                F("offset_lag", "int64", "0+"),
                                F("is_future_key", "bool", "0+"),
                            ],
                        ),
                    ],
                ),
                F("total_bytes", "int64", "4+", default=-1, ignorable=True),
                F("usable_bytes", "int64", "4+", default=-1, ignorable=True),
            ],
        ),
    ],
)

DESCRIBE_LOG_DIRS = api("DescribeLogDirs", DescribeLogDirsRequest, DescribeLogDirsResponse)

# -- CreatePartitions (37) -----------------------------------------------------------------------------

CreatePartitionsRequest = request(
    37,
    "CreatePartitionsRequest",
    valid="0-3",
    flexible="2+",
    fields=[
        F(
            "topics",
            "[]CreatePartitionsTopic",
            "0+",
            fields=[
                F("name", "string", "0+"),
                F("count", "int32", "0+"),
                F(
                    "assignments",
                    "[]CreatePartitionsAssignment",
                    "0+",
                    nullable="0+",
                    fields=[F("broker_ids", "[]int32", "0+")],
                ),
            ],
        ),
        F("timeout_ms", "int32", "0+"),
        F("validate_only", "bool", "0+"),
    ],
)

CreatePartitionsResponse = response(
    37,
    "CreatePartitionsResponse",
    valid="0-3",
    flexible="2+",
    fields=[
        F("throttle_time_ms", "int32", "0+"),
        F(
            "results",
            "[]CreatePartitionsTopicResult",
            "0+",
            fields=[
                F("name", "string", "0+"),
                F("error_code", "int16", "0+"),
                F("error_message", "string", "0+", nullable="0+", default=NULL),
            ],
        ),
    ],
)

CREATE_PARTITIONS = api("CreatePartitions", CreatePartitionsRequest, CreatePartitionsResponse)

# -- IncrementalAlterConfigs (44) ----------------------------------------------------------------------

IncrementalAlterConfigsRequest = request(
    44,
    "IncrementalAlterConfigsRequest",
    valid="0-1",
    flexible="1+",
    fields=[
        F(
            "resources",
            "[]AlterConfigsResource",
            "0+",
            fields=[
                F("resource_type", "int8", "0+"),
                F("resource_name", "string", "0+"),
                F(
                    "configs",
                    "[]AlterableConfig",
                    "0+",
                    fields=[
                        F("name", "string", "0+"),
                        F("config_operation", "int8", "0+"),
                        F("value", "string", "0+", nullable="0+"),
                    ],
                ),
            ],
        ),
        F("validate_only", "bool", "0+"),
    ],
)

IncrementalAlterConfigsResponse = response(
    44,
    "IncrementalAlterConfigsResponse",
    valid="0-1",
    flexible="1+",
    fields=[
        F("throttle_time_ms", "int32", "0+"),
        F(
            "responses",
            "[]AlterConfigsResourceResponse",
            "0+",
            fields=[
                F("error_code", "int16", "0+"),
                F("error_message", "string", "0+", nullable="0+"),
                F("resource_type", "int8", "0+"),
                F("resource_name", "string", "0+"),
            ],
        ),
    ],
)

INCREMENTAL_ALTER_CONFIGS = api(
    "IncrementalAlterConfigs", IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse
)

# -- DescribeCluster (60) ------------------------------------------------------------------------------

DescribeClusterRequest = request(
    60,
    "DescribeClusterRequest",
    valid="0-1",
    flexible="0+",
    fields=[
        F("include_cluster_authorized_operations", "bool", "0+"),
        F("endpoint_type", "int8", "1+", default=1),
    ],
)

DescribeClusterResponse = response(
    60,
    "DescribeClusterResponse",
    valid="0-1",
    flexible="0+",
    fields=[
        F("throttle_time_ms", "int32", "0+"),
        F("error_code", "int16", "0+"),
        F("error_message", "string", "0+", nullable="0+", default=NULL),
        F("endpoint_type", "int8", "1+", default=1),
        F("cluster_id", "string", "0+"),
        F("controller_id", "int32", "0+", default=-1),
        F(
            "brokers",
            "[]DescribeClusterBroker",
            "0+",
            fields=[
                F("broker_id", "int32", "0+"),
                F("host", "string", "0+"),
                F("port", "int32", "0+"),
                F("rack", "string", "0+", nullable="0+", default=NULL),
            ],
        ),
        F("cluster_authorized_operations", "int32", "0+", default=-2147483648),
    ],
)

DESCRIBE_CLUSTER = api("DescribeCluster", DescribeClusterRequest, DescribeClusterResponse)
