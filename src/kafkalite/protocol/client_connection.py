"""ClientConnection: the sans-IO client side of one Kafka connection — requests in, bytes out; bytes in,
responses out, matched to their requests by correlation id in order (Kafka answers in order).

No sockets and no event loop (h11's style): a caller feeds received bytes and writes what it is given.
"""

from __future__ import annotations

import enum
import struct
from collections import deque
from dataclasses import dataclass
from typing import Any

import kafkalite.protocol.messages  # noqa: F401  (registers every API)
from kafkalite.protocol.exceptions import DecodeError
from kafkalite.protocol.framing import DEFAULT_MAX_FRAME, FrameDecoder
from kafkalite.protocol.headers import (
    RequestHeader,
    decode_response_header,
    encode_request_header,
    request_header_version,
    response_header_version,
)
from kafkalite.protocol.primitives import Buffer, SplicedOutput
from kafkalite.protocol.schema import APIS

_LEN = struct.Struct(">i")


class ConnectionState(enum.Enum):
    OPEN = "open"
    CLOSED = "closed"  # closed by us: no more requests
    ERROR = "error"  # the peer broke the protocol: the connection must be dropped


# the one table of state changes: event -> states it may happen in
_ALLOWED: dict[str, frozenset[ConnectionState]] = {
    "send": frozenset({ConnectionState.OPEN}),
    "receive": frozenset({ConnectionState.OPEN, ConnectionState.CLOSED}),
    "close": frozenset({ConnectionState.OPEN, ConnectionState.CLOSED, ConnectionState.ERROR}),
}


class ProtocolError(Exception):
    """The connection cannot be used any more (the peer sent something we cannot match or read)."""


@dataclass(frozen=True, slots=True)
class Response:
    """A response event: the request's correlation id and api, and the decoded body."""

    correlation_id: int
    api_key: int
    api_version: int
    body: Any


@dataclass(slots=True)
class _InFlight:
    correlation_id: int
    api_key: int
    api_version: int
    header_version: int


class ClientConnection:
    """One connection's request/response bookkeeping. `send_request` answers the frame to write
    (`send_request_parts` the same frame as buffers, large values not copied); `receive_data` answers
    the responses completed by the bytes received.

    `exact=False` decodes responses leniently: bytes after the fields this version knows are ignored
    instead of breaking the connection (what Kafka's clients do).
    """

    def __init__(
        self,
        client_id: str | None,
        max_frame_size: int = DEFAULT_MAX_FRAME,
        *,
        exact: bool = True,
    ) -> None:
        self.client_id = client_id
        self.exact = exact
        self.state = ConnectionState.OPEN
        self._decoder = FrameDecoder(max_frame_size)
        self._in_flight: deque[_InFlight] = deque()
        self._next_correlation = 1

    def _check(self, event: str) -> None:
        if self.state not in _ALLOWED[event]:
            raise ProtocolError(f"cannot {event} on a connection in state {self.state.value}")

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    @property
    def bytes_needed(self) -> int:
        """Bytes still missing from the response frame being received (its length while none is)."""
        return self._decoder.bytes_needed

    def send_request(
        self, request: Any, version: int, *, expect_response: bool = True
    ) -> tuple[int, bytearray]:
        """(correlation id, the whole frame to write) for `request` at `version`."""
        out = bytearray(4)
        corr = self._encode(out, request, version, expect_response)
        _LEN.pack_into(out, 0, len(out) - 4)
        return corr, out

    def send_request_parts(
        self, request: Any, version: int, *, expect_response: bool = True
    ) -> tuple[int, list[Buffer]]:
        """(correlation id, the frame as buffers to write in order, e.g. with writelines) for
        `request` at `version`. Large bytes values (Produce's record batches) are passed through,
        not copied: they must not change until the buffers are written."""
        out = SplicedOutput(4)
        corr = self._encode(out, request, version, expect_response)
        _LEN.pack_into(out, 0, out.total_size - 4)
        return corr, out.parts()

    def _encode(self, out: bytearray, request: Any, version: int, expect_response: bool) -> int:
        """Encode header and body after `out`'s length prefix; the request is in flight after."""
        self._check("send")
        key = int(request.API_KEY)
        api = APIS[key]
        if version not in api.request.VALID_VERSIONS:
            raise ValueError(f"{api.name} has no version {version}")
        corr = self._next_correlation
        self._next_correlation = (corr + 1) & 0x7FFFFFFF or 1
        flexible = api.request.is_flexible(version)
        encode_request_header(
            out,
            RequestHeader(key, version, corr, self.client_id),
            request_header_version(key, version, flexible),
        )
        request.encode_into(out, version)
        if expect_response:
            self._in_flight.append(
                _InFlight(corr, key, version, response_header_version(key, flexible))
            )
        return corr

    def receive_data(self, data: bytes | bytearray | memoryview) -> list[Response]:
        """The responses the received bytes complete, oldest first. ProtocolError (and the ERROR
        state) on a malformed frame or a correlation id that is not the next one expected."""
        self._check("receive")
        try:
            frames = self._decoder.feed(data)
        except DecodeError as exc:
            self.state = ConnectionState.ERROR
            raise ProtocolError(f"malformed response frame: {exc}") from None
        out: list[Response] = []
        for frame in frames:
            if not self._in_flight:
                self.state = ConnectionState.ERROR
                raise ProtocolError("a response arrived with no request in flight")
            pending = self._in_flight.popleft()
            try:
                corr, pos = decode_response_header(frame, pending.header_version)
                if corr != pending.correlation_id:
                    raise ProtocolError(
                        f"response correlation id {corr} does not match the request's "
                        f"{pending.correlation_id}"
                    )
                body = APIS[pending.api_key].response.decode(
                    frame, pending.api_version, pos, exact=self.exact
                )
            except DecodeError as exc:
                self.state = ConnectionState.ERROR
                raise ProtocolError(
                    f"cannot decode {APIS[pending.api_key].name} v{pending.api_version} "
                    f"response: {exc}"
                ) from None
            except ProtocolError:
                self.state = ConnectionState.ERROR
                raise
            out.append(Response(corr, pending.api_key, pending.api_version, body))
        return out

    def close(self) -> list[int]:
        """No more requests; returns the correlation ids that will never be answered."""
        self._check("close")
        if self.state is ConnectionState.OPEN:
            self.state = ConnectionState.CLOSED
        lost = [p.correlation_id for p in self._in_flight]
        self._in_flight.clear()
        return lost
