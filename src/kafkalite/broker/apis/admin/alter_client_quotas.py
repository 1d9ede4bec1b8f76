"""AlterClientQuotas (key 49): set or remove produce / consume byte rates and request percentages
of user and client-id entities, and connection_creation_rate of ip entities (null name: the default).
"""

from __future__ import annotations

import logging

from kafkalite.broker.context import RequestContext
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.quotas import (
    ALTER_CLIENT_QUOTAS,
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
)
from kafkalite.security.acl import AclOperation
from kafkalite.security.quota import QuotaEntity, entity_from_parts, validate_quota_value

API = ALTER_CLIENT_QUOTAS
log = logging.getLogger("kafkalite.broker.quotas")
_Entry = AlterClientQuotasResponse.EntryData


def _plan(
    entry: AlterClientQuotasRequest.EntryData,
) -> tuple[QuotaEntity, dict[str, float], set[str]]:
    """The entity and its changes, or ValueError saying why the entry is invalid."""
    parts: dict[str, str | None] = {}
    for e in entry.entity:
        if e.entity_type in parts:
            raise ValueError(f"Duplicate {e.entity_type} entity type in one entity")
        parts[e.entity_type] = e.entity_name
    if not parts:
        raise ValueError("An entity names a user, a client-id, both, or an ip")
    entity = entity_from_parts(parts)
    upsert: dict[str, float] = {}
    remove: set[str] = set()
    for op in entry.ops:
        if op.key in upsert or op.key in remove:
            raise ValueError(f"Duplicate quota key {op.key!r} in one entity")
        if op.remove:
            why = validate_quota_value(op.key, 1.0, entity)  # only the key matters to a removal
            if why is not None:
                raise ValueError(why)
            remove.add(op.key)
            continue
        why = validate_quota_value(op.key, op.value, entity)
        if why is not None:
            raise ValueError(why)
        upsert[op.key] = op.value
    return entity, upsert, remove


async def handle(
    ctx: RequestContext, request: AlterClientQuotasRequest
) -> AlterClientQuotasResponse:
    allowed = ctx.authorize_cluster(AclOperation.ALTER_CONFIGS)
    results = []
    for entry in request.entries:
        names = [
            _Entry.EntityData(entity_type=e.entity_type, entity_name=e.entity_name)
            for e in entry.entity
        ]
        code, message = ErrorCode.NO_ERROR, None
        if not allowed:
            code, message = ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."
        else:
            try:
                entity, upsert, remove = _plan(entry)
            except ValueError as exc:
                code, message = ErrorCode.INVALID_REQUEST, str(exc)
            else:
                if not request.validate_only:
                    try:
                        await ctx.broker.client_quotas.alter(entity, upsert, remove)
                    except Exception as exc:
                        log.error("cannot store client quotas: %r", exc)
                        code = ErrorCode.UNKNOWN_SERVER_ERROR
                        message = "The quotas could not be stored"
        results.append(_Entry(error_code=int(code), error_message=message, entity=names))
    return AlterClientQuotasResponse(throttle_time_ms=0, entries=results)
