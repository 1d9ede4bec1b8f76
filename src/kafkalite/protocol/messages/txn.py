"""Idempotent and transactional producer APIs: InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn,
EndTxn, WriteTxnMarkers, TxnOffsetCommit, and the DescribeProducers/ListTransactions/DescribeTransactions admin APIs.
"""

from __future__ import annotations

from kafkalite.protocol.schema import NULL, F, api, request, response

# ---------------------------------------------------------------------------
# InitProducerId (22)

InitProducerIdRequest = request(
    22,
    "InitProducerIdRequest",
    valid="0-4",
    flexible="2+",
    fields=[
        F("transactional_id", "string", "0+", nullable="0+"),
        F("transaction_timeout_ms", "int32", "0+"),
        F("producer_id", "int64", "3+", default=-1),
        F("producer_epoch", "int16", "3+", default=-1),
    ],
)

InitProducerIdResponse = response(
    22,
    "InitProducerIdResponse",
    valid="0-4",
    flexible="2+",
    fields=[
        F("throttle_time_ms", "int32", "0+", ignorable=True),
        F("error_code", "int16", "0+"),
        F("producer_id", "int64", "0+", default=-1),
        F("producer_epoch", "int16", "0+"),
    ],
)

INIT_PRODUCER_ID = api("InitProducerId", InitProducerIdRequest, InitProducerIdResponse)

# ---------------------------------------------------------------------------
# AddPartitionsToTxn (24): versions 0-3 are the client form (one transaction per request); 4+ the
# broker form (KIP-890: several transactions, VerifyOnly asks whether partitions are in them), 5 adds
# TRANSACTION_ABORTABLE

AddPartitionsToTxnRequest = request(
    24,
    "AddPartitionsToTxnRequest",
    valid="0-5",
    flexible="3+",
    fields=[
        F(
            "transactions",
            "[]AddPartitionsToTxnTransaction",
            "4+",
            fields=[
                F("transactional_id", "string", "4+"),
                F("producer_id", "int64", "4+"),
                F("producer_epoch", "int16", "4+"),
                F("verify_only", "bool", "4+", default=False),
                F("topics", "[]AddPartitionsToTxnTopic", "4+"),
            ],
        ),
        F("v3_and_below_transactional_id", "string", "0-3"),
        F("v3_and_below_producer_id", "int64", "0-3"),
        F("v3_and_below_producer_epoch", "int16", "0-3"),
        F("v3_and_below_topics", "[]AddPartitionsToTxnTopic", "0-3"),
    ],
    common={
        "AddPartitionsToTxnTopic": [
            F("name", "string", "0+"),
            F("partitions", "[]int32", "0+"),
        ],
    },
)

AddPartitionsToTxnResponse = response(
    24,
    "AddPartitionsToTxnResponse",
    valid="0-5",
    flexible="3+",
    fields=[
        F("throttle_time_ms", "int32", "0+"),
        F("error_code", "int16", "4+", ignorable=True),
        F(
            "results_by_transaction",
            "[]AddPartitionsToTxnResult",
            "4+",
            fields=[
                F("transactional_id", "string", "4+"),
                F("topic_results", "[]AddPartitionsToTxnTopicResult", "4+"),
            ],
        ),
        F("results_by_topic_v3_and_below", "[]AddPartitionsToTxnTopicResult", "0-3"),
    ],
    common={
        "AddPartitionsToTxnTopicResult": [
            F("name", "string", "0+"),
            F("results_by_partition", "[]AddPartitionsToTxnPartitionResult", "0+"),
        ],
        "AddPartitionsToTxnPartitionResult": [
            F("partition_index", "int32", "0+"),
            F("partition_error_code", "int16", "0+"),
        ],
    },
)

ADD_PARTITIONS_TO_TXN = api(
    "AddPartitionsToTxn", AddPartitionsToTxnRequest, AddPartitionsToTxnResponse
)

# ---------------------------------------------------------------------------
# AddOffsetsToTxn (25)

AddOffsetsToTxnRequest = request(
    25,
    "AddOffsetsToTxnRequest",
    valid="0-3",
    flexible="3+",
    fields=[
        F("transactional_id", "string", "0+"),
        F("producer_id", "int64", "0+"),
        F("producer_epoch", "int16", "0+"),
        F("group_id", "string", "0+"),
    ],
)

