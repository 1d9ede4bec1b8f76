"""DescribeAcls (key 29) v0-3: the ACL bindings a filter matches, grouped by resource pattern; needs
DESCRIBE on the cluster. Without an authorizer: SECURITY_DISABLED.
"""

from __future__ import annotations

from kafkalite.broker.apis.admin._acls import filter_of
from kafkalite.broker.context import RequestContext
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.acls import (
    DESCRIBE_ACLS,
    DescribeAclsRequest,
    DescribeAclsResponse,
)
from kafkalite.security.acl import (
    AccessControlEntry,
    AclOperation,
    InvalidAclError,
    ResourcePattern,
    validate_acl_binding_filter,
)

API = DESCRIBE_ACLS
Resource = DescribeAclsResponse.DescribeAclsResource


def _error(code: int, message: str | None) -> DescribeAclsResponse:
    return DescribeAclsResponse(
        throttle_time_ms=0, error_code=code, error_message=message, resources=[]
    )


async def handle(ctx: RequestContext, request: DescribeAclsRequest) -> DescribeAclsResponse:
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return _error(ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.")
    if not ctx.authorize_cluster(AclOperation.DESCRIBE):
        return _error(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
    try:
        binding_filter = filter_of(request)
        validate_acl_binding_filter(binding_filter)
    except InvalidAclError as exc:
        return _error(exc.error_code, str(exc))
    grouped: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for b in authorizer.describe(binding_filter):
        grouped.setdefault(b.pattern, []).append(b.entry)
    return DescribeAclsResponse(
        throttle_time_ms=0,
        error_code=0,
        error_message=None,
        resources=[
            Resource(
                resource_type=p.resource_type,
                resource_name=p.name,
                pattern_type=p.pattern_type,
                acls=[
                    Resource.AclDescription(
                        principal=e.principal,
                        host=e.host,
                        operation=e.operation,
                        permission_type=e.permission_type,
                    )
                    for e in entries
                ],
            )
            for p, entries in grouped.items()
        ],
    )
