"""Request and response headers (request v0/v1/v2, response v0/v1) and the rules choosing their version.

ApiVersions responses always use response header v0 so that a client can parse them before it knows our versions.
"""

from __future__ import annotations

from dataclasses import dataclass

from kafkalite.protocol import primitives as p
from kafkalite.protocol.exceptions import DecodeError

API_VERSIONS_KEY = 18
CONTROLLED_SHUTDOWN_KEY = 7


@dataclass(slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None = None


def request_header_version(api_key: int, api_version: int, flexible: bool) -> int:
    if api_key == CONTROLLED_SHUTDOWN_KEY and api_version == 0:
        return 0
    return 2 if flexible else 1


def response_header_version(api_key: int, flexible: bool) -> int:
    if api_key == API_VERSIONS_KEY:
        return 0
    return 1 if flexible else 0


def _skip_tagged_fields(buf: p.Buffer, pos: int) -> int:
    count, pos = p.read_uvarint(buf, pos)
    for _ in range(count):
        _tag, pos = p.read_uvarint(buf, pos)
        size, pos = p.read_uvarint(buf, pos)
        if size > len(buf) - pos:
            raise DecodeError("tagged field larger than the header")
        pos += size
    return pos


def peek_api(buf: p.Buffer) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id) of a request frame, without decoding the rest."""
    if len(buf) < 8:
        raise DecodeError(f"request frame of {len(buf)} bytes is shorter than a header")
    key, pos = p.read_int16(buf, 0)
    ver, pos = p.read_int16(buf, pos)
    corr, _ = p.read_int32(buf, pos)
    return key, ver, corr


def decode_request_header(buf: p.Buffer, header_version: int) -> tuple[RequestHeader, int]:
    """Decode a request header at the start of a frame; returns the header and the body offset."""
    key, ver, corr = peek_api(buf)
    pos = 8
    client_id = None
    if header_version >= 1:
        client_id, pos = p.read_nullable_string(buf, pos)  # never compact, even in v2
    if header_version >= 2:
        pos = _skip_tagged_fields(buf, pos)
    return RequestHeader(key, ver, corr, client_id), pos


def encode_request_header(out: bytearray, header: RequestHeader, header_version: int) -> None:
    p.write_int16(out, header.api_key)
    p.write_int16(out, header.api_version)
    p.write_int32(out, header.correlation_id)
    if header_version >= 1:
        p.write_nullable_string(out, header.client_id)
    if header_version >= 2:
        out.append(0)


def encode_response_header(out: bytearray, correlation_id: int, header_version: int) -> None:
    p.write_int32(out, correlation_id)
    if header_version >= 1:
        out.append(0)


def decode_response_header(buf: p.Buffer, header_version: int) -> tuple[int, int]:
    """Returns (correlation_id, body offset)."""
    corr, pos = p.read_int32(buf, 0)
    if header_version >= 1:
        pos = _skip_tagged_fields(buf, pos)
    return corr, pos
