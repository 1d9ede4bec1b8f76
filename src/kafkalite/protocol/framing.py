"""Sans-IO framing: bytes in, whole size-prefixed frames out, with a maximum frame size.

A frame is a 4-byte big-endian length followed by that many bytes (`socket.request.max.bytes` bounds it).
"""

from __future__ import annotations

import ctypes
import struct
import sys
import threading

from kafkalite.protocol.exceptions import DecodeError

DEFAULT_MAX_FRAME = 100 * 1024 * 1024
_LEN = struct.Struct(">i")
# buffered reading (get_buffer / buffer_updated): a frame body at least this big that is not yet all
# here gets its own bytearray, and the socket reads the rest straight into it
DIRECT_BODY_MIN = 16 * 1024
# a big body's buffer is grown as its bytes arrive, never sized by the announced length alone: it starts
# at up to BODY_FIRST_CAPACITY (a produce request of librdkafka's default batch.size fits: the fast path
# is one buffer, as before) and doubles, up to the frame's length, when bytes arrive and it is full (those
# bytes come through the scratch buffer: one copy of a read per doubling)
BODY_FIRST_CAPACITY = 1 << 20
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
    With buffered reading a big body is received in place, into a buffer that grows as its bytes
    arrive (a frame's announced length costs nothing until its bytes come).
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
        if body is not None and self._have < len(body):
            return memoryview(body)[self._have :]
        # (a big body that filled its buffer grows in buffer_updated, once more bytes did arrive)
        return _scratch()

    def buffer_updated(self, nbytes: int) -> list[bytes | bytearray]:
        """`nbytes` were written into the last get_buffer(): the frames now whole. A frame received
        in place is a bytearray (a handler may stamp it in place); every other frame is bytes."""
        body = self._body
        if body is None:
            return self._frames(_scratch()[:nbytes], True)
        have = self._have
        if not nbytes:
            return []
        rest: memoryview | None = None
        if have < len(body):  # received in place
            self._have = have + nbytes
        else:  # the body had filled its buffer: these bytes are in the scratch buffer
            data = _scratch()[:nbytes]
            take = min(nbytes, self._need - have)
            body = self._body = _grown(body, min(self._need, max(2 * have, have + take)))
            body[have : have + take] = data[:take]
            self._have = have + take
            if take < nbytes:
                rest = data[take:]  # the frames after this one
        if self._have < self._need:
            return []
        self._body = None
        self._have = 0
        self._need = -1
        return [body] if rest is None else [body, *self._frames(rest, True)]

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
                body = self._body = _uninitialized(min(need, BODY_FIRST_CAPACITY))
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
    def capacity(self) -> int:
        """Bytes this decoder holds for the frame being read (what it received, or the buffer a big
        body is received into, which grows as it fills)."""
        body = self._body
        return len(self._head) + (self._have if body is None else len(body))

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


def _resize_in_place() -> ctypes._NamedFuncPointer | None:
    """CPython's PyByteArray_Resize: a bytearray grown through realloc, its new bytes left as they
    are (no zero fill: the socket writes them; a large buffer's untouched pages cost no memory)."""
    if sys.implementation.name != "cpython":
        return None
    fn = ctypes.pythonapi.PyByteArray_Resize
    fn.argtypes = (ctypes.py_object, ctypes.c_ssize_t)
    fn.restype = ctypes.c_int
    return fn


_RESIZE = _resize_in_place()


def _uninitialized(size: int) -> bytearray:
    """A bytearray of `size` bytes whose contents are whatever the allocator had (the caller writes
    every byte before reading any)."""
    if _RESIZE is None:
        return bytearray(size)
    buf = bytearray()
    _RESIZE(buf, size)
    return buf


def _grown(body: bytearray, size: int) -> bytearray:
    """`body` grown to `size` bytes, its contents kept: in place where the allocator can (realloc;
    mremap for a large buffer), else copied once into a new buffer."""
    if _RESIZE is not None:
        try:
            _RESIZE(body, size)
            return body
        except BufferError:  # a view of it is still alive somewhere: grow a copy instead
            pass
    new = _uninitialized(size)
    new[: len(body)] = body
    return new


_THREAD = threading.local()


def _scratch() -> memoryview:
    """The receive scratch buffer of this thread (made on first use)."""
    view: memoryview | None = getattr(_THREAD, "scratch", None)
    if view is None:
        view = _THREAD.scratch = memoryview(bytearray(_SCRATCH_SIZE))
    return view


def frame(payload: bytes | bytearray) -> bytes:
    return _LEN.pack(len(payload)) + payload
