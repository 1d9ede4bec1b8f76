"""A deferred answer (acks=all waiting for the ISR) lets the connection go on with the next requests,
and every answer still leaves in request order, whatever order they become ready in."""

from __future__ import annotations

import asyncio
import struct
from types import SimpleNamespace
from typing import Any

from kafkalite.broker.context import DeferredResponse
from kafkalite.broker.dispatch import DispatchTable
from kafkalite.broker.network.connection import Connection
from kafkalite.broker.stats import BrokerStats


class Transport:
    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.closed = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 1) if name == "peername" else default

    def write(self, data: bytes) -> None:
        self.written.append(bytes(data))

    def set_write_buffer_limits(self, high: int = 0, low: int = 0) -> None: ...
    def get_write_buffer_size(self) -> int:
        return 0

    def pause_reading(self) -> None: ...
    def resume_reading(self) -> None: ...
    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True


class Server:
    """Frames are b"D<n>" (answered later, when the test resolves future n) or b"I<n>" (now)."""

    def __init__(self) -> None:
        self.config = SimpleNamespace(
            socket_request_max_bytes=1 << 20, connections_max_idle_ms=1000
        )
        self.memory_pool = None
        self.connections: set[Any] = set()
        self.dispatch = DispatchTable([])  # the frames here never reach a real request path
        self.sendfile_enabled = False
        self.later: dict[int, asyncio.Future[Any]] = {}
        self.handled: list[bytes] = []
        self.stats = BrokerStats()

    async def handle_frame(self, conn: Any, frame: bytes) -> Any:
        self.handled.append(frame)
        n = int(frame[1:])
        if frame[:1] == b"D":
            fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            self.later[n] = fut
            return DeferredResponse(fut)
        return [b"answer-%d;" % n]


def frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


async def _settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


def test_answers_keep_request_order_while_deferred_ones_wait() -> None:
    async def run() -> None:
        server = Server()
        conn = Connection(server)  # type: ignore[arg-type]
        t = Transport()
        conn.connection_made(t)  # type: ignore[arg-type]
        conn.data_received(b"".join(frame(b) for b in (b"D1", b"I2", b"D3", b"I4")))
        await _settle()
        # every request was handled although the first one's answer is not ready
        assert server.handled == [b"D1", b"I2", b"D3", b"I4"]
        assert t.written == []
        server.later[3].set_result([b"answer-3;"])
        await _settle()
        assert t.written == []  # 3 is ready, but 1 is ahead of it
        server.later[1].set_result([b"answer-1;"])
        await _settle()
        assert b"".join(t.written) == b"answer-1;answer-2;answer-3;answer-4;"
        # with nothing deferred any more, answers go straight out again
        conn.data_received(frame(b"I5"))
        await _settle()
        assert b"".join(t.written).endswith(b"answer-4;answer-5;")
        assert not conn.busy

    asyncio.run(run())


def test_a_deferred_answer_of_nothing_and_a_closed_connection() -> None:
    async def run() -> None:
        server = Server()
        conn = Connection(server)  # type: ignore[arg-type]
        t = Transport()
        conn.connection_made(t)  # type: ignore[arg-type]
        conn.data_received(frame(b"D1") + frame(b"I2"))
        await _settle()
        server.later[1].set_result(None)  # e.g. acks=0: no answer at all
        await _settle()
        assert b"".join(t.written) == b"answer-2;"
        conn.data_received(frame(b"D3") + frame(b"I4"))
        await _settle()
        conn.connection_lost(None)  # the client went away while 3 waited: its wait is cancelled
        await _settle()
        assert server.later[3].cancelled()
        assert b"".join(t.written) == b"answer-2;"
        assert not conn.busy

    asyncio.run(run())
