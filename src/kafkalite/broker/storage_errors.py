"""A handler that hit an OSError (EMFILE, EIO, ENOSPC ...) answers its request with KAFKA_STORAGE_ERROR
on every entry; the broker logs what it was doing (rate-limited) and the connection stays open.
"""

from __future__ import annotations

import errno
import logging
import time

from kafkalite.broker.network.connection import CloseConnection
from kafkalite.protocol.error_response import error_response
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.exceptions import DecodeError
from kafkalite.protocol.schema import Api, Message, Struct

log = logging.getLogger("kafkalite.broker.storage_errors")

PRODUCE_KEY = 0
LOG_EVERY_S = (
    10.0  # one WARNING per (API, errno) this often; the lines skipped meanwhile are counted
)


class _RateLimit:
    def __init__(self) -> None:
        self.last: dict[tuple[int, int | None], float] = {}
        self.skipped: dict[tuple[int, int | None], int] = {}

    def allow(self, key: tuple[int, int | None]) -> int | None:
        """None: stay quiet; else how many lines were skipped since the last one logged."""
        now = time.monotonic()
        if now - self.last.get(key, -LOG_EVERY_S) < LOG_EVERY_S:
            self.skipped[key] = self.skipped.get(key, 0) + 1
            return None
        self.last[key] = now
        return self.skipped.pop(key, 0)


_limit = _RateLimit()


def describe(exc: OSError) -> str:
    """errno name, message and file of an OSError: `EMFILE (Too many open files) on /x/0.log`."""
    name = errno.errorcode.get(exc.errno, str(exc.errno)) if exc.errno is not None else "no errno"
    text = f"{name} ({exc.strerror or exc})"
    if exc.filename is not None:
        text += f" on {exc.filename}"
    return text


def storage_error_answer(
    api: Api,
    version: int,
    request: object,
    peer: str,
    client_id: str | None,
    exc: OSError,
    frame: bytes | bytearray | None = None,
    body_at: int = 0,
) -> Message | None:
    """The request's answer with KAFKA_STORAGE_ERROR everywhere (None: acks=0 Produce answers
    nothing). An API whose response cannot say it (no error field reachable from the request)
    raises CloseConnection, as any failure did before. A TimeoutError (an OSError in Python) is
    not storage: it answers REQUEST_TIMED_OUT, as Kafka maps its TimeoutException. `frame` and
    `body_at` (where the request body starts) let a hot-path decoded request be read again
    through its declaration."""
    silent = api.key == PRODUCE_KEY and getattr(request, "acks", 1) == 0
    timed_out = isinstance(exc, TimeoutError)
    code = ErrorCode.REQUEST_TIMED_OUT if timed_out else ErrorCode.KAFKA_STORAGE_ERROR
    response: Message | None = None
    errors = 0
    if not isinstance(request, Struct) and frame is not None:
        # a hot-path decoded Produce / Fetch: the declaration's view of the same frame
        try:
            request = api.request.decode(bytes(frame), version, body_at, exact=False)
        except DecodeError:
            request = None
    if isinstance(request, Struct):
        response, errors = error_response(api.response, request, version, int(code), describe(exc))
    skipped = _limit.allow((api.key, exc.errno))
    if skipped is not None:
        if silent:
            outcome = "no answer (acks=0)"
        elif errors:
            outcome = f"answered {code.name}"
        else:
            outcome = "its response has no error field to say so: closing the connection"
        log.warning(
            "%s v%d from %s (client id %r) failed %s: %s; %s%s",
            api.name,
            version,
            peer,
            client_id,
            "waiting" if timed_out else "on storage",
            describe(exc),
            outcome,
            f" ({skipped} more like it in the last {LOG_EVERY_S:.0f} s)" if skipped else "",
        )
    if silent:
        return None
    if not errors:
        raise CloseConnection from exc
    return response
