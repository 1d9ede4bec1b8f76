"""A replaying proxy in front of a broker: the consume ceiling of a client, with a broker doing no work.

Every request is forwarded to the upstream broker except Fetch requests it has already seen (same
partitions and fetch offsets), which it answers from memory with the recorded response. After one warm-up
pass over a topic, a second consumer reading the same range is served entirely from RAM by one
`sendall` per answer: what that consumer then reaches is what the client can take in, whatever the broker.
With `sink`, Produce requests are acknowledged by the proxy itself (offsets invented, nothing stored):
the most a producer client sends, whatever the broker. Run it as its own process (`python replay_proxy.py UPSTREAM` prints its address) so it does not share the
client's interpreter lock.
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from kafkalite.protocol.headers import (
    decode_request_header,
    request_header_version,
    response_header_version,
)
from kafkalite.protocol.messages import fetch as _fetch  # noqa: F401  (registers the API)
from kafkalite.protocol.messages import groups as _groups  # noqa: F401
from kafkalite.protocol.messages import metadata as _metadata  # noqa: F401
from kafkalite.protocol.messages import produce as _produce  # noqa: F401
from kafkalite.protocol.schema import APIS

PRODUCE_KEY = 0
FETCH_KEY = 1
METADATA_KEY = 3
FIND_COORDINATOR_KEY = 10


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise ConnectionError("peer closed")
        buf += chunk
    return bytes(buf)


def _recv_frame(sock: socket.socket) -> bytes:
    (size,) = struct.unpack(">i", _recv_exact(sock, 4))
    return _recv_exact(sock, size)


def _fetch_key(frame: bytes) -> tuple[object, ...] | None:
    """(version, per-partition fetch offsets and limits) of a Fetch request, or None for other APIs."""
    key, version = struct.unpack_from(">hh", frame)
    if key != FETCH_KEY:
        return None
    api = APIS[FETCH_KEY]
    _header, pos = decode_request_header(
        frame, request_header_version(key, version, api.request.is_flexible(version))
    )
    req = api.request.decode(frame[pos:], version)
    parts = tuple(
        (
            t.topic if version < 13 else str(t.topic_id),
            p.partition,
            p.fetch_offset,
            p.partition_max_bytes,
        )
        for t in req.topics
        for p in t.partitions
    )
    return (version, req.max_bytes, parts)


def _readdress(frame: bytes, body: bytes, host: str, port: int) -> bytes:
    """A Metadata or FindCoordinator answer pointing at the proxy instead of the upstream broker, so the
    client keeps talking through the proxy; other answers unchanged."""
    key, version = struct.unpack_from(">hh", frame)
    if key not in (METADATA_KEY, FIND_COORDINATOR_KEY):
        return body
    api = APIS[key]
    flexible = api.response.is_flexible(version)
    hlen = 5 if response_header_version(key, flexible) >= 1 else 4  # correlation id (+ empty tags)
    resp = api.response.decode(body[hlen:], version)
    nodes = resp.brokers if key == METADATA_KEY else (resp.coordinators if version >= 4 else [resp])
    for node in nodes:
        node.host, node.port = host, port
    return body[:hlen] + resp.encode(version)


class _Offsets:
    """Next offset per partition for the answers the sink invents."""

    def __init__(self) -> None:
        self.next: dict[tuple[str, int], int] = {}
        self.lock = threading.Lock()

    def take(self, topic: str, partition: int, count: int) -> int:
        with self.lock:
            base = self.next.get((topic, partition), 0)
            self.next[(topic, partition)] = base + count
            return base


def _sink_answer(frame: bytes, offsets: _Offsets) -> bytes | None:
    """A success answer to a Produce request, made without storing anything (None: acks=0)."""
    key, version = struct.unpack_from(">hh", frame)
    api = APIS[PRODUCE_KEY]
    flexible = api.request.is_flexible(version)
    _header, pos = decode_request_header(frame, request_header_version(key, version, flexible))
    req = api.request.decode(frame[pos:], version)
    if req.acks == 0:
        return None
    resp_cls = api.response
    topic_cls = resp_cls.TopicProduceResponse
    part_cls = topic_cls.PartitionProduceResponse
    topics = []
    for t in req.topic_data:
        parts = []
        for pd in t.partition_data:
            # the record count of each v2 batch is its last 4 header bytes (offset 57)
            blob = bytes(pd.records or b"")
            count, at = 0, 0
            while at + 61 <= len(blob):
                count += struct.unpack_from(">i", blob, at + 57)[0]
                at += 12 + struct.unpack_from(">i", blob, at + 8)[0]
            base = offsets.take(t.name, pd.index, count)
            parts.append(part_cls(index=pd.index, error_code=0, base_offset=base))
        topics.append(topic_cls(name=t.name, partition_responses=parts))
    body = resp_cls(responses=topics, throttle_time_ms=0).encode(version)
    hdr = frame[4:8] + (b"\x00" if response_header_version(key, flexible) >= 1 else b"")
    return struct.pack(">i", len(hdr) + len(body)) + hdr + body


class ReplayProxy:
    """Listens on an ephemeral loopback port (`address`); one thread per client connection."""

    def __init__(self, upstream: str, *, sink: bool = False) -> None:
        host, port = upstream.rsplit(":", 1)
        # sink: Produce requests are acknowledged here and never reach the broker (produce ceiling)
        self.sink = sink
        self._offsets = _Offsets()
        self.upstream = (host, int(port))
        self.cache: dict[tuple[object, ...], bytes] = {}
        self._lock = threading.Lock()
        self._server = socket.create_server(("127.0.0.1", 0))
        self._own = ("127.0.0.1", int(self._server.getsockname()[1]))
        self.address = f"127.0.0.1:{self._own[1]}"
        self._closed = False

    def serve_forever(self) -> None:
        while not self._closed:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        up = socket.create_connection(self.upstream)
        up.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with conn, up:
            try:
                while True:
                    frame = _recv_frame(conn)
                    if self.sink and frame[:2] == b"\x00\x00":
                        answer = _sink_answer(frame, self._offsets)
                        if answer is not None:
                            conn.sendall(answer)
                        continue
                    key = _fetch_key(frame)
                    corr = frame[4:8]
                    cached = self.cache.get(key) if key is not None else None
                    if cached is not None:
                        # the recorded answer with this request's correlation id
                        conn.sendall(b"".join((cached[:4], corr, memoryview(cached)[8:])))
                        continue
                    up.sendall(struct.pack(">i", len(frame)) + frame)
                    body = _readdress(frame, _recv_frame(up), *self._own)
                    out = struct.pack(">i", len(body)) + body
                    if key is not None and len(body) > 4096:  # an answer that carried records
                        with self._lock:
                            self.cache[key] = out
                    conn.sendall(out)
            except (ConnectionError, OSError):
                return

    def close(self) -> None:
        self._closed = True
        self._server.close()


@contextlib.contextmanager
def replay_proxy(upstream: str, *, sink: bool = False) -> Iterator[tuple[str, int]]:
    """Run a ReplayProxy in its own process; yields (its address, its pid)."""
    proc = subprocess.Popen(
        [sys.executable, __file__, upstream, *(["--sink"] if sink else [])],
        stdout=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )
    try:
        assert proc.stdout is not None
        address = proc.stdout.readline().strip()
        if not address:
            raise RuntimeError("replay proxy did not start")
        yield address, proc.pid
    finally:
        proc.terminate()
        proc.wait(10)


def main() -> None:
    proxy = ReplayProxy(sys.argv[1], sink="--sink" in sys.argv[2:])
    print(proxy.address, flush=True)
    proxy.serve_forever()


if __name__ == "__main__":
    main()
