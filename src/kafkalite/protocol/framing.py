"""Sans-IO framing: bytes in, whole size-prefixed frames out, with a maximum frame size.

A frame is a 4-byte big-endian length followed by that many bytes (`socket.request.max.bytes` bounds it).
"""

from __future__ import annotations

import struct

from kafkalite.protocol.exceptions import DecodeError

DEFAULT_MAX_FRAME = 100 * 1024 * 1024
_LEN = struct.Struct(">i")


class FrameTooLarge(DecodeError):
    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"frame of {size} bytes is larger than the limit of {limit} bytes")
        self.size = size
        self.limit = limit


class FrameDecoder:
    """Accumulates received bytes and yields whole frames (without their length prefix).

    Raises DecodeError on a negative or oversized declared length; the connection should then be closed.
    """

    __slots__ = ("_buf", "_need", "max_frame_size")

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME) -> None:
        self.max_frame_size = max_frame_size
        self._buf = bytearray()
        self._need = -1  # body length of the frame being read, -1 while reading a length

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        self._buf += data
        frames: list[bytes] = []
        buf = self._buf
        pos = 0
        while True:
            if self._need < 0:
                if len(buf) - pos < 4:
                    break
                n = _LEN.unpack_from(buf, pos)[0]
                if n < 0:
                    raise DecodeError(f"negative frame length {n}")
                if n > self.max_frame_size:
                    raise FrameTooLarge(n, self.max_frame_size)
                self._need = n
                pos += 4
            if len(buf) - pos < self._need:
                break
            frames.append(bytes(buf[pos : pos + self._need]))
            pos += self._need
            self._need = -1
        if pos:
            del buf[:pos]
        return frames

    @property
    def buffered(self) -> int:
        return len(self._buf)

    @property
    def pending_frame_size(self) -> int:
        """Declared size of the frame being accumulated, or -1."""
        return self._need


def frame(payload: bytes | bytearray) -> bytes:
    return _LEN.pack(len(payload)) + payload
