"""Exception types raised by the sans-IO protocol layer.

DecodeError is the only exception a malformed frame may raise from decoding; EncodeError covers bad values.
"""

from __future__ import annotations


class ProtocolError(Exception):
    """Base class for protocol-level failures."""


class DecodeError(ProtocolError):
    """Bytes that do not form a valid message: truncated, oversized, negative or bad lengths, bad varints."""


class EncodeError(ProtocolError):
    """A value cannot be encoded at the requested version (wrong type, non-ignorable field, ...)."""


class UnsupportedVersionError(ProtocolError):
    """An API key or version this side does not know."""

    def __init__(self, api_key: int, api_version: int, message: str = "") -> None:
        super().__init__(message or f"unsupported api_key={api_key} api_version={api_version}")
        self.api_key = api_key
        self.api_version = api_version
