"""What every REST v3 route shares: the error body and its HTTP status, JSON in and out, links and
resource names, and the RequestContext a route hands to the broker's API handlers.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar, overload
from urllib.parse import quote

from aiohttp import web

from kafkalite.broker.context import RequestContext
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.headers import RequestHeader
from kafkalite.protocol.schema import Api
from kafkalite.security.acl import AclOperation, ResourceType
from kafkalite.security.principal import KafkaPrincipal
from kafkalite.web.server import BROKER_KEY

if TYPE_CHECKING:
    from kafkalite.broker.security.sasl_auth import SaslSession
    from kafkalite.broker.server import BrokerServer

log = logging.getLogger("kafkalite.web.rest")

PRINCIPAL_KEY = "kafkalite.rest.principal"  # request key: the Basic-auth principal
CLIENT_ID = "kafkalite-rest"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

# Kafka error -> HTTP status, as the REST Proxy answers them; anything else is 500
_NOT_FOUND = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.UNKNOWN_TOPIC_ID,
    ErrorCode.GROUP_ID_NOT_FOUND,
    ErrorCode.UNKNOWN_MEMBER_ID,
    ErrorCode.RESOURCE_NOT_FOUND,
}
_FORBIDDEN = {
    ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    ErrorCode.GROUP_AUTHORIZATION_FAILED,
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
}
_CONFLICT = {ErrorCode.NON_EMPTY_GROUP, ErrorCode.REBALANCE_IN_PROGRESS}
_MISDIRECTED = {ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.NOT_COORDINATOR}
_TOO_LARGE = {ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE}


def http_status(code: ErrorCode) -> int:
    """The HTTP status a Kafka error is answered with."""
    if code in _NOT_FOUND:
        return 404
    if code in _FORBIDDEN:
        return 403
    if code in _CONFLICT:
        return 409
    if code in _MISDIRECTED:
        return 421  # Misdirected Request: another broker's listener serves it
    if code in _TOO_LARGE:
        return 413
    if code == ErrorCode.REQUEST_TIMED_OUT:
        return 504
    if code.retriable:
        return 503
    if code == ErrorCode.UNKNOWN_SERVER_ERROR:
        return 500
    return 400  # invalid request, config, partitions, replication factor, topic exists, ...


class RestError(Exception):
    """An answer that is an error: the HTTP status and the REST Proxy's body."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message

    @classmethod
    def kafka(cls, code: int, message: str | None = None) -> RestError:
        """A Kafka error code as the REST Proxy reports it: `NAME: message` with the mapped status."""
        err = (
            ErrorCode(code)
            if code in ErrorCode._value2member_map_
            else ErrorCode.UNKNOWN_SERVER_ERROR
        )
        text = f"{ErrorCode.name_of(code)}: {message}" if message else ErrorCode.name_of(code)
        return cls(http_status(err), text)

    def response(self) -> web.Response:
        headers = {"WWW-Authenticate": 'Basic realm="kafkalite"'} if self.status == 401 else None
        return web.json_response(
            {"error_code": self.status, "message": self.message},
            status=self.status,
            headers=headers,
        )


def not_found(message: str) -> RestError:
    return RestError(404, message)


def bad_request(message: str) -> RestError:
    return RestError(400, message)


def ok(body: object, status: int = 200) -> web.Response:
    return web.json_response(body, status=status)


def no_content() -> web.Response:
    return web.Response(status=204)


