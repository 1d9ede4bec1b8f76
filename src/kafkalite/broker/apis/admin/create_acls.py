"""CreateAcls (key 30) v0-3: adds ACL bindings; needs ALTER on the cluster.

Without an authorizer every creation answers SECURITY_DISABLED, as Kafka does.
"""

from __future__ import annotations

import logging

from kafkalite.broker.apis.admin._acls import binding_of
from kafkalite.broker.context import RequestContext
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.acls import CREATE_ACLS, CreateAclsRequest, CreateAclsResponse
from kafkalite.security.acl import (
    AclBinding,
    AclOperation,
    InvalidAclError,
    validate_acl_binding,
)

API = CREATE_ACLS
log = logging.getLogger("kafkalite.broker.apis.admin.create_acls")
Result = CreateAclsResponse.AclCreationResult


async def handle(ctx: RequestContext, request: CreateAclsRequest) -> CreateAclsResponse:
    creations = list(request.creations)
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        err = Result(
            error_code=ErrorCode.SECURITY_DISABLED, error_message="No Authorizer is configured."
        )
        return CreateAclsResponse(throttle_time_ms=0, results=[err] * len(creations))
    if not ctx.authorize_cluster(AclOperation.ALTER):
        err = Result(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message=None)
        return CreateAclsResponse(throttle_time_ms=0, results=[err] * len(creations))
    results: list[Result] = []
    valid: list[AclBinding] = []
    for c in creations:
        try:
            binding = binding_of(c)
            validate_acl_binding(binding)
        except InvalidAclError as exc:
            results.append(Result(error_code=exc.error_code, error_message=str(exc)))
            continue
        valid.append(binding)
        results.append(Result(error_code=0, error_message=None))
    if valid:
        try:
            await authorizer.create(valid)
        except Exception as exc:
            log.exception("storing ACLs failed")
            for r in results:
                if r.error_code == 0:
                    r.error_code = ErrorCode.UNKNOWN_SERVER_ERROR
                    r.error_message = f"storing the ACLs failed: {exc}"
        else:
            log.info("%s created ACLs: %s", ctx.principal, valid)
    return CreateAclsResponse(throttle_time_ms=0, results=results)
