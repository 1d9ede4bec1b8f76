"""The broker process's memory allocator settings: request buffers of a megabyte come from glibc's
heap and are reused, instead of fresh mmap'ed pages zero-filled by the kernel for every request.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import sys

log = logging.getLogger("kafkalite.broker")

# glibc's mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
# allocations below this come from the heap (a produce request is up to a few MB); above it, mmap
MMAP_THRESHOLD = 32 * 1024 * 1024
# free heap memory kept for reuse before any is handed back to the system
TRIM_THRESHOLD = 64 * 1024 * 1024


def tune_for_request_buffers() -> bool:
    """Raise glibc's mmap and trim thresholds (its own dynamic threshold stops adapting once buffers
    of different sizes are alive together, and each fresh mapping costs page faults). True when set;
    False off glibc, where nothing changes."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # musl and other libcs have no mallopt
        return False
    ok = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )
    log.debug("glibc malloc: mmap threshold %d, trim threshold %d (%s)",
              MMAP_THRESHOLD, TRIM_THRESHOLD, "set" if ok else "refused")  # fmt: skip
    return ok
