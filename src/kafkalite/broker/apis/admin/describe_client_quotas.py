"""DescribeClientQuotas (key 48): the configured client quotas whose entities match a filter
(exact name, default, or any specified name per entity type; `strict` excludes other types).
"""

from __future__ import annotations

from kafkalite.broker.context import RequestContext
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.quotas import (
    DESCRIBE_CLIENT_QUOTAS,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
)
from kafkalite.security.acl import AclOperation
from kafkalite.security.quota import (
    QuotaFilter,
    entity_parts,
    matching_entities,
    validate_filters,
)

API = DESCRIBE_CLIENT_QUOTAS
_Entry = DescribeClientQuotasResponse.EntryData


def _error(code: ErrorCode, message: str) -> DescribeClientQuotasResponse:
    return DescribeClientQuotasResponse(
        throttle_time_ms=0, error_code=int(code), error_message=message, entries=None
    )


async def handle(
    ctx: RequestContext, request: DescribeClientQuotasRequest
) -> DescribeClientQuotasResponse:
    if not ctx.authorize_cluster(AclOperation.DESCRIBE_CONFIGS):
        return _error(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
    filters = [QuotaFilter(c.entity_type, c.match_type, c.match) for c in request.components]
    why = validate_filters(filters)
    if why is not None:
        return _error(ErrorCode.INVALID_REQUEST, why)
    known = ctx.broker.client_quotas.entities()
    entries = []
    for entity in matching_entities(known, filters, request.strict):
        entries.append(
            _Entry(
                entity=[
                    _Entry.EntityData(entity_type=t, entity_name=n) for t, n in entity_parts(entity)
                ],
                values=[
                    _Entry.ValueData(key=k, value=float(v))
                    for k, v in sorted(known[entity].items())
                ],
            )
        )
    return DescribeClientQuotasResponse(
        throttle_time_ms=0, error_code=0, error_message=None, entries=entries
    )