AddOffsetsToTxnResponse = response(
    25,
    "AddOffsetsToTxnResponse",
    valid="0-3",
    flexible="3+",
    fields=[
        F("throttle_time_ms", "int32", "0+"),
        F("error_code", "int16", "0+"),
    ],
)

ADD_OFFSETS_TO_TXN = api("AddOffsetsToTxn", AddOffsetsToTxnRequest, AddOffsetsToTxnResponse)

# ---------------------------------------------------------------------------
# EndTxn (26)

EndTxnRequest = request(
    26,
    "EndTxnRequest",
    valid="0-3",
    flexible="3+",
    fields=[
        F("transactional_id", "string", "0+"),
        F("producer_id", "int64", "0+"),
        F("producer_epoch", "int16", "0+"),
        F("committed", "bool", "0+"),
    ],
)

EndTxnResponse = response(
    26,
    "EndTxnResponse",
    valid="0-3",
    flexible="3+",
    fields=[
        F("throttle_time_ms", "int32", "0+"),
        F("error_code", "int16", "0+"),
    ],
)

END_TXN = api("EndTxn", EndTxnRequest, EndTxnResponse)

# ---------------------------------------------------------------------------
# WriteTxnMarkers (27): coordinator -> partition leaders

WriteTxnMarkersRequest = request(
    27,
    "WriteTxnMarkersRequest",
    valid="0-1",
    flexible="1+",
    fields=[
        F(
            "markers",
            "[]WritableTxnMarker",
            "0+",
            fields=[
                F("producer_id", "int64", "0+"),
                F("producer_epoch", "int16", "0+"),
                F("transaction_result", "bool", "0+"),
                F(
                    "topics",
                    "[]WritableTxnMarkerTopic",
                    "0+",
                    fields=[
                        F("name", "string", "0+"),
                        F("partition_indexes", "[]int32", "0+"),
                    ],
                ),
                F("coordinator_epoch", "int32", "0+"),
            ],
        ),
    ],
)

WriteTxnMarkersResponse = response(
    27,
    "WriteTxnMarkersResponse",
    valid="0-1",
    flexible="1+",
    fields=[
        F(
            "markers",
            "[]WritableTxnMarkerResult",
            "0+",
            fields=[
                F("producer_id", "int64", "0+"),
                F(
                    "topics",
                    "[]WritableTxnMarkerTopicResult",
                    "0+",
                    fields=[
                        F("name", "string", "0+"),
                        F(
                            "partitions",
                            "[]WritableTxnMarkerPartitionResult",
                            "0+",
                            fields=[
                                F("partition_index", "int32", "0+"),
                                F("error_code", "int16", "0+"),
                            ],
                        ),
                    ],
                ),
            ],
        ),
    ],
)

WRITE_TXN_MARKERS = api("WriteTxnMarkers", WriteTxnMarkersRequest, WriteTxnMarkersResponse)

# ---------------------------------------------------------------------------
# TxnOffsetCommit (28)

TxnOffsetCommitRequest = request(
    28,
    "TxnOffsetCommitRequest",
    valid="0-3",
    flexible="3+",
    fields=[
        F("transactional_id", "string", "0+"),
        F("group_id", "string", "0+"),
        F("producer_id", "int64", "0+"),
        F("producer_epoch", "int16", "0+"),
        F("generation_id", "int32", "3+", default=-1),
        F("member_id", "string", "3+", default=""),
        F("group_instance_id", "string", "3+", nullable="3+", default=NULL),
        F(
            "topics",
            "[]TxnOffsetCommitRequestTopic",
            "0+",
            fields=[
                F("name", "string", "0+"),
                F(
                    "partitions",
                    "[]TxnOffsetCommitRequestPartition",
                    "0+",
                    fields=[
                        F("partition_index", "int32", "0+"),
                        F("committed_offset", "int64", "0+"),
                        F("committed_leader_epoch", "int32", "2+", default=-1, ignorable=True),
                        F("committed_metadata", "string", "0+", nullable="0+"),
                    ],
                ),
            ],
        ),
    ],
)

