"""The broker-to-broker channel against a real broker: version negotiation, pipelined requests answered
in order, a clear ChannelError for a refused connection or a peer that never answers, and reconnection.
"""

from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path

import pytest

from kafkalite.cluster.channel import BrokerChannel, ChannelError, ChannelManager
from kafkalite.protocol.messages.metadata import MetadataRequest
from kafkalite.testing import Broker


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_requests_are_pipelined_and_answered_in_order(tmp_path: Path) -> None:
    with Broker(tmp_path / "b", num_partitions=1) as b:
        b.create_topic("a", 2)

        async def run() -> list[int]:
            ch = BrokerChannel(b.host, b.port)
            try:
                reqs = [
                    ch.send(
                        MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="a")])
                    )
                    for _ in range(20)
                ]
                answers = await asyncio.gather(*reqs)
                assert ch.versions[3][1] >= 12  # negotiated from ApiVersions
                return [len(r.topics[0].partitions) for r in answers]
            finally:
                await ch.close()

        assert asyncio.run(run()) == [2] * 20


def test_refused_and_silent_peers_give_a_channel_error() -> None:
    port = _free_port()

    async def refused() -> None:
        ch = BrokerChannel("127.0.0.1", port, connect_timeout_s=2)
        started = time.monotonic()
        with pytest.raises(ChannelError, match=f"127.0.0.1:{port}"):
            await ch.send(MetadataRequest(topics=None))
        assert time.monotonic() - started < 2

    async def silent() -> None:
        async def swallow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.read(1 << 16)
            await asyncio.sleep(10)

        server = await asyncio.start_server(swallow, "127.0.0.1", 0)
        p = server.sockets[0].getsockname()[1]
        ch = BrokerChannel("127.0.0.1", p, request_timeout_s=0.3)
        with pytest.raises(ChannelError, match="no answer"):
            await ch.send(MetadataRequest(topics=None))
        await ch.close()
        server.close()

    asyncio.run(refused())
    asyncio.run(silent())


def test_a_channel_reconnects_after_the_broker_restarts(tmp_path: Path) -> None:
    port = _free_port()

    async def ask(ch: BrokerChannel) -> int:
        return len((await ch.send(MetadataRequest(topics=None))).brokers)

    with Broker(tmp_path / "b", port=port) as b:
        loop = asyncio.new_event_loop()
        mgr = ChannelManager()
        ch = loop.run_until_complete(_get(mgr, b.host, port))
        assert loop.run_until_complete(ask(ch)) == 1
    with pytest.raises(ChannelError):
        loop.run_until_complete(ask(ch))
    with Broker(tmp_path / "b", port=port):
        deadline = time.monotonic() + 10
        while True:
            try:
                assert loop.run_until_complete(ask(ch)) == 1
                break
            except ChannelError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
    loop.run_until_complete(mgr.close_all())
    loop.close()


async def _get(mgr: ChannelManager, host: str, port: int) -> BrokerChannel:
    return mgr.get(1, host, port)
