"""DeleteShareGroupState (key 86, KIP-932) v0: a group coordinator removes share-partitions' state from
their share coordinator (a tombstone each). Inter-broker: CLUSTER_ACTION on the cluster.
"""

from __future__ import annotations

from kafkalite.broker.apis.share._share_state import run_per_partition
from kafkalite.broker.context import RequestContext
from kafkalite.coordinator.share_records import SharePartitionKey
from kafkalite.coordinator.share_state import ShareStateResult
from kafkalite.protocol.messages.share_state import (
    DELETE_SHARE_GROUP_STATE,
    DeleteShareGroupStateRequest,
    DeleteShareGroupStateResponse,
)

API = DELETE_SHARE_GROUP_STATE
CLUSTER_ONLY = True
_Result = DeleteShareGroupStateResponse.DeleteStateResult
_Part = _Result.PartitionResult


async def handle(
    ctx: RequestContext, request: DeleteShareGroupStateRequest
) -> DeleteShareGroupStateResponse:
    coordinator = ctx.broker.share_coordinator

    async def run(
        key: SharePartitionKey, entry: DeleteShareGroupStateRequest.DeleteStateData.PartitionData
    ) -> ShareStateResult:
        return await coordinator.delete(key)

    answers = await run_per_partition(ctx, request, run)
    return DeleteShareGroupStateResponse(
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