TxnOffsetCommitResponse = response(
    28,
    "TxnOffsetCommitResponse",
    valid="0-3",
    flexible="3+",
    fields=[
        F("throttle_time_ms", "int32", "0+"),
        F(
            "topics",
            "[]TxnOffsetCommitResponseTopic",
            "0+",
            fields=[
                F("name", "string", "0+"),
                F(
                    "partitions",
                    "[]TxnOffsetCommitResponsePartition",
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

TXN_OFFSET_COMMIT = api("TxnOffsetCommit", TxnOffsetCommitRequest, TxnOffsetCommitResponse)

# ---------------------------------------------------------------------------
# DescribeProducers (61)

DescribeProducersRequest = request(
    61,
    "DescribeProducersRequest",
    valid="0",
    flexible="0+",
    fields=[
        F(
            "topics",
            "[]TopicRequest",
            "0+",
            fields=[
                F("name", "string", "0+"),
                F("partition_indexes", "[]int32", "0+"),
            ],
        ),
    ],
)

DescribeProducersResponse = response(
    61,
    "DescribeProducersResponse",
    valid="0",
    flexible="0+",
    fields=[
        F("throttle_time_ms", "int32", "0+"),
        F(
            "topics",
            "[]TopicResponse",
            "0+",
            fields=[
                F("name", "string", "0+"),
                F(
                    "partitions",
                    "[]PartitionResponse",
                    "0+",
                    fields=[
                        F("partition_index", "int32", "0+"),
                        F("error_code", "int16", "0+"),
                        F("error_message", "string", "0+", nullable="0+", default=NULL),
                        F(
                            "active_producers",
                            "[]ProducerState",
                            "0+",
                            fields=[
                                F("producer_id", "int64", "0+"),
                                F("producer_epoch", "int32", "0+"),
                                F("last_sequence", "int32", "0+", default=-1),
                                F("last_timestamp", "int64", "0+", default=-1),
                                F("coordinator_epoch", "int32", "0+"),
                                F("current_txn_start_offset", "int64", "0+", default=-1),
                            ],
                        ),
                    ],
                ),
            ],
        ),
    ],
)

DESCRIBE_PRODUCERS = api("DescribeProducers", DescribeProducersRequest, DescribeProducersResponse)

# ---------------------------------------------------------------------------
# DescribeTransactions (65)

DescribeTransactionsRequest = request(
    65,
    "DescribeTransactionsRequest",
    valid="0",
    flexible="0+",
    fields=[
        F("transactional_ids", "[]string", "0+"),
    ],
)

DescribeTransactionsResponse = response(
    65,
    "DescribeTransactionsResponse",
    valid="0",
    flexible="0+",
    fields=[
        F("throttle_time_ms", "int32", "0+"),
        F(
            "transaction_states",
            "[]TransactionState",
            "0+",
            fields=[
                F("error_code", "int16", "0+"),
                F("transactional_id", "string", "0+"),
                F("transaction_state", "string", "0+"),
                F("transaction_timeout_ms", "int32", "0+"),
                F("transaction_start_time_ms", "int64", "0+"),
                F("producer_id", "int64", "0+"),
                F("producer_epoch", "int16", "0+"),
                F(
                    "topics",
                    "[]TopicData",
                    "0+",
                    fields=[
                        F("topic", "string", "0+"),
                        F("partitions", "[]int32", "0+"),
                    ],
                ),
            ],
        ),
    ],
)

DESCRIBE_TRANSACTIONS = api(
    "DescribeTransactions", DescribeTransactionsRequest, DescribeTransactionsResponse
)

# ---------------------------------------------------------------------------
# ListTransactions (66)

ListTransactionsRequest = request(
    66,
    "ListTransactionsRequest",
    valid="0-1",
    flexible="0+",
    fields=[
        F("state_filters", "[]string", "0+"),
        F("producer_id_filters", "[]int64", "0+"),
        F("duration_filter", "int64", "1+", default=-1),  # KIP-994
    ],
)

ListTransactionsResponse = response(
    66,
    "ListTransactionsResponse",
    valid="0-1",
    flexible="0+",
    fields=[
        F("throttle_time_ms", "int32", "0+"),
        F("error_code", "int16", "0+"),
        F("unknown_state_filters", "[]string", "0+"),
        F(
            "transaction_states",
            "[]TransactionState",
            "0+",
            fields=[
                F("transactional_id", "string", "0+"),
                F("producer_id", "int64", "0+"),
                F("transaction_state", "string", "0+"),
            ],
        ),
    ],
)

LIST_TRANSACTIONS = api("ListTransactions", ListTransactionsRequest, ListTransactionsResponse)
