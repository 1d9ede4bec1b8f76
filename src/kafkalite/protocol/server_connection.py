"""ServerConnection: the sans-IO server side of one Kafka connection — bytes in, events out (a decoded
request, a SASL v0 raw token, a protocol violation); responses in, framed bytes out.

It owns framing, request and response header versions, the SASL v0 raw-token phase, the KIP-511 ApiVersions
downgrade and the throttle time, set on the response object before it is encoded. No sockets, no event loop.
"""

from __future__ import annotations

import enum
import os
import struct
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from kafkalite.protocol import primitives as p
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.exceptions import DecodeError
from kafkalite.protocol.framing import DEFAULT_MAX_FRAME, FrameDecoder, FrameTooLarge
from kafkalite.protocol.headers import (
    API_VERSIONS_KEY,
    RequestHeader,
    decode_request_header,
    encode_response_header,
    peek_api,
    request_header_version,
    response_header_version,
)
from kafkalite.protocol.schema import Api

_LEN = struct.Struct(">i")
MAX_THROTTLE_MS = 0x7FFFFFFF


class ServedApi(Protocol):
    """One API a server answers: its schema, the versions it serves and, for a hot API, hand-written
    codecs (`decode_request(buf, pos, version)` -> request or None for the schema's decoder;
    `encode_response(out, response, version)`)."""

    @property
    def api(self) -> Api: ...
    @property
    def min_version(self) -> int: ...
    @property
    def max_version(self) -> int: ...
    @property
    def decode_request(self) -> Callable[[bytes | bytearray, int, int], Any] | None: ...
    @property
    def encode_response(self) -> Callable[[bytearray, Any, int], None] | None: ...

    def supports(self, version: int) -> bool: ...


S = TypeVar("S", bound=ServedApi)
S_co = TypeVar("S_co", bound=ServedApi, covariant=True)


class ServedApis(Protocol[S_co]):
    """The APIs a server answers (the broker's dispatch table) and its ApiVersions answer."""

    def get(self, key: int) -> S_co | None: ...

    def api_versions_response(self, error_code: int = 0) -> Any: ...


class FileRegion(Protocol):
    """A stretch of a file sent as it is (storage's FileSlice): an open file descriptor, a position
    and a length."""

    @property
    def fileno(self) -> int: ...
    @property
    def position(self) -> int: ...
    @property
    def length(self) -> int: ...

    def read_bytes(self) -> bytes: ...


@dataclass(slots=True)
class SlicedResponse:
    """A response whose `records` fields hold placeholder markers standing for file regions.

    `regions` maps each marker (unique bytes) to the region that replaces it on the wire.
    """

    response: Any
    regions: dict[bytes, FileRegion] = field(default_factory=dict)

    def placeholder(self, region: FileRegion) -> bytes:
        marker = b"\x00kl-slice\x00" + os.urandom(10) + len(self.regions).to_bytes(4, "big")
        self.regions[marker] = region
        return marker


class ConnectionState(enum.Enum):
    OPEN = "open"  # requests, each with a header
    SASL_RAW_TOKEN = "sasl-raw-token"  # after SaslHandshake v0: bare SASL tokens, no header
    ERROR = "error"  # the peer broke the protocol: the connection must be dropped


@dataclass(slots=True)
class RequestReceived(Generic[S]):
    """A request decoded: its header, version, body, the API serving it and where the body starts in
    `frame` (a storage error answer rebuilds its entries from there)."""

    header: RequestHeader
    api_version: int
    flexible: bool
    body: Any
    served: S
    frame: bytes | bytearray
    body_offset: int

    @property
    def api_key(self) -> int:
        return self.header.api_key

    @property
    def correlation_id(self) -> int:
        return self.header.correlation_id


@dataclass(slots=True)
class SaslTokenReceived:
    """A bare SASL token (the raw-token phase after SaslHandshake v0); answer with send_sasl_token."""

    token: bytes


@dataclass(slots=True)
class AnsweredByConnection:
    """A request the connection answered itself (an ApiVersions request at a version it does not
    serve, or that cannot be decoded): write `data`."""

    correlation_id: int
    data: bytearray