async def json_body(request: web.Request) -> dict[str, object]:
    """The request's JSON object; 400 when the body is not JSON or not an object."""
    raw = await request.read()
    try:
        body = json.loads(raw) if raw else None
    except (ValueError, UnicodeDecodeError) as exc:
        raise bad_request(f"Request body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise bad_request("Request body must be a JSON object")
    return body


_T = TypeVar("_T")


@overload
def field(body: dict[str, object], name: str, kind: type[_T]) -> _T: ...
@overload
def field(body: dict[str, object], name: str, kind: type[_T], *, required: bool) -> _T | None: ...
def field(
    body: dict[str, object], name: str, kind: type[_T], *, required: bool = True
) -> _T | None:
    """One field of a JSON body, checked for type (bool is never an int here); 400 otherwise."""
    value = body.get(name)
    if value is None:
        if required:
            raise bad_request(f"Missing required field: {name}")
        return None
    if isinstance(value, bool) and kind is not bool:
        raise bad_request(f"Field {name} has the wrong type")
    if not isinstance(value, kind):
        raise bad_request(f"Field {name} has the wrong type")
    return value


def int_param(request: web.Request, name: str) -> int:
    """An integer path or query parameter; 404 for a path part that is no integer (no such
    resource), 400 for a bad query parameter."""
    raw = request.match_info.get(name)
    in_path = raw is not None
    if raw is None:
        raw = request.query.get(name)
    try:
        return int(raw or "")
    except ValueError:
        if in_path:
            raise not_found(f"No {name.replace('_', ' ')} {raw!r}") from None
        raise bad_request(f"Query parameter {name} must be an integer, got {raw!r}") from None


def broker_of(request: web.Request) -> BrokerServer:
    broker: BrokerServer = request.app[BROKER_KEY]
    return broker


@dataclass(slots=True)
class RestConnection:
    """What a RequestContext needs of a connection (broker.context.RequestConnection): who is
    asking and from where; no listener, never SASL (HTTP authenticates before the handler)."""

    principal: KafkaPrincipal
    peer: str
    listener_name: str | None = None
    security_protocol: str = "PLAINTEXT"
    closed: bool = False
    client_software: tuple[str, str] | None = None
    sasl: SaslSession | None = None

    def sasl_authenticated(self, session: SaslSession) -> None:
        raise RuntimeError("an HTTP request does not authenticate with SASL")

    def close_after_failed_authentication(self, session: SaslSession) -> None:
        raise RuntimeError("an HTTP request does not authenticate with SASL")


def context(request: web.Request, api: Api, version: int) -> RequestContext:
    """A RequestContext for calling a broker API handler on behalf of this HTTP request (the
    principal from Basic auth, User:ANONYMOUS without SASL)."""
    principal: KafkaPrincipal = request.get(PRINCIPAL_KEY) or KafkaPrincipal.user("ANONYMOUS")
    peer = request.remote or ""
    return RequestContext(
        broker=broker_of(request),
        header=RequestHeader(api.key, version, 0, CLIENT_ID),
        api_version=version,
        connection=RestConnection(principal, f"{peer}:0"),
    )


def authorize(
    request: web.Request, operation: AclOperation, resource_type: ResourceType, name: str
) -> bool:
    """May the request's principal do `operation` on the resource? True without an authorizer."""
    broker = broker_of(request)
    if broker.authorizer is None:
        return True
    principal: KafkaPrincipal = request.get(PRINCIPAL_KEY) or KafkaPrincipal.user("ANONYMOUS")
    return broker.authorizer.authorize(
        principal, request.remote or "", operation, resource_type, name
    )


def require(
    request: web.Request,
    operation: AclOperation,
    resource_type: ResourceType,
    name: str,
    code: ErrorCode,
) -> None:
    """403 with the Kafka authorization error unless allowed."""
    if not authorize(request, operation, resource_type, name):
        raise RestError.kafka(code, "Authorization failed.")


# -- links and names ---------------------------------------------------------------------------------


def cluster_id(request: web.Request) -> str:
    """The path's cluster id; 404 when it is not this cluster."""
    cid = request.match_info["cluster_id"]
    own = broker_of(request).cluster_id
    if cid != own:
        raise not_found(f"Cluster {cid} cannot be found.")
    return cid


def base_url(request: web.Request) -> str:
    return f"{request.scheme}://{request.host}/v3/clusters"


def url(request: web.Request, cid: str, *parts: object) -> str:
    """The link to a resource; each part is percent-encoded (KIP-848 member ids hold `/` and `+`)."""
    tail = "".join(f"/{quote(str(p), safe='')}" for p in parts)
    return f"{base_url(request)}/{cid}{tail}"


def crn(cid: str, *pairs: tuple[str, object]) -> str:
    return f"crn:///kafka={cid}" + "".join(f"/{k}={v}" for k, v in pairs)


def related(link: str) -> dict[str, str]:
    return {"related": link}


def resource(kind: str, self_url: str, resource_name: str | None) -> dict[str, object]:
    return {"kind": kind, "metadata": {"self": self_url, "resource_name": resource_name}}


def listing(kind: str, self_url: str, data: Sequence[object]) -> dict[str, object]:
    return {"kind": kind, "metadata": {"self": self_url, "next": None}, "data": data}
