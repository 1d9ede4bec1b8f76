"""DescribeUserScramCredentials (key 50): which SCRAM mechanisms (and iteration counts) each user has;
never a salt or key. DESCRIBE on the cluster when an authorizer is configured.
"""

from __future__ import annotations

from collections import Counter

from kafkalite.broker.context import RequestContext
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.scram import (
    DESCRIBE_USER_SCRAM_CREDENTIALS,
    SCRAM_MECHANISM_IDS,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)
from kafkalite.security.acl import AclOperation

API = DESCRIBE_USER_SCRAM_CREDENTIALS
_Result = DescribeUserScramCredentialsResponse.DescribeUserScramCredentialsResult
_Info = _Result.CredentialInfo


async def handle(
    ctx: RequestContext, request: DescribeUserScramCredentialsRequest
) -> DescribeUserScramCredentialsResponse:
    if not ctx.authorize_cluster(AclOperation.DESCRIBE):
        err, text = int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED), "Cluster authorization failed."
        return DescribeUserScramCredentialsResponse(
            throttle_time_ms=0,
            error_code=err,
            error_message=text,
            results=[
                _Result(user=u.name, error_code=err, error_message=text, credential_infos=[])
                for u in request.users or ()
            ],
        )
    known = ctx.broker.scram_credentials.users()
    asked = [u.name for u in request.users or ()] or sorted(known)  # null or empty: all
    counts = Counter(asked)
    results = []
    for user in dict.fromkeys(asked):
        creds = known.get(user)
        if counts[user] > 1:
            code, msg = (
                ErrorCode.DUPLICATE_RESOURCE,
                "Cannot describe SCRAM credentials for the same user twice in a single request",
            )
        elif not creds:
            code, msg = (
                ErrorCode.RESOURCE_NOT_FOUND,
                "Attempt to describe a user credential that does not exist",
            )
        else:
            code, msg = ErrorCode.NO_ERROR, ""
        infos = []
        if code == ErrorCode.NO_ERROR and creds:
            infos = [
                _Info(mechanism=SCRAM_MECHANISM_IDS[m], iterations=c.iterations)
                for m, c in sorted(creds.items())
            ]
        results.append(
            _Result(
                user=user,
                error_code=int(code),
                error_message=msg or None,
                credential_infos=infos,
            )
        )
    return DescribeUserScramCredentialsResponse(
        throttle_time_ms=0, error_code=0, error_message=None, results=results
    )
