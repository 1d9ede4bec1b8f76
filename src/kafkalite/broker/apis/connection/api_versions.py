"""ApiVersions (key 18): the versions of every API in the dispatch table, generated, never hand-written.

The KIP-511 downgrade for a too-new request version is answered by the server before decoding (see server.py).
"""

from __future__ import annotations

from kafkalite.broker.context import RequestContext
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.api_versions import (
    API_VERSIONS,
    ApiVersionsRequest,
    ApiVersionsResponse,
)

API = API_VERSIONS


async def handle(ctx: RequestContext, request: ApiVersionsRequest) -> ApiVersionsResponse:
    resp = ctx.broker.dispatch.api_versions_response()
    if ctx.api_version >= 3:
        name = request.client_software_name or ""
        ver = request.client_software_version or ""
        ok = all(ch.isalnum() or ch in ".-" for ch in name + ver) and name and ver
        if not ok:
            resp.error_code = ErrorCode.INVALID_REQUEST
            return resp
        ctx.connection.client_software = (name, ver)
    return resp
