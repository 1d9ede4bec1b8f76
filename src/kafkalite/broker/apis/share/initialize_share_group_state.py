"""InitializeShareGroupState (key 83, KIP-932) v0: a group coordinator sets a share-partition's state epoch
and start offset on its share coordinator. Inter-broker: CLUSTER_ACTION on the cluster.
"""

from __future__ import annotations

from kafkalite.broker.apis.share._share_state import run_per_partition
from kafkalite.broker.context import RequestContext
from kafkalite.coordinator.share_records import SharePartitionKey
from kafkalite.coordinator.share_state import ShareStateResult
from kafkalite.protocol.messages.share_state import (
    INITIALIZE_SHARE_GROUP_STATE,
    InitializeShareGroupStateRequest,
    InitializeShareGroupStateResponse,
)

API = INITIALIZE_SHARE_GROUP_STATE
CLUSTER_ONLY = True
_Result = InitializeShareGroupStateResponse.InitializeStateResult
_Part = _Result.PartitionResult


async def handle(
    ctx: RequestContext, request: InitializeShareGroupStateRequest
) -> InitializeShareGroupStateResponse:
    coordinator = ctx.broker.share_coordinator

    async def run(
        key: SharePartitionKey,
        entry: InitializeShareGroupStateRequest.InitializeStateData.PartitionData,
    ) -> ShareStateResult:
        return await coordinator.initialize(key, entry.state_epoch, entry.start_offset)

    answers = await run_per_partition(ctx, request, run)
    return InitializeShareGroupStateResponse(
        results=[
            _Result(
                topic_id=topic_id,
                partitions=[
                    _Part(partition=e.partition, error_code=r.error, error_message=r.message)
                    for e, r in parts
                ],
            )
            for topic_id, parts in answers
        ]
    )
