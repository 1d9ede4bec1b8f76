"""File regions straight from a segment file to a plain TCP socket with os.sendfile, waiting for the
socket to take more when it is full; SendfileStats counts what left this way (tests and metrics).
"""

from __future__ import annotations

import asyncio
import os
from typing import Protocol


class SendfileStats:
    """Counters proving (in tests and metrics) that fetch data left through os.sendfile."""

    calls = 0
    bytes = 0
    inline_bytes = 0  # regions under SENDFILE_MIN_BYTES, cheaper copied than spliced
    fallback_bytes = 0  # no sendfile on this transport (TLS) or disabled


class FileRegion(Protocol):
    @property
    def fileno(self) -> int: ...
    @property
    def position(self) -> int: ...
    @property
    def length(self) -> int: ...


async def sendfile_region(fd: int, region: FileRegion, stall_timeout_s: float) -> None:
    """Send `region` to the non-blocking socket `fd` (whose buffered bytes were written already);
    TimeoutError when the socket takes nothing for `stall_timeout_s`."""
    offset, left = region.position, region.length
    SendfileStats.calls += 1
    while left > 0:
        try:
            n = os.sendfile(fd, region.fileno, offset, left)
        except BlockingIOError:
            await _writable(fd, stall_timeout_s)
            continue
        except InterruptedError:
            continue
        if n == 0:
            raise ConnectionError("segment file ended before the promised bytes were sent")
        offset += n
        left -= n
        SendfileStats.bytes += n


async def _writable(fd: int, timeout_s: float) -> None:
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[None] = loop.create_future()
    loop.add_writer(fd, _set_none, fut)
    try:
        await asyncio.wait_for(fut, timeout=timeout_s)
    finally:
        loop.remove_writer(fd)


def _set_none(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
