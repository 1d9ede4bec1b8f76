"""Sans-IO framing: bytes in, whole size-prefixed frames out, with a maximum frame size.

A frame is a 4-byte big-endian length followed by that many bytes (`socket.request.max.bytes` bounds it).
"""

from __future__ import annotations

import struct
import threading

from kafkalite.protocol.exceptions import DecodeError

DEFAULT_MAX_FRAME = 100 * 1024 * 1024
_LEN = struct.Struct(">i")
# buffered reading (get_buffer / buffer_updated): a frame body at least this big that is not yet all
# here gets its own bytearray, and the socket reads the rest straight into it
DIRECT_BODY_MIN = 16 * 1024
# ... and everything else lands in this scratch buffer, shared by every decoder of the thread: it holds
# bytes only between get_buffer() and buffer_updated(), which an event loop calls back to back
_SCRATCH_SIZE = 64 * 1024


class FrameTooLarge(DecodeError):
    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"frame of {size} bytes is larger than the limit of {limit} bytes")
        self.size = size
        self.limit = limit


class FrameDecoder:
    """Accumulates received bytes and yields whole frames (without their length prefix).

    A frame inside one received chunk is sliced out of it (no copy at all when the chunk is exactly the
    frame's body); one spread over several chunks is kept as views of them and joined once, complete.
    Raises DecodeError on a negative or oversized declared length; the connection should then be closed.
    """

    __slots__ = ("_head", "_need", "_parts", "_have", "_body", "max_frame_size")

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME) -> None:
        self.max_frame_size = max_frame_size
        self._head = b""  # a length prefix split across chunks
        self._need = -1  # body length of the frame being read, -1 while reading a length
        self._parts: list[memoryview] = []  # the body so far of a frame spread over chunks
        self._have = 0  # bytes in _parts (or in _body)
        self._body: bytearray | None = None  # buffered reading: the big frame read in place

    # -- buffered reading (asyncio.BufferedProtocol): big bodies are received in place, no copy
    def get_buffer(self) -> memoryview:
        """Where the next received bytes go: the rest of a big frame's own bytearray, or the shared
        scratch buffer (whose bytes buffer_updated() copies out before anything else can use it)."""
        body = self._body
        if body is not None:
            return memoryview(body)[self._have :]
        return _scratch()

    def buffer_updated(self, nbytes: int) -> list[bytes | bytearray]:
        """`nbytes` were written into the last get_buffer(): the frames now whole. A frame received
        in place is a bytearray (a handler may stamp it in place); every other frame is bytes."""
        body = self._body
        if body is not None:
            self._have += nbytes
            if self._have < len(body):
                return []
            self._body = None
            self._have = 0
            self._need = -1
            return [body]
        return self._frames(_scratch()[:nbytes], True)

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        if type(data) is not bytes:
            data = bytes(data)  # views and bytearrays may change under us: copied once
        return self._frames(data, False)  # type: ignore[return-value]

    def _frames(self, data: bytes | memoryview, transient: bool) -> list[bytes | bytearray]:
        """The frames completed by `data`. Kept bytes are slices and views of `data` (bytes, which
        cannot change), or copies when `data` is `transient` (the shared scratch buffer); then a big
        body not yet all here gets its own bytearray, which get_buffer() hands to the socket."""
        frames: list[bytes | bytearray] = []
        pos = 0
        end = len(data)
        while pos < end:
            need = self._need
            if need < 0:
                if self._head or end - pos < 4:
                    take = min(4 - len(self._head), end - pos)
                    self._head += bytes(data[pos : pos + take])
                    pos += take
                    if len(self._head) < 4:
                        break
                    need = _LEN.unpack(self._head)[0]
                    self._head = b""
                else:
                    need = _LEN.unpack_from(data, pos)[0]
                    pos += 4
                if need < 0:
                    raise DecodeError(f"negative frame length {need}")
                if need > self.max_frame_size:
                    raise FrameTooLarge(need, self.max_frame_size)
                self._need = need
            if not self._parts and end - pos >= need:
                # the whole body is in this chunk: one slice (the chunk itself when it is the body)
                piece = data[pos : pos + need]
                if not transient:
                    frames.append(piece)  # type: ignore[arg-type]
                elif need >= DIRECT_BODY_MIN:
                    frames.append(bytearray(piece))
                else:
                    frames.append(bytes(piece))
                pos += need
                self._need = -1
                continue
            if pos == end:
                break
            take = min(need - self._have, end - pos)
            if transient and not self._parts and need >= DIRECT_BODY_MIN:
                # a big body just begun: it gets its own buffer and the socket fills the rest
                body = self._body = bytearray(need)
                body[:take] = data[pos : pos + take]
                self._have = take
                break  # take == end - pos: this chunk is used up
            if transient:
                self._parts.append(memoryview(bytes(data[pos : pos + take])))
            else:
                self._parts.append(memoryview(data)[pos : pos + take])
            self._have += take
            pos += take
            if self._have == need:
                frames.append(b"".join(self._parts))
                self._parts.clear()
                self._have = 0
                self._need = -1
        return frames

    @property
    def buffered(self) -> int:
        """Bytes received and not yet handed out in a frame."""
        return len(self._head) + self._have

    @property
    def pending_frame_size(self) -> int:
        """Declared size of the frame being accumulated, or -1."""
        return self._need

    @property
    def bytes_needed(self) -> int:
        """Bytes still missing from the frame being read (4 or fewer while reading a length)."""
        if self._need < 0:
            return 4 - len(self._head)
        return self._need - self._have


_THREAD = threading.local()


def _scratch() -> memoryview:
    """The receive scratch buffer of this thread (made on first use)."""
    view: memoryview | None = getattr(_THREAD, "scratch", None)
    if view is None:
        view = _THREAD.scratch = memoryview(bytearray(_SCRATCH_SIZE))
    return view


def frame(payload: bytes | bytearray) -> bytes:
    return _LEN.pack(len(payload)) + payload
