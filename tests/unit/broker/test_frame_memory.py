"""Memory at the door (issue 36): big announced frames cost what arrives, queued.max.request.bytes (KIP-72)
stops reading while its pool is used up and loses nothing, and an oversized frame closes with a clear line.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import socket
import struct
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest
from broker_wire_helpers import encode_request, is_closed, read_frame

from kafkalite.protocol.schema import APIS
from kafkalite.records.batch import build_batch
from kafkalite.testing import Broker

MiB = 1 << 20
PROBE = Path(__file__).resolve().parents[3] / "bench" / "probe_frame_memory.py"


def _probe_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("probe_frame_memory", PROBE)
    assert spec is not None and spec.loader is not None
    module = sys.modules.get(spec.name)
    if module is None:
        module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return module


def wait_until(what: str, check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def produce(topic: str, value: bytes, corr: int) -> bytes:
    prod = APIS[0].request
    td = prod.TopicProduceData(
        name=topic,
        partition_data=[
            prod.TopicProduceData.PartitionProduceData(
                index=0, records=build_batch([(None, value)])
            )
        ],
    )
    return encode_request(
        prod(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[td]), 9, corr
    )


def answer_corr(sock: socket.socket) -> int:
    return int(struct.unpack(">i", read_frame(sock)[:4])[0])


def test_trickled_big_frames_cost_what_arrives_not_what_is_announced(tmp_path: Path) -> None:
    """20 connections announce 100 MiB and send 1 MiB: the broker holds about what they sent (it
    held their announced 2 GB before) and answers a normal client meanwhile and after. The broker
    runs in this process (bench/probe_frame_memory.py runs it apart, with 200 connections)."""
    probe = _probe_module()
    with Broker(tmp_path) as b:
        assert probe.api_versions_answered(b.port)
        before = probe.rss_mib(os.getpid())
        socks = probe.trickle(b.port, 20, 100 * MiB, 1 * MiB)
        try:
            assert probe.settle(b.port) == 0  # the broker read all of it (no pool: unbounded)
            grown = probe.rss_mib(os.getpid()) - before
            assert probe.api_versions_answered(b.port)
        finally:
            for s in socks:
                s.close()
        assert probe.api_versions_answered(b.port)
    print(f"20 x (announce 100 MiB, send 1 MiB): RSS +{grown:.1f} MiB")
    # 20 MiB arrived; each body's buffer is at most twice what it holds, plus the heap's slack
    assert grown < 80


@pytest.fixture(scope="module")
def pooled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """A broker with a 1 MiB memory pool, requests of up to 8 MiB and batches of up to 4 MiB."""
    config = {
        "queued.max.request.bytes": MiB,
        "socket.request.max.bytes": 8 * MiB,
        "message.max.bytes": 4 * MiB,
    }
    with Broker(tmp_path_factory.mktemp("pooled"), config=config) as b:
        yield b


def test_memory_pool_stops_reading_and_resumes_without_losing_a_request(pooled: Broker) -> None:
    b = pooled
    b.create_topic("big")
    b.create_topic("small")
    pool = b.server.memory_pool
    assert pool is not None and pool.size == MiB and pool.used == 0
    big = produce("big", b"b" * (3 * MiB), 1)
    with socket.create_connection(("127.0.0.1", b.port), timeout=10) as trickler:
        trickler.sendall(big[:MiB])  # announces ~3 MiB: the whole pool, and more, is taken
        wait_until("the big request's memory", lambda: pool.used >= len(big) - 4)
        assert pool.out_of_memory
        with socket.create_connection(("127.0.0.1", b.port), timeout=10) as client:
            # read before the connection knew the pool was out of memory: answered; then the
            # connection waits for memory
            client.sendall(produce("small", b"s1", 1))
            assert answer_corr(client) == 1
            wait_until("the client waiting for memory", lambda: pool.waiting == 1)
            client.sendall(b"".join(produce("small", b"s%d" % i, i) for i in range(2, 7)))
            client.settimeout(0.3)
            with pytest.raises(TimeoutError):  # not read, so not answered
                client.recv(1)
            small_log = b.server.get_log("small", 0)
            assert small_log is not None and small_log.log_end_offset == 1
            # the big request completes (it had its memory), is handled, and frees the pool
            trickler.sendall(big[MiB:])
            assert answer_corr(trickler) == 1
            client.settimeout(10)
            assert [answer_corr(client) for _ in range(2, 7)] == [2, 3, 4, 5, 6]
            assert small_log.log_end_offset == 6
            big_log = b.server.get_log("big", 0)
            assert big_log is not None and big_log.log_end_offset == 1
            wait_until("the pool emptied", lambda: pool.used == 0 and pool.waiting == 0)


def test_closing_connections_give_their_memory_back(pooled: Broker) -> None:
    pool = pooled.server.memory_pool
    assert pool is not None and pool.used == 0
    socks = [socket.create_connection(("127.0.0.1", pooled.port), timeout=10) for _ in range(3)]
    for s in socks:
        s.sendall(struct.pack(">i", 5 * MiB) + b"\x00" * 1000)
    wait_until("one request holding the pool, two waiting",
               lambda: pool.used == 5 * MiB and pool.waiting == 2)  # fmt: skip
    for s in socks:
        s.close()
    wait_until("the pool emptied", lambda: pool.used == 0 and pool.waiting == 0)
    assert _probe_module().api_versions_answered(pooled.port)


def test_oversized_frame_closes_the_connection_with_an_invalid_receive_line(
    pooled: Broker, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="kafkalite.broker.connection")
    with socket.create_connection(("127.0.0.1", pooled.port), timeout=10) as s:
        s.sendall(struct.pack(">i", 9 * MiB) + b"\x00" * 100)
        assert is_closed(s)
    wait_until("the log line", lambda: "invalid receive" in caplog.text)
    line = f"invalid receive (size = {9 * MiB} larger than {8 * MiB}, socket.request.max.bytes)"
    assert line in caplog.text
    pool = pooled.server.memory_pool
    assert pool is not None and pool.used == 0  # refused before it took any memory
