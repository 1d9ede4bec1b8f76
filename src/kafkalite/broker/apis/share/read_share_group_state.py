"""ReadShareGroupState (key 84, KIP-932) v0: a share-partition leader reads the state it persisted (state
epoch, start offset, in-flight batches) from its share coordinator. Inter-broker: CLUSTER_ACTION.
"""

from __future__ import annotations

from kafkalite.broker.apis.share._share_state import run_per_partition
from kafkalite.broker.context import RequestContext
from kafkalite.coordinator.share_records import SharePartitionKey
from kafkalite.coordinator.share_state import ShareStateResult
from kafkalite.protocol.messages.share_state import (
    READ_SHARE_GROUP_STATE,
    ReadShareGroupStateRequest,
    ReadShareGroupStateResponse,
)

API = READ_SHARE_GROUP_STATE
CLUSTER_ONLY = True
_Result = ReadShareGroupStateResponse.ReadStateResult
_Part = _Result.PartitionResult
_Batch = _Part.StateBatch


async def handle(
    ctx: RequestContext, request: ReadShareGroupStateRequest
) -> ReadShareGroupStateResponse:
    coordinator = ctx.broker.share_coordinator

    async def run(
        key: SharePartitionKey, entry: ReadShareGroupStateRequest.ReadStateData.PartitionData
    ) -> ShareStateResult:
        return await coordinator.read(key, entry.leader_epoch)

    answers = await run_per_partition(ctx, request, run)
    return ReadShareGroupStateResponse(
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
                        state_batches=[
                            _Batch(
                                first_offset=b.first_offset,
                                last_offset=b.last_offset,
                                delivery_state=b.delivery_state,
                                delivery_count=b.delivery_count,
                            )
                            for b in r.batches
                        ],
                    )
                    for e, r in parts
                ],
            )
            for topic_id, parts in answers
        ]
    )
