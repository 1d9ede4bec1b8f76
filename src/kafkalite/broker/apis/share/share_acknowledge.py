"""ShareAcknowledge (key 79, KIP-932): acknowledge records in a share session without fetching more;
epoch -1 acknowledges and closes the session, handing what the member still holds back to the group.
"""

from __future__ import annotations

from kafkalite.broker.apis.share import _share
from kafkalite.broker.context import RequestContext
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.share_groups import (
    SHARE_ACKNOWLEDGE,
    ShareAcknowledgeRequest,
    ShareAcknowledgeResponse,
)

API = SHARE_ACKNOWLEDGE
E = ErrorCode
_Topic = ShareAcknowledgeResponse.ShareAcknowledgeTopicResponse
_Part = _Topic.PartitionData
_Node = ShareAcknowledgeResponse.NodeEndpoint


def _part(index: int) -> _Part:
    return _Part(
        partition_index=index,
        error_code=0,
        error_message=None,
        current_leader=_Part.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1),
    )


def _answer(
    code: ErrorCode,
    message: str | None = None,
    out: _share.Responses[_Part] | None = None,
    lock_ms: int = 0,
) -> ShareAcknowledgeResponse:
    return ShareAcknowledgeResponse(
        throttle_time_ms=0,
        error_code=int(code),
        error_message=message,
        acquisition_lock_timeout_ms=lock_ms,
        responses=[_Topic(topic_id=t, partitions=ps) for t, ps in out.topics()] if out else [],
        node_endpoints=[_Node(node_id=n, host=h, port=p, rack=r) for n, h, p, r in out.endpoints()]
        if out
        else [],
    )


async def handle(ctx: RequestContext, request: ShareAcknowledgeRequest) -> ShareAcknowledgeResponse:
    manager = ctx.broker.share_partitions
    group_id = request.group_id or ""
    member_id = request.member_id or ""
    epoch = request.share_session_epoch
    if epoch == 0:
        return _answer(
            E.INVALID_SHARE_SESSION_EPOCH, "ShareAcknowledge cannot open a share session (epoch 0)"
        )
    why = _share.invalid(request, fetch=False)
    if why is not None:
        return _answer(E.INVALID_REQUEST, why)
    denied = _share.group_denied(ctx, group_id)
    if denied is not None:
        return _answer(denied)
    session, code, message = manager.sessions.existing(group_id, member_id, epoch)
    if session is None:
        return _answer(code, message)
    out = _share.Responses(ctx, _part)
    renew = ctx.api_version >= 2 and request.is_renew_ack
    for t in request.topics:
        for p in t.partitions:
            code, message = await _share.acknowledge(ctx, group_id, member_id, t.topic_id, p, renew)
            pr = out.part(t.topic_id, p.partition_index)
            pr.error_code = int(code)
            pr.error_message = message
    if epoch == -1:
        manager.sessions.close(group_id, member_id)
        await manager.release_session(session)
    lock_ms = _share.settings(ctx, group_id).record_lock_duration_ms if ctx.api_version >= 2 else 0
    return _answer(E.NO_ERROR, None, out, lock_ms)
