"""Helpers for broker tests that speak the wire protocol by hand (encode a request, read a frame)."""

from __future__ import annotations

import socket
import struct

from kafkalite.protocol.headers import RequestHeader, encode_request_header, request_header_version


def encode_request(req, version: int, corr: int, client_id: str = "test") -> bytes:  # type: ignore[no-untyped-def]
    out = bytearray(4)
    hv = request_header_version(req.API_KEY, version, req.is_flexible(version))
    encode_request_header(out, RequestHeader(req.API_KEY, version, corr, client_id), hv)
    req.encode_into(out, version)
    struct.pack_into(">i", out, 0, len(out) - 4)
    return bytes(out)


def read_frame(sock: socket.socket) -> bytes:
    def exact(n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed")
            buf += chunk
        return buf

    (size,) = struct.unpack(">i", exact(4))
    return exact(size)


def is_closed(sock: socket.socket, timeout: float = 5.0) -> bool:
    sock.settimeout(timeout)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False
