"""BrokerConnection over the sans-IO ClientConnection against a scripted broker: pipelined answers in any
chunking, acks=0, and a broker that breaks the protocol, stays silent or hangs up closes the connection.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

import kafkalite.protocol.messages  # noqa: F401
from kafkalite.client.config import COMMON, make_config
from kafkalite.client.errors import KafkaConnectionError, KafkaTimeoutError
from kafkalite.client.network import BrokerConnection, NetworkClient
from kafkalite.protocol.headers import (
    decode_request_header,
    encode_response_header,
    peek_api,
    request_header_version,
    response_header_version,
)
from kafkalite.protocol.schema import APIS

_LEN = struct.Struct(">i")
# (frame of the request, its api key, version and correlation id) -> bytes to answer with (None: none)
Script = Callable[[Any, int, int, int], Awaitable[bytes | None]]


def _answer(corr: int, key: int, version: int, body: Any) -> bytes:
    out = bytearray(4)
    flexible = APIS[key].request.is_flexible(version)
    encode_response_header(out, corr, response_header_version(key, flexible))
    body.encode_into(out, version)
    _LEN.pack_into(out, 0, len(out) - 4)
    return bytes(out)


def _metadata(corr: int, version: int, name: str) -> bytes:
    R: Any = APIS[3].response
    topic = R.MetadataResponseTopic(error_code=0, name=name, partitions=[])
    return _answer(corr, 3, version, R(brokers=[], cluster_id="x", controller_id=1, topics=[topic]))


async def _normal(req: Any, key: int, version: int, corr: int) -> bytes | None:
    if key == 3:
        return _metadata(corr, version, req.topics[0].name)
    if key == 0:
        return None if req.acks == 0 else _answer(corr, 0, version, APIS[0].response(responses=[]))
    raise AssertionError(key)


async def _run(
    script: Script,
    body: Callable[[BrokerConnection], Awaitable[None]],
    *,
    chunk: int = 0,
    hold: int = 1,
) -> None:
    """Serve `script` (answers written `chunk` bytes at a time, or whole; `hold` answers collected
    before writing them together), connect a BrokerConnection and run `body` with it."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        pending = b""
        held = 0
        try:
            while True:
                frame = await reader.readexactly(_LEN.unpack(await reader.readexactly(4))[0])
                key, ver, corr = peek_api(frame)
                api = APIS[key]
                hv = request_header_version(key, ver, api.request.is_flexible(ver))
                _, pos = decode_request_header(frame, hv)
                req = api.request.decode(frame, ver, pos)
                if key == 18:
                    R: Any = api.response
                    keys = [R.ApiVersion(api_key=k, min_version=0, max_version=9) for k in (0, 3)]
                    writer.write(_answer(corr, 18, ver, R(error_code=0, api_keys=keys)))
                    continue
                out = await script(req, key, ver, corr)
                if out is None:
                    continue
                pending += out
                held += 1
                if held < hold:
                    continue
                step = chunk or len(pending)
                for i in range(0, len(pending), step):
                    writer.write(pending[i : i + step])
                    await writer.drain()
                    await asyncio.sleep(0)
                pending, held = b"", 0
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    config = make_config(
        COMMON, None, {"bootstrap_servers": f"127.0.0.1:{port}", "request_timeout_ms": 2000}
    )
    client = NetworkClient(config, None)  # type: ignore[arg-type]
    conn = BrokerConnection(1, "127.0.0.1", port, client)
    try:
        await conn.connect()
        await body(conn)
    finally:
        conn.close()
        server.close()
        await server.wait_closed()


def _md(name: str) -> Any:
    req: Any = APIS[3].request
    return req(topics=[req.MetadataRequestTopic(name=name)], allow_auto_topic_creation=False)


@pytest.mark.parametrize(("chunk", "hold"), [(0, 1), (0, 3), (1, 3), (7, 2)])
def test_pipelined_requests_get_their_own_answers_however_the_bytes_arrive(
    chunk: int, hold: int
) -> None:
    async def body(conn: BrokerConnection) -> None:
        names = [f"t{i}" for i in range(6)]
        got = await asyncio.gather(*(conn.send(_md(n), version=9) for n in names))
        assert [r.topics[0].name for r in got] == names
        assert conn.in_flight == 0 and not conn.closed

    asyncio.run(_run(_normal, body, chunk=chunk, hold=hold))


def test_acks_zero_produce_expects_no_answer_and_the_next_request_still_matches() -> None:
    async def body(conn: BrokerConnection) -> None:
        req: Any = APIS[0].request
        produce = req(acks=0, timeout_ms=1000, topic_data=[])
        assert await conn.send(produce, version=9, expect_response=False) is None
        assert conn.in_flight == 0
        assert (await conn.send(_md("after"), version=9)).topics[0].name == "after"

    asyncio.run(_run(_normal, body))


def test_a_wrong_correlation_id_closes_the_connection_and_says_why() -> None:
    async def wrong(req: Any, key: int, version: int, corr: int) -> bytes:
        return _metadata(corr + 7, version, "x")

    async def body(conn: BrokerConnection) -> None:
        with pytest.raises(KafkaConnectionError, match=r"broke the protocol.*correlation id"):
            await conn.send(_md("x"), version=9)
        assert conn.closed
        with pytest.raises(KafkaConnectionError, match="closed"):
            await conn.send(_md("x"), version=9)

    asyncio.run(_run(wrong, body))


def test_garbage_fails_every_request_in_flight() -> None:
    async def garbage(req: Any, key: int, version: int, corr: int) -> bytes:
        return b"\xff\xff\xff\xff" if req.topics[0].name == "t2" else _metadata(corr, version, "?")

    async def body(conn: BrokerConnection) -> None:
        first = asyncio.ensure_future(conn.send(_md("t1"), version=9))
        await asyncio.sleep(0.05)  # t1 is answered before t2 is sent
        results = await asyncio.gather(
            *(conn.send(_md(n), version=9) for n in ("t2", "t3")), return_exceptions=True
        )
        assert (await first).topics[0].name == "?"
        for r in results:
            assert isinstance(r, KafkaConnectionError) and "negative frame length" in str(r)

    asyncio.run(_run(garbage, body))


def test_a_silent_broker_times_out_and_the_connection_is_closed() -> None:
    async def silent(req: Any, key: int, version: int, corr: int) -> None:
        return None

    async def body(conn: BrokerConnection) -> None:
        with pytest.raises(KafkaTimeoutError, match=r"no response in 0\.2 s"):
            await conn.send(_md("x"), version=9, timeout=0.2)
        assert conn.closed and conn.in_flight == 0

    asyncio.run(_run(silent, body))


def test_a_broker_hanging_up_mid_request_fails_it() -> None:
    async def hang_up(req: Any, key: int, version: int, corr: int) -> bytes:
        raise ConnectionError("bye")

    async def body(conn: BrokerConnection) -> None:
        with pytest.raises(KafkaConnectionError, match="closed the connection with 1 request"):
            await conn.send(_md("x"), version=9)
        assert conn.closed

    asyncio.run(_run(hang_up, body))
