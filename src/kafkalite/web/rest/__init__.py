"""The Confluent REST Proxy v3 subset at /v3: clusters, brokers, configs, topics, partitions, consumer
groups and produce, plus kafkalite's record read and offset reset for the console.

Errors answer as the REST Proxy does ({"error_code": <HTTP status>, "message": ...}); with SASL users
on the broker every request needs HTTP Basic credentials of one of them, and ACLs apply as User:<name>.
"""

from __future__ import annotations

import logging

from aiohttp import web

from kafkalite.web.rest import cluster, groups, offset_reset, records, topics
from kafkalite.web.rest._base import PRINCIPAL_KEY, Handler, RestError, broker_of
from kafkalite.web.rest.auth import BasicAuthenticator, auth_required
from kafkalite.web.server import BROKER_KEY

log = logging.getLogger("kafkalite.web.rest")

AUTH_KEY: web.AppKey[BasicAuthenticator] = web.AppKey("rest_auth", BasicAuthenticator)


@web.middleware
async def rest_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """For /v3 only: Basic auth when the broker has SASL users, and every failure as the REST
    Proxy's error body (never a traceback)."""
    if not (request.path == "/v3" or request.path.startswith("/v3/")):
        return await handler(request)
    try:
        if auth_required(broker_of(request)):
            request[PRINCIPAL_KEY] = await request.app[AUTH_KEY].authenticate(request)
        return await handler(request)
    except RestError as exc:
        return exc.response()
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return RestError(exc.status, f"HTTP {exc.status} {exc.reason}").response()
    except Exception:
        log.exception("REST %s %s failed", request.method, request.path)
        return RestError(500, "Internal server error").response()


def setup(app: web.Application) -> None:
    """Add the /v3 routes and their middleware."""
    app[AUTH_KEY] = BasicAuthenticator(app[BROKER_KEY])
    app.middlewares.append(rest_middleware)
    cluster.add_routes(app)
    topics.add_routes(app)
    records.add_routes(app)
    groups.add_routes(app)
    offset_reset.add_routes(app)
