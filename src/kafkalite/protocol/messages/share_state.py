"""KIP-932's inter-broker share-state APIs, v0 and flexible: InitializeShareGroupState (83), ReadShareGroupState
(84), WriteShareGroupState (85), DeleteShareGroupState (86) and ReadShareGroupStateSummary (87).
"""

from __future__ import annotations

from kafkalite.protocol.schema import NULL, F, api, request, response

_STATE_BATCH = [
    F("first_offset", "int64", "0+"),
    F("last_offset", "int64", "0+"),
    F("delivery_state", "int8", "0+"),
    F("delivery_count", "int16", "0+"),
]


def _result_partition(*extra: F) -> list[F]:
    return [
        F("partition", "int32", "0+"),
        F("error_code", "int16", "0+"),
        F("error_message", "string", "0+", nullable="0+", default=NULL),
        *extra,
    ]


def _topics(struct: str, partition_fields: list[F]) -> F:
    return F(
        "topics",
        f"[]{struct}",
        "0+",
        fields=[
            F("topic_id", "uuid", "0+"),
            F("partitions", "[]PartitionData", "0+", fields=partition_fields),
        ],
    )


def _results(struct: str, partition_fields: list[F]) -> F:
    return F(
        "results",
        f"[]{struct}",
        "0+",
        fields=[
            F("topic_id", "uuid", "0+"),
            F("partitions", "[]PartitionResult", "0+", fields=partition_fields),
        ],
    )


InitializeShareGroupStateRequest = request(
    83,
    "InitializeShareGroupStateRequest",
    valid="0",
    flexible="0+",
    fields=[
        F("group_id", "string", "0+"),
        _topics(
            "InitializeStateData",
            [
                F("partition", "int32", "0+"),
                F("state_epoch", "int32", "0+"),
                F("start_offset", "int64", "0+"),
            ],
        ),
    ],
)

InitializeShareGroupStateResponse = response(
    83,
    "InitializeShareGroupStateResponse",
    valid="0",
    flexible="0+",
    fields=[_results("InitializeStateResult", _result_partition())],
)

INITIALIZE_SHARE_GROUP_STATE = api(
    "InitializeShareGroupState", InitializeShareGroupStateRequest, InitializeShareGroupStateResponse
)

ReadShareGroupStateRequest = request(
    84,
    "ReadShareGroupStateRequest",
    valid="0",
    flexible="0+",
    fields=[
        F("group_id", "string", "0+"),
        _topics(
            "ReadStateData",
            [F("partition", "int32", "0+"), F("leader_epoch", "int32", "0+")],
        ),
    ],
)

ReadShareGroupStateResponse = response(
    84,
    "ReadShareGroupStateResponse",
    valid="0",
    flexible="0+",
    fields=[
        _results(
            "ReadStateResult",
            _result_partition(
                F("state_epoch", "int32", "0+"),
                F("start_offset", "int64", "0+"),
                F("state_batches", "[]StateBatch", "0+", fields=_STATE_BATCH),
            ),
        )
    ],
)

READ_SHARE_GROUP_STATE = api(
    "ReadShareGroupState", ReadShareGroupStateRequest, ReadShareGroupStateResponse
)

WriteShareGroupStateRequest = request(
    85,
    "WriteShareGroupStateRequest",
    valid="0",
    flexible="0+",
    fields=[
        F("group_id", "string", "0+"),
        _topics(
            "WriteStateData",
            [
                F("partition", "int32", "0+"),
                F("state_epoch", "int32", "0+"),
                F("leader_epoch", "int32", "0+"),
                F("start_offset", "int64", "0+"),
                F("state_batches", "[]StateBatch", "0+", fields=_STATE_BATCH),
            ],
        ),
    ],
)

WriteShareGroupStateResponse = response(
    85,
    "WriteShareGroupStateResponse",
    valid="0",
    flexible="0+",
    fields=[_results("WriteStateResult", _result_partition())],
)

WRITE_SHARE_GROUP_STATE = api(
    "WriteShareGroupState", WriteShareGroupStateRequest, WriteShareGroupStateResponse
)

DeleteShareGroupStateRequest = request(
    86,
    "DeleteShareGroupStateRequest",
    valid="0",
    flexible="0+",
    fields=[
        F("group_id", "string", "0+"),
        _topics("DeleteStateData", [F("partition", "int32", "0+")]),
    ],
)

DeleteShareGroupStateResponse = response(
    86,
    "DeleteShareGroupStateResponse",
    valid="0",
    flexible="0+",
    fields=[_results("DeleteStateResult", _result_partition())],
)

DELETE_SHARE_GROUP_STATE = api(
    "DeleteShareGroupState", DeleteShareGroupStateRequest, DeleteShareGroupStateResponse
)

ReadShareGroupStateSummaryRequest = request(
    87,
    "ReadShareGroupStateSummaryRequest",
    valid="0",
    flexible="0+",
    fields=[
        F("group_id", "string", "0+"),
        _topics(
            "ReadStateSummaryData",
            [F("partition", "int32", "0+"), F("leader_epoch", "int32", "0+")],
        ),
    ],
)

ReadShareGroupStateSummaryResponse = response(
    87,
    "ReadShareGroupStateSummaryResponse",
    valid="0",
    flexible="0+",
    fields=[
        _results(
            "ReadStateSummaryResult",
            _result_partition(
                F("state_epoch", "int32", "0+"),
                F("start_offset", "int64", "0+"),
            ),
        )
    ],
)

READ_SHARE_GROUP_STATE_SUMMARY = api(
    "ReadShareGroupStateSummary",
    ReadShareGroupStateSummaryRequest,
    ReadShareGroupStateSummaryResponse,
)
