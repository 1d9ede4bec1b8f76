"""WriteShareGroupState (key 85, KIP-932) v0: a share-partition leader persists its state on its share
coordinator, fenced by state epoch and leader epoch. Inter-broker: CLUSTER_ACTION on the cluster.
"""

from __future__ import annotations

from kafkalite.broker.apis.share._share_state import run_per_partition
from kafkalite.broker.context import RequestContext
from kafkalite.coordinator.share_records import PersisterStateBatch, SharePartitionKey
from kafkalite.coordinator.share_state import ShareStateResult
from kafkalite.protocol.messages.share_state import (
    WRITE_SHARE_GROUP_STATE,
    WriteShareGroupStateRequest,
    WriteShareGroupStateResponse,
)

API = WRITE_SHARE_GROUP_STATE
CLUSTER_ONLY = True
_Result = WriteShareGroupStateResponse.WriteStateResult
_Part = _Result.PartitionResult


async def handle(
    ctx: RequestContext, request: WriteShareGroupStateRequest
) -> WriteShareGroupStateResponse:
    coordinator = ctx.broker.share_coordinator

    async def run(
        key: SharePartitionKey, entry: WriteShareGroupStateRequest.WriteStateData.PartitionData
    ) -> ShareStateResult:
        batches = tuple(
            PersisterStateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
            for b in entry.state_batches
        )
        return await coordinator.write(
            key, entry.state_epoch, entry.leader_epoch, entry.start_offset, batches
        )

    answers = await run_per_partition(ctx, request, run)
    return WriteShareGroupStateResponse(
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
