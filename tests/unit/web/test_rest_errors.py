"""The /v3 error envelope: an unexpected failure answers 500 with the REST Proxy's body (no traceback),
a wrong method 405, and Kafka error codes map to the HTTP statuses the REST Proxy uses.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from kafkalite.protocol.errors import ErrorCode
from kafkalite.web.rest import rest_middleware
from kafkalite.web.rest._base import RestError, http_status
from kafkalite.web.server import BROKER_KEY


async def _boom(request: web.Request) -> web.Response:
    raise ValueError("secret internals")


async def _exercise() -> list[tuple[int, object]]:
    app = web.Application(middlewares=[rest_middleware])
    app[BROKER_KEY] = SimpleNamespace(sasl_listeners={})
    app.router.add_get("/v3/boom", _boom)
    app.router.add_get("/other/boom", _boom)
    out: list[tuple[int, object]] = []
    async with TestClient(TestServer(app)) as client:
        for method, path in (("GET", "/v3/boom"), ("POST", "/v3/boom")):
            resp = await client.request(method, path)
            out.append((resp.status, await resp.json()))
        resp = await client.get("/other/boom")  # not /v3: aiohttp's own answer
        out.append((resp.status, resp.content_type))
    return out


def test_failures_answer_the_rest_error_body() -> None:
    boom, wrong_method, other = asyncio.run(_exercise())
    assert boom == (500, {"error_code": 500, "message": "Internal server error"})
    assert wrong_method[0] == 405 and wrong_method[1] == {
        "error_code": 405,
        "message": "HTTP 405 Method Not Allowed",
    }
    assert other[0] == 500 and other[1] != "application/json"


@pytest.mark.parametrize(
    ("code", "status"),
    [
        (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, 404),
        (ErrorCode.TOPIC_AUTHORIZATION_FAILED, 403),
        (ErrorCode.TOPIC_ALREADY_EXISTS, 400),
        (ErrorCode.INVALID_CONFIG, 400),
        (ErrorCode.MESSAGE_TOO_LARGE, 413),
        (ErrorCode.NON_EMPTY_GROUP, 409),
        (ErrorCode.NOT_LEADER_OR_FOLLOWER, 421),
        (ErrorCode.NOT_ENOUGH_REPLICAS, 503),
        (ErrorCode.REQUEST_TIMED_OUT, 504),
        (ErrorCode.UNKNOWN_SERVER_ERROR, 500),
    ],
)
def test_kafka_errors_map_to_http(code: ErrorCode, status: int) -> None:
    assert http_status(code) == status
    err = RestError.kafka(code, "why")
    assert err.status == status and err.message == f"{code.name}: why"
