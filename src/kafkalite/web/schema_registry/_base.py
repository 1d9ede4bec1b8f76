"""What the registry's routes share: the media type, JSON bodies in and out with Confluent's error
codes, query flags, and the broker's registry component.
"""

from __future__ import annotations

import json

from aiohttp import web

from kafkalite.broker.coordinators.schema_registry import SchemaRegistryComponent
from kafkalite.schemas.model import RegistryError, unprocessable
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
    raw = await request.content.read(MAX_BODY + 1)
    if len(raw) > MAX_BODY:
        raise RegistryError(413, 413, "HTTP 413 Request Entity Too Large")
    try:
        body = json.loads(raw) if raw else None
    except (ValueError, UnicodeDecodeError) as exc:
        raise RegistryError(400, 400, f"Unrecognized field or malformed JSON: {exc}") from None
    if not isinstance(body, dict):
        raise unprocessable("The request body must be a JSON object")
    return body


def flag(request: web.Request, name: str) -> bool:
    return request.query.get(name, "false").strip().lower() == "true"


def subject_of(request: web.Request) -> str:
    subject = request.match_info["subject"]
    if not subject or len(subject) > 2048 or any(ord(c) < 32 for c in subject):
        raise RegistryError(422, 42208, f"The specified subject '{subject[:100]}' is not valid.")
    return subject
