"""DescribeCluster (key 60): the cluster id, the controller and the live brokers with endpoints.

Only the broker endpoint type (1) is served; a controller endpoint request gets UNSUPPORTED_ENDPOINT_TYPE.
"""

from __future__ import annotations

from kafkalite.broker.context import RequestContext
from kafkalite.protocol.messages.admin import (
    DESCRIBE_CLUSTER,
    DescribeClusterRequest,
    DescribeClusterResponse,
)
from kafkalite.security.acl import AUTHORIZED_OPERATIONS_OMITTED, CLUSTER_NAME, ResourceType

API = DESCRIBE_CLUSTER
_Broker = DescribeClusterResponse.DescribeClusterBroker


async def handle(ctx: RequestContext, request: DescribeClusterRequest) -> DescribeClusterResponse:
    b = ctx.broker
    if ctx.api_version >= 1 and request.endpoint_type != 1:
        return DescribeClusterResponse(
            throttle_time_ms=0,
            error_code=119,
            error_message="only broker endpoints are served",
            endpoint_type=request.endpoint_type,
            cluster_id=b.cluster_id,
            controller_id=-1,
            brokers=[],
        )
    cache = b.metadata_cache
    return DescribeClusterResponse(
        throttle_time_ms=0,
        error_code=0,
        error_message=None,
        endpoint_type=1,
        cluster_id=b.cluster_id,
        controller_id=cache.controller_id,
        brokers=[
            _Broker(broker_id=n.broker_id, host=n.host, port=n.port, rack=n.rack)
            for n in cache.alive_brokers(ctx.connection.listener_name)
        ],
        cluster_authorized_operations=(
            ctx.authorized_operations(ResourceType.CLUSTER, CLUSTER_NAME)
            if request.include_cluster_authorized_operations
            else AUTHORIZED_OPERATIONS_OMITTED
        ),
    )
