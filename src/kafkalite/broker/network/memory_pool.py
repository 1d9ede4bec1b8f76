"""The memory pool of KIP-72 (`queued.max.request.bytes`): it counts the bytes of requests being received
or queued, and connections that get no memory for their next request stop reading until some is released.

Pure accounting, no I/O: connections call `try_allocate` when a request's length arrives, `release` once
it is handled, and wait (`wait_for_memory`) while the pool is out of memory; `release` wakes them in turn.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence, Sized


class MemoryPool:
    """A bound on request bytes, as Kafka's SimpleMemoryPool in its non-strict mode: an allocation
    succeeds while any memory is free, even one larger than what is left (so a request of up to
    socket.request.max.bytes always gets through eventually); the pool is out of memory once the
    allocations reach its size. `used` may thus exceed `size` by at most one request (plus what the
    connections had already read when the pool ran out)."""

    __slots__ = ("size", "used", "_waiting")

    def __init__(self, size: int) -> None:
        if size <= 0:
            raise ValueError(f"a memory pool needs a positive size, not {size}")
        self.size = size
        self.used = 0
        # who waits for memory, in the order they ran out: key -> callback, which takes memory
        # (try_allocate) or not, and calls wait_for_memory again if it still needs some
        self._waiting: dict[object, Callable[[], None]] = {}

    @property
    def available(self) -> int:
        return self.size - self.used

    @property
    def out_of_memory(self) -> bool:
        return self.used >= self.size

    @property
    def waiting(self) -> int:
        """How many are waiting for memory (connections muted by the pool)."""
        return len(self._waiting)

    def try_allocate(self, nbytes: int) -> bool:
        """Take `nbytes` if any memory is free; False (nothing taken) when the pool is out of it."""
        if self.used >= self.size:
            return False
        self.used += nbytes
        return True

    def allocate(self, nbytes: int) -> None:
        """Count `nbytes` already in memory (bytes read in the same read as a request that did get
        memory): the pool may go past its size, and then nobody gets more until it is back under."""
        self.used += nbytes

    def release(self, nbytes: int) -> None:
        """Give back `nbytes`; while memory is free, those waiting are woken, oldest first."""
        self.used -= nbytes
        if self.used < 0:
            raise RuntimeError(f"memory pool released more than was allocated ({-self.used} bytes)")
        while self._waiting and self.used < self.size:
            key = next(iter(self._waiting))
            wake = self._waiting.pop(key)
            wake()

    def wait_for_memory(self, key: object, wake: Callable[[], None]) -> None:
        """Call `wake()` once memory is free (once: a waiter still short of memory waits again)."""
        self._waiting[key] = wake

    def stop_waiting(self, key: object) -> None:
        self._waiting.pop(key, None)


class ConnectionMemory:
    """One connection's part of the pool, as decisions over its reads: a request takes its declared
    size from the pool once its length is read, and is then read to its end whatever the pool holds
    (so memory held by half-received requests is always freed by their completion); frames that came
    whole in the same read are counted as they are (they are in memory already). `wake` is called
    once memory frees after a read was refused."""

    __slots__ = ("pool", "reserved", "_wake")

    def __init__(self, pool: MemoryPool, wake: Callable[[], None]) -> None:
        self.pool = pool
        self.reserved = 0  # taken for the request being received (its declared size), 0 if none
        self._wake = wake

    def read(self, frames: Sequence[Sized], pending_frame_size: int) -> bool:
        """A read completed `frames` and left a request of `pending_frame_size` bytes begun (-1:
        none). True: read on; False: out of memory, stop reading until `wake`."""
        carried = self.reserved
        extra = 0
        for f in frames:
            if carried:
                carried = 0  # the request received is whole: what it took stands for it queued
            else:
                extra += len(f)
        if extra:
            self.pool.allocate(extra)
        self.reserved = carried
        return True if carried else self.take(pending_frame_size)

    def take(self, pending_frame_size: int) -> bool:
        """Memory for the request begun (none needed at a frame boundary unless the pool is out of
        memory): True to read on, else False and the connection waits for memory."""
        if self.reserved:
            return True
        if pending_frame_size >= 0:
            if self.pool.try_allocate(pending_frame_size):
                self.reserved = pending_frame_size
                return True
        elif not self.pool.out_of_memory:
            return True
        self.pool.wait_for_memory(self, self._wake)
        return False

    def handled(self, frame_size: int) -> None:
        """A queued request was handled: its memory is free."""
        self.pool.release(frame_size)

    def close(self, queued_bytes: int) -> None:
        """The connection closed with `queued_bytes` of requests never handled."""
        self.pool.stop_waiting(self)
        held = self.reserved + queued_bytes
        self.reserved = 0
        if held:
            self.pool.release(held)