@dataclass(slots=True)
class ProtocolViolation:
    """Something that is not a request this server can serve (a malformed or oversized frame, an
    unknown API or version, an undecodable body, a request the gate refused): close the connection."""

    reason: str
    api_key: int = -1
    frame_too_large: FrameTooLarge | None = None
    refused: bool = False  # the `admit` gate (e.g. SASL) refused it; `reason` is the gate's


Event = RequestReceived[S] | SaslTokenReceived | AnsweredByConnection | ProtocolViolation


def set_throttle_time(response: Any, throttle_ms: int) -> None:
    """Put a quota's throttle time in a response that has the field (every version from KIP-219's)."""
    target = response.response if type(response) is SlicedResponse else response
    if hasattr(target, "throttle_time_ms"):
        target.throttle_time_ms = min(throttle_ms, MAX_THROTTLE_MS)


def response_size(pieces: list[Any]) -> int:
    """Bytes on the wire of an encoded response (file regions by their length)."""
    return sum(len(x) if isinstance(x, bytes | bytearray) else x.length for x in pieces)


class ServerConnection(Generic[S]):
    """One connection's server-side protocol state. Frames come from `receive_frames` (the socket's
    bytes; `get_buffer`-style reading goes through `decoder`) and each is read with `read_frame` in
    order, when it is its turn (the SASL phase may change between two frames); `receive_data` and
    `next_event` do both for a caller that handles events as they come. Nothing here raises on bad
    input: it becomes a ProtocolViolation event."""

    __slots__ = ("apis", "decoder", "state", "_frames")

    def __init__(self, apis: ServedApis[S], max_frame_size: int = DEFAULT_MAX_FRAME) -> None:
        self.apis = apis
        self.decoder = FrameDecoder(max_frame_size)
        self.state = ConnectionState.OPEN
        self._frames: deque[bytes | bytearray] | None = None

    # -- bytes in
    def receive_frames(self, data: bytes | bytearray | memoryview | int) -> list[Any]:
        """The whole frames completed by `data` (or by `data` bytes written into the last
        decoder.get_buffer()), or [ProtocolViolation] when the framing is broken."""
        try:
            if type(data) is int:
                return self.decoder.buffer_updated(data)
            return self.decoder.feed(data)  # type: ignore[arg-type]
        except FrameTooLarge as exc:
            self.state = ConnectionState.ERROR
            return [ProtocolViolation(str(exc), frame_too_large=exc)]
        except DecodeError as exc:
            self.state = ConnectionState.ERROR
            return [ProtocolViolation(f"malformed frame: {exc}")]

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        """Buffer received bytes; `next_event` reads what they complete."""
        if self._frames is None:
            self._frames = deque()
        self._frames.extend(self.receive_frames(data))

    def next_event(self) -> Event[S] | None:
        """The next event of the bytes received, or None until more bytes arrive."""
        if not self._frames:
            return None
        item = self._frames.popleft()
        if isinstance(item, ProtocolViolation):
            self._frames.clear()
            return item
        return self.read_frame(item)

    def read_frame(
        self, frame: bytes | bytearray, admit: Callable[[int], str | None] | None = None
    ) -> Event[S]:
        """What one frame is, read in the connection's current state. `admit(api_key)` may refuse a
        request before anything else is read (why, or None to go on)."""
        if type(frame) is bytearray and (
            frame[:2] != b"\x00\x00" or self.state is not ConnectionState.OPEN
        ):
            # a big frame received in place: only Produce is decoded (and stamped) in place
            frame = bytes(frame)
        if self.state is ConnectionState.SASL_RAW_TOKEN:
            return SaslTokenReceived(bytes(frame))
        if self.state is ConnectionState.ERROR:
            return ProtocolViolation("the connection already broke the protocol")
        try:
            key, version, corr = peek_api(frame)
        except DecodeError as exc:
            return self._violation(str(exc))
        if admit is not None:
            why = admit(key)
            if why is not None:
                self.state = ConnectionState.ERROR
                return ProtocolViolation(why, key, refused=True)
        served = self.apis.get(key)
        if key == API_VERSIONS_KEY and served is not None and version > served.max_version:
            # KIP-511: a newer client learns our versions from a v0 answer and picks one
            return self._answer_api_versions(corr, ErrorCode.UNSUPPORTED_VERSION)
        if served is None or not served.supports(version):
            return self._violation(
                f"unsupported request api_key={key} version={version} (correlation id {corr})",
                key,
            )
        api = served.api
        flexible = api.request.is_flexible(version)
        try:
            header, pos = decode_request_header(
                frame, request_header_version(key, version, flexible)
            )
            body = None
            decode = served.decode_request
            if decode is not None:
                body = decode(frame, pos, version)
            if body is None:
                raw = frame if type(frame) is bytes else bytes(frame)
                body = api.request.decode(raw, version, pos, exact=False)
        except DecodeError as exc:
            if key == API_VERSIONS_KEY:
                return self._answer_api_versions(corr, ErrorCode.INVALID_REQUEST)
            return self._violation(f"cannot decode {api.name} v{version} request: {exc}", key)
        return RequestReceived(header, version, flexible, body, served, frame, pos)

    def _violation(self, reason: str, key: int = -1) -> ProtocolViolation:
        self.state = ConnectionState.ERROR
        return ProtocolViolation(reason, key)

    def _answer_api_versions(self, corr: int, error: ErrorCode) -> AnsweredByConnection:
        out = bytearray(4)
        encode_response_header(out, corr, 0)
        self.apis.api_versions_response(error_code=int(error)).encode_into(out, 0)
        _LEN.pack_into(out, 0, len(out) - 4)
        return AnsweredByConnection(corr, out)

    # -- SASL v0 raw tokens
    def start_raw_tokens(self) -> None:
        """SaslHandshake v0 succeeded: the next frames are bare SASL tokens."""
        self.state = ConnectionState.SASL_RAW_TOKEN

    def end_raw_tokens(self) -> None:
        """The raw-token exchange is over: requests again."""
        if self.state is ConnectionState.SASL_RAW_TOKEN:
            self.state = ConnectionState.OPEN

    def send_sasl_token(self, token: bytes) -> bytes:
        return _LEN.pack(len(token)) + token

    # -- responses out
    def send_response(
        self,
        request: RequestReceived[S],
        response: Any,
        *,
        throttle_ms: int = 0,
        hand_encoded: bool = True,
    ) -> list[Any]:
        """The frame answering `request`, as pieces to write in order (bytes, and the file regions
        of a sliced response). The throttle time is set on `response` first; `hand_encoded=False`
        encodes with the schema even where the API has a hand-written encoder (an error answer)."""
        if throttle_ms:
            set_throttle_time(response, throttle_ms)
        version = request.api_version
        encoder = request.served.encode_response if hand_encoded else None
        out = bytearray(b"\0\0\0\0")
        encode_response_header(
            out, request.correlation_id, response_header_version(request.api_key, request.flexible)
        )
        sliced = type(response) is SlicedResponse
        body = response.response if sliced else response
        if encoder is not None:
            encoder(out, body, version)
        else:
            body.encode_into(out, version)
        if sliced:
            return splice(out, response, request.flexible)
        _LEN.pack_into(out, 0, len(out) - 4)
        return [out]


def splice(out: bytearray, sliced: SlicedResponse, flexible: bool) -> list[Any]:
    """Replace each marker (and its length prefix) in an encoded frame by the real length prefix and
    the file region; the frame's own length counts the regions."""
    pieces: list[Any] = []
    total = len(out) - 4
    start = 0
    for marker, region in sliced.regions.items():
        idx = out.find(marker, start)
        if idx < 0:
            raise RuntimeError("fetch placeholder missing from the encoded response")
        prefix = bytearray()
        if flexible:
            old = len(p.uvarint_bytes(len(marker) + 1))
            p.write_uvarint(prefix, region.length + 1)
        else:
            old = 4
            p.write_int32(prefix, region.length)
        pieces.append(bytes(out[start : idx - old]) + prefix)
        pieces.append(region)
        total += len(prefix) + region.length - old - len(marker)
        start = idx + len(marker)
    pieces.append(bytes(out[start:]))
    first = bytearray(pieces[0])
    _LEN.pack_into(first, 0, total)
    pieces[0] = bytes(first)
    return pieces
