"""WriteTxnMarkers (key 27) v0-1: a transaction coordinator (or an admin aborting a hanging transaction)
asks this partition leader to write COMMIT/ABORT markers; answered once the ISR has them.
"""

from __future__ import annotations

from kafkalite.broker.context import RequestContext
from kafkalite.broker.coordinators.txn_markers import write_markers_locally
from kafkalite.coordinator import TopicPartition
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.txn import (
    WRITE_TXN_MARKERS,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from kafkalite.security.acl import AclOperation

API = WRITE_TXN_MARKERS
_Result = WriteTxnMarkersResponse.WritableTxnMarkerResult
_Topic = _Result.WritableTxnMarkerTopicResult
_Part = _Topic.WritableTxnMarkerPartitionResult


async def handle(ctx: RequestContext, request: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
    results = []
    allowed = ctx.authorize_cluster(AclOperation.CLUSTER_ACTION)
    for marker in request.markers:
        tps = [TopicPartition(t.name, p) for t in marker.topics for p in t.partition_indexes]
        if not allowed:
            codes = dict.fromkeys(tps, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        else:
            codes = await write_markers_locally(
                ctx.broker,
                marker.producer_id,
                marker.producer_epoch,
                marker.coordinator_epoch,
                bool(marker.transaction_result),
                tps,
            )
        by_topic: dict[str, list[_Part]] = {}
        for tp in tps:
            by_topic.setdefault(tp.topic, []).append(
                _Part(partition_index=tp.partition, error_code=codes[tp])
            )
        results.append(
            _Result(
                producer_id=marker.producer_id,
                topics=[_Topic(name=n, partitions=ps) for n, ps in by_topic.items()],
            )
        )
    return WriteTxnMarkersResponse(markers=results)
