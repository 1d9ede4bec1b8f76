"""The Confluent Schema Registry API on the broker's HTTP listener (/subjects, /schemas, /config,
/mode, /compatibility, /v1/metadata/id): media types, error bodies, Basic auth and write forwarding.

Every failure answers Confluent's body {"error_code", "message"}; a write on a broker that does not
lead `_schemas` is forwarded to the leader's HTTP listener (see `forward`).
"""

from __future__ import annotations

import logging

from aiohttp import web

from kafkalite.schemas.model import RegistryError
from kafkalite.web.rest._base import PRINCIPAL_KEY, Handler, RestError, broker_of
from kafkalite.web.rest.auth import BasicAuthenticator, auth_required
from kafkalite.web.schema_registry import routes
from kafkalite.web.schema_registry._base import (
    AUTH_KEY,
    MAX_BODY,
    MEDIA_TYPE,
    PREFIXES,
    error_response,
)
from kafkalite.web.server import BROKER_KEY

log = logging.getLogger("kafkalite.web.schemas")

_BODY_TYPES = (
    "application/vnd.schemaregistry.v1+json",
    "application/vnd.schemaregistry+json",
    "application/json",
    "application/octet-stream",
)
_ACCEPTS = (*_BODY_TYPES[:3], "*/*", "application/*")


def _is_registry_path(path: str) -> bool:
    return any(path == p or path.startswith(p + "/") for p in PREFIXES)


def _accepts(header: str | None) -> bool:
    if not header:
        return True
    kinds = [part.split(";")[0].strip().lower() for part in header.split(",")]
    return any(k in _ACCEPTS for k in kinds)


@web.middleware
async def registry_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """For the registry's paths: Basic auth when the broker has SASL users, media types, body
    size, and every failure as Confluent's error body (never a traceback)."""
    if not _is_registry_path(request.path):
        return await handler(request)
    try:
        if auth_required(broker_of(request)):
            try:
                request[PRINCIPAL_KEY] = await request.app[AUTH_KEY].authenticate(request)
            except RestError as exc:
                raise RegistryError(exc.status, exc.status, exc.message) from None
        if not _accepts(request.headers.get("Accept")):
            raise RegistryError(406, 406, "HTTP 406 Not Acceptable")
        if request.method in ("POST", "PUT"):
            ctype = request.headers.get("Content-Type", "").split(";")[0].strip().lower()
            if ctype and ctype not in _BODY_TYPES:
                raise RegistryError(415, 415, "HTTP 415 Unsupported Media Type")
            if (request.content_length or 0) > MAX_BODY:
                raise RegistryError(413, 413, "HTTP 413 Request Entity Too Large")
        return await handler(request)
    except RegistryError as exc:
        return error_response(exc)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return error_response(
            RegistryError(exc.status, exc.status, f"HTTP {exc.status} {exc.reason}")
        )
    except Exception:
        log.exception("schema registry %s %s failed", request.method, request.path)
        return error_response(RegistryError(500, 500, "Internal Server Error"))


def setup(app: web.Application) -> None:
    """Add the registry's routes and their middleware."""
    if AUTH_KEY not in app:
        app[AUTH_KEY] = BasicAuthenticator(app[BROKER_KEY])
    app.middlewares.append(registry_middleware)
    routes.add_routes(app)


__all__ = ["MEDIA_TYPE", "setup"]
