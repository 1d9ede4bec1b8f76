"""ElectLeaders (key 43, KIP-183 / KIP-460), answered by the controller: preferred or unclean leader
election per partition (all partitions when the request names none); a single node is its own controller.
"""

from __future__ import annotations

import asyncio
import time

from kafkalite.broker.apis.admin._controller import (
    active_controller,
    is_single_node,
    one_broker_view,
)
from kafkalite.broker.context import RequestContext
from kafkalite.cluster.controller.events import ReplyLeaderElection
from kafkalite.cluster.controller.leader_balance import (
    ElectionType,
    decide_elections,
    failed_election,
)
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.leaders import (
    ELECT_LEADERS,
    ElectLeadersRequest,
    ElectLeadersResponse,
)
from kafkalite.security.acl import AclOperation

API = ELECT_LEADERS
_Topic = ElectLeadersResponse.ReplicaElectionResult
_Partition = _Topic.PartitionResult

Results = dict[tuple[str, int], tuple[int, str | None]]
_POLL_S = 0.02


def _response(error: ErrorCode, results: Results) -> ElectLeadersResponse:
    by_topic: dict[str, list[_Partition]] = {}
    for (topic, part), (code, message) in sorted(results.items()):
        by_topic.setdefault(topic, []).append(
            _Partition(partition_id=part, error_code=code, error_message=message)
        )
    return ElectLeadersResponse(
        throttle_time_ms=0,
        error_code=error,
        replica_election_results=[
            _Topic(topic=t, partition_result=ps) for t, ps in by_topic.items()
        ],
    )


def _asked(ctx: RequestContext, request: ElectLeadersRequest) -> list[tuple[str, int]]:
    """The partitions named, or (null) every partition this broker knows, as Kafka's handler."""
    if request.topic_partitions is not None:
        return [(t.topic, p) for t in request.topic_partitions for p in t.partitions]
    cache = ctx.broker.metadata_cache
    return [(t.name, p.partition) for t in cache.topics() for p in t.partitions]


async def _wait_for_leaders(
    ctx: RequestContext, leaders: dict[tuple[str, int], int], timeout_ms: int
) -> list[tuple[str, int]]:
    """Poll the metadata cache until it shows each elected leader; those still not shown when
    `timeout_ms` passed (Kafka: REQUEST_TIMED_OUT)."""
    cache = ctx.broker.metadata_cache
    deadline = time.monotonic() + max(0, timeout_ms) / 1000

    def waiting() -> list[tuple[str, int]]:
        return [
            tp
            for tp, leader in leaders.items()
            if (pm := cache.partition(*tp)) is None or pm.leader != leader
        ]

    pending = waiting()
    while pending and time.monotonic() < deadline:
        await asyncio.sleep(_POLL_S)
        pending = waiting()
    return pending


def _one_broker_election(ctx: RequestContext, request: ElectLeadersRequest) -> ReplyLeaderElection:
    """A one-broker cluster decides as the controller does: its one replica leads every partition
    (ELECTION_NOT_NEEDED), but one whose log is still being recovered, which nothing can elect yet."""
    view = one_broker_view(ctx)
    decision = decide_elections(
        request.election_type,
        _asked(ctx, request),
        assignments=view.assignments,
        leadership=view.leadership,
        live=view.live,
        deleting=(),
    )
    etype = decision.election_type or ElectionType.PREFERRED
    for tp in list(decision.proposals):
        del decision.proposals[tp]
        decision.results[tp] = failed_election(tp, etype, "its log is still being recovered")
    return decision.reply(0)


async def handle(ctx: RequestContext, request: ElectLeadersRequest) -> ElectLeadersResponse:
    if not ctx.authorize_cluster(AclOperation.ALTER):
        code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        named = request.topic_partitions is not None
        return _response(code, {tp: (code, None) for tp in _asked(ctx, request)} if named else {})
    controller = active_controller(ctx)
    reply = None
    if is_single_node(ctx):
        reply = _one_broker_election(ctx, request)
    elif controller is not None:
        partitions = (
            frozenset(_asked(ctx, request)) if request.topic_partitions is not None else None
        )
        reply = await controller.elect_leaders(request.election_type, partitions)
    if reply is None:
        # as Kafka's ZooKeeper-mode broker: each partition answers NOT_CONTROLLER
        msg = "This broker is not the controller."
        return _response(
            ErrorCode.NO_ERROR, {tp: (ErrorCode.NOT_CONTROLLER, msg) for tp in _asked(ctx, request)}
        )
    results: Results = {tp: (int(code), m) for tp, (code, m) in reply.results.items()}
    # as Kafka's DelayedElectLeader: answer once this broker's metadata shows the new leaders
    for tp in await _wait_for_leaders(ctx, reply.leaders, request.timeout_ms):
        results[tp] = (ErrorCode.REQUEST_TIMED_OUT, None)
    if request.topic_partitions is None:
        # every partition was asked for: those that needed no election are left out, as Kafka does
        results = {tp: r for tp, r in results.items() if r[0] != ErrorCode.ELECTION_NOT_NEEDED}
    return _response(ErrorCode.NO_ERROR, results)
