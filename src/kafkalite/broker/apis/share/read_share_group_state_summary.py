"""ReadShareGroupStateSummary (key 87, KIP-932) v0: the state epoch and start offset of share-partitions,
as a group coordinator describes a share group's offsets. Inter-broker: CLUSTER_ACTION on the cluster.
"""

from __future__ import annotations

from kafkalite.broker.apis.share._share_state import run_per_partition
from kafkalite.broker.context import RequestContext
from kafkalite.coordinator.share_records import SharePartitionKey
from kafkalite.coordinator.share_state import ShareStateResult
from kafkalite.protocol.messages.share_state import (
    READ_SHARE_GROUP_STATE_SUMMARY,
    ReadShareGroupStateSummaryRequest,
    ReadShareGroupStateSummaryResponse,
)

API = READ_SHARE_GROUP_STATE_SUMMARY
CLUSTER_ONLY = True
_Result = ReadShareGroupStateSummaryResponse.ReadStateSummaryResult
_Part = _Result.PartitionResult


async def handle(
    ctx: RequestContext, request: ReadShareGroupStateSummaryRequest
) -> ReadShareGroupStateSummaryResponse:
    coordinator = ctx.broker.share_coordinator

    async def run(
        key: SharePartitionKey,
        entry: ReadShareGroupStateSummaryRequest.ReadStateSummaryData.PartitionData,
    ) -> ShareStateResult:
        return await coordinator.read_summary(key, entry.leader_epoch)

    answers = await run_per_partition(ctx, request, run)
    return ReadShareGroupStateSummaryResponse(
        results=[
            _Result(
                topic_id=topic_id,
                partitions=[
                    _Part(
                        partition=e.partition,
                        error_code=r.error,
                        error_message=r.message,
                        state_epoch=r.state_epoch,
                        start_offset=r.start_offset,
                    )
                    for e, r in parts
                ],
            )
            for topic_id, parts in answers
        ]
    )
