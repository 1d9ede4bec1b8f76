"""DeleteAcls (key 31) v0-3: removes the bindings each filter matches and names them; needs ALTER on
the cluster. Without an authorizer: SECURITY_DISABLED.
"""

from __future__ import annotations

import logging

from kafkalite.broker.apis.admin._acls import filter_of
from kafkalite.broker.context import RequestContext
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.acls import DELETE_ACLS, DeleteAclsRequest, DeleteAclsResponse
from kafkalite.security.acl import (
    AclBindingFilter,
    AclOperation,
    InvalidAclError,
    validate_acl_binding_filter,
)

API = DELETE_ACLS
log = logging.getLogger("kafkalite.broker.apis.admin.delete_acls")
FilterResult = DeleteAclsResponse.DeleteAclsFilterResult
Matching = FilterResult.DeleteAclsMatchingAcl


async def handle(ctx: RequestContext, request: DeleteAclsRequest) -> DeleteAclsResponse:
    filters = list(request.filters)
    authorizer = ctx.broker.authorizer
    if authorizer is None or not ctx.authorize_cluster(AclOperation.ALTER):
        code, msg = (
            (ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.")
            if authorizer is None
            else (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
        )
        err = FilterResult(error_code=code, error_message=msg, matching_acls=[])
        return DeleteAclsResponse(throttle_time_ms=0, filter_results=[err] * len(filters))
    parsed: list[AclBindingFilter | InvalidAclError] = []
    for f in filters:
        try:
            binding_filter = filter_of(f)
            validate_acl_binding_filter(binding_filter)
            parsed.append(binding_filter)
        except InvalidAclError as exc:
            parsed.append(exc)
    good = [p for p in parsed if isinstance(p, AclBindingFilter)]
    try:
        deleted = iter(await authorizer.delete(good))
    except Exception as exc:
        log.exception("deleting ACLs failed")
        err = FilterResult(
            error_code=ErrorCode.UNKNOWN_SERVER_ERROR,
            error_message=f"deleting the ACLs failed: {exc}",
            matching_acls=[],
        )
        return DeleteAclsResponse(throttle_time_ms=0, filter_results=[err] * len(filters))
    results: list[FilterResult] = []
    for p in parsed:
        if isinstance(p, InvalidAclError):
            results.append(
                FilterResult(error_code=p.error_code, error_message=str(p), matching_acls=[])
            )
            continue
        removed = next(deleted)
        if removed:
            log.info("%s deleted ACLs: %s", ctx.principal, removed)
        results.append(
            FilterResult(
                error_code=0,
                error_message=None,
                matching_acls=[
                    Matching(
                        error_code=0,
                        error_message=None,
                        resource_type=b.pattern.resource_type,
                        resource_name=b.pattern.name,
                        pattern_type=b.pattern.pattern_type,
                        principal=b.entry.principal,
                        host=b.entry.host,
                        operation=b.entry.operation,
                        permission_type=b.entry.permission_type,
                    )
                    for b in removed
                ],
            )
        )
    return DeleteAclsResponse(throttle_time_ms=0, filter_results=results)
