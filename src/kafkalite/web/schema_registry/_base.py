"""What the registry's routes share: the media type, JSON bodies in and out with Confluent's error
codes, query flags, and the broker's registry component.
"""

from __future__ import annotations

import asyncio
import json

import aiohttp
from aiohttp import web

from kafkalite.broker.coordinators.schema_registry import SchemaRegistryComponent
from kafkalite.schemas.model import RegistryError, forward_error, unprocessable
from kafkalite.web.rest.auth import BasicAuthenticator
from kafkalite.web.server import BROKER_KEY

MEDIA_TYPE = "application/vnd.schemaregistry.v1+json"
MAX_BODY = 8 * 1024 * 1024
PREFIXES = (
    "/subjects",
    "/schemas",
    "/config",
    "/mode",
    "/compatibility",
    "/v1/metadata",
    "/contexts",
)
AUTH_KEY: web.AppKey[BasicAuthenticator] = web.AppKey("registry_auth", BasicAuthenticator)


def reply(body: object, status: int = 200) -> web.Response:
    return web.Response(
        body=json.dumps(body, separators=(",", ":")).encode("utf-8"),
        status=status,
        content_type=MEDIA_TYPE,
    )


def error_response(exc: RegistryError) -> web.Response:
    headers = {"WWW-Authenticate": 'Basic realm="kafkalite"'} if exc.status == 401 else None
    return web.Response(
        body=json.dumps(exc.body()).encode("utf-8"),
        status=exc.status,
        content_type=MEDIA_TYPE,
        headers=headers,
    )


def registry_of(request: web.Request) -> SchemaRegistryComponent:
    return request.app[BROKER_KEY].schema_registry


async def body_of(request: web.Request) -> dict[str, object]:
    """The request's JSON object; Confluent answers a body it cannot read 422 (or 400 for JSON it
    cannot parse at all)."""
    if (request.content_length or 0) > MAX_BODY:
        raise RegistryError(413, 413, "HTTP 413 Request Entity Too Large")
    raw = await request.read()
    if len(raw) > MAX_BODY:
        raise RegistryError(413, 413, "HTTP 413 Request Entity Too Large")
    try:
        body = json.loads(raw) if raw else None
    except (ValueError, UnicodeDecodeError) as exc:
        raise RegistryError(400, 400, f"Unrecognized field or malformed JSON: {exc}") from None
    if not isinstance(body, dict):
        raise unprocessable("The request body must be a JSON object")
    return body


FORWARDED_HEADER = "X-Kafkalite-Forwarded-By"
_FORWARD_TIMEOUT_S = 30.0
_ANNOUNCE_WAIT_STEPS = 100


async def forward(request: web.Request, leader: int) -> web.Response:
    """Send a write to the primary's HTTP listener (named in `_schemas` by its announcement) and
    answer with what it answers; 50003 when the primary is unknown or cannot be reached. A
    registration's id is waited for in this broker's replica, so a read here that follows sees it."""
    registry = registry_of(request)
    primary = (await registry.current()).primary
    for _ in range(_ANNOUNCE_WAIT_STEPS):  # a new leader announces itself as it loads _schemas
        if request.headers.get(FORWARDED_HEADER) or (primary is not None and primary[0] == leader):
            break
        await asyncio.sleep(0.05)
        leader = registry.leader_id()
        primary = (await registry.current()).primary
    if request.headers.get(FORWARDED_HEADER) or primary is None or primary[0] != leader:
        raise forward_error(
            f"broker {registry.broker_id} does not lead _schemas and the primary (broker "
            f"{leader}) has not announced its HTTP listener yet; retry"
        )
    url = primary[1] + request.path_qs
    headers = {FORWARDED_HEADER: str(registry.broker_id)}
    for name in ("Content-Type", "Authorization", "Accept"):
        if name in request.headers:
            headers[name] = request.headers[name]
    body = await request.read()
    try:
        timeout = aiohttp.ClientTimeout(total=_FORWARD_TIMEOUT_S)
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.request(request.method, url, data=body, headers=headers) as resp,
        ):
            payload = await resp.read()
            status = resp.status
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise forward_error(f"{url}: {exc}") from None
    if status == 200 and request.method == "POST" and request.path.endswith("/versions"):
        await _wait_for_id(registry, payload)
    return web.Response(body=payload, status=status, content_type=MEDIA_TYPE)


async def _wait_for_id(registry: SchemaRegistryComponent, payload: bytes) -> None:
    try:
        schema_id = json.loads(payload).get("id")
    except (ValueError, AttributeError):
        return
    for _ in range(100):
        if schema_id in (await registry.current()).by_id:
            return
        await asyncio.sleep(0.02)


def flag(request: web.Request, name: str) -> bool:
    return request.query.get(name, "false").strip().lower() == "true"


def subject_of(request: web.Request) -> str:
    subject = request.match_info["subject"]
    if not subject or len(subject) > 2048 or any(ord(c) < 32 for c in subject):
        raise RegistryError(422, 42208, f"The specified subject '{subject[:100]}' is not valid.")
    return subject
