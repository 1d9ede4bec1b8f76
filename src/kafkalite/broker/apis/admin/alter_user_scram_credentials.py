"""AlterUserScramCredentials (key 51): upsert (salted password in, derived keys stored) or delete a
user's SCRAM credential per mechanism, through the metadata store. ALTER on the cluster with an authorizer.
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict

from kafkalite.broker.context import RequestContext
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.scram import (
    ALTER_USER_SCRAM_CREDENTIALS,
    SCRAM_MECHANISM_IDS,
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
)
from kafkalite.security.acl import AclOperation
from kafkalite.security.scram import (
    SCRAM_MECHANISMS,
    ScramCredential,
    client_key,
    server_key,
    stored_key,
)

API = ALTER_USER_SCRAM_CREDENTIALS
log = logging.getLogger("kafkalite.broker.scram")
_Result = AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult
_MECHANISM_NAMES = {v: k for k, v in SCRAM_MECHANISM_IDS.items()}


def _check(name: str, mechanism_id: int, iterations: int | None) -> tuple[ErrorCode, str] | None:
    if not name:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    mech = _MECHANISM_NAMES.get(mechanism_id)
    if mech is None:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    if iterations is not None:
        m = SCRAM_MECHANISMS[mech]
        if iterations < m.min_iterations:
            return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"
        if iterations > m.max_iterations:
            return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"
    return None


async def handle(
    ctx: RequestContext, request: AlterUserScramCredentialsRequest
) -> AlterUserScramCredentialsResponse:
    users = list(
        dict.fromkeys([d.name for d in request.deletions] + [u.name for u in request.upsertions])
    )
    if not ctx.authorize_cluster(AclOperation.ALTER):
        msg = "Cluster authorization failed."
        code = int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        return AlterUserScramCredentialsResponse(
            throttle_time_ms=0,
            results=[_Result(user=u, error_code=code, error_message=msg) for u in users],
        )
    errors: dict[str, tuple[ErrorCode, str]] = {}
    pairs = Counter(
        [(d.name, d.mechanism) for d in request.deletions]
        + [(u.name, u.mechanism) for u in request.upsertions]
    )
    for (name, _), n in pairs.items():
        if n > 1:
            errors.setdefault(
                name,
                (
                    ErrorCode.DUPLICATE_RESOURCE,
                    "A user credential cannot be altered twice in the same request",
                ),
            )
    deletes: dict[str, set[str]] = defaultdict(set)
    upserts: dict[str, dict[str, ScramCredential]] = defaultdict(dict)
    cache = ctx.broker.scram_credentials
    for d in request.deletions:
        bad = _check(d.name, d.mechanism, None)
        if bad is None and cache.lookup(_MECHANISM_NAMES[d.mechanism], d.name) is None:
            bad = (
                ErrorCode.RESOURCE_NOT_FOUND,
                "Attempt to delete a user credential that does not exist",
            )
        if bad is not None:
            errors.setdefault(d.name, bad)
        else:
            deletes[d.name].add(_MECHANISM_NAMES[d.mechanism])
    for u in request.upsertions:
        bad = _check(u.name, u.mechanism, u.iterations)
        if bad is not None:
            errors.setdefault(u.name, bad)
            continue
        mech = SCRAM_MECHANISMS[_MECHANISM_NAMES[u.mechanism]]
        salted = bytes(u.salted_password)
        upserts[u.name][mech.mechanism_name] = ScramCredential(
            bytes(u.salt),
            stored_key(mech, client_key(mech, salted)),
            server_key(mech, salted),
            u.iterations,
        )
    results = []
    for user in users:
        if user in errors:
            code, msg = errors[user]
            results.append(_Result(user=user, error_code=int(code), error_message=msg))
            continue
        try:
            await cache.alter(user, upserts.get(user, {}), deletes.get(user, set()))
        except Exception as exc:
            log.error("cannot store the SCRAM credentials of user %s: %r", user, exc)
            results.append(
                _Result(
                    user=user,
                    error_code=int(ErrorCode.UNKNOWN_SERVER_ERROR),
                    error_message="The credentials could not be stored",
                )
            )
            continue
        results.append(_Result(user=user, error_code=0, error_message=None))
    return AlterUserScramCredentialsResponse(throttle_time_ms=0, results=results)
