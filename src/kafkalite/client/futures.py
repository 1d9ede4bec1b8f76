"""Producer futures: a per-record FutureRecordMetadata over its batch's outcome; usable as `.get()`,
`.result()`, callbacks, or `await` from any asyncio loop.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Generator
from typing import Any, NamedTuple

from kafkalite.client.errors import KafkaTimeoutError

log = logging.getLogger("kafkalite.client.producer")
_CB_LOCK = threading.Lock()


class RecordMetadata(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp: int
    serialized_key_size: int = -1
    serialized_value_size: int = -1


class BatchOutcome:
    """Completion state shared by every record of one ProducerBatch."""

    __slots__ = ("base_offset", "log_append_time", "error", "_event", "_callbacks", "done")

    def __init__(self) -> None:
        self.base_offset = -1
        self.log_append_time = -1
        self.error: BaseException | None = None
        self.done = False
        self._event: threading.Event | None = None
        self._callbacks: list[Callable[[], None]] = []

    def complete(self, base_offset: int, log_append_time: int, error: BaseException | None) -> None:
        if self.done:
            return
        self.base_offset = base_offset
        self.log_append_time = log_append_time
        self.error = error
        with _CB_LOCK:
            self.done = True
            callbacks, self._callbacks = self._callbacks, []
        ev = self._event
        if ev is not None:
            ev.set()
        for cb in callbacks:
            try:
                cb()
            except Exception:
                log.exception("producer callback raised")

    def wait(self, timeout: float | None) -> bool:
        if self.done:
            return True
        if self._event is None:
            ev = threading.Event()
            self._event = ev
            if self.done:  # completed while we were creating the event
                return True
        return self._event.wait(timeout)

    def on_done(self, cb: Callable[[], None]) -> None:
        with _CB_LOCK:
            if not self.done:
                self._callbacks.append(cb)
                return
        cb()


class FutureRecordMetadata:
    """The future of one sent record; resolves to RecordMetadata or raises the delivery error.

    Its state is one tuple (outcome, topic, partition, delta, timestamp, key_size, value_size): the
    producer's hot path makes a `_RecordFuture` (no Python __init__) and sets that tuple in one store.
    """

    __slots__ = ("_r",)
    _r: tuple[BatchOutcome, str, int, int, int, int, int]

    def __init__(
        self,
        outcome: BatchOutcome,
        topic: str,
        partition: int,
        delta: int,
        timestamp: int,
        key_size: int,
        value_size: int,
    ) -> None:
        self._r = (outcome, topic, partition, delta, timestamp, key_size, value_size)

    @property
    def outcome(self) -> BatchOutcome:
        return self._r[0]

    @property
    def topic(self) -> str:
        return self._r[1]

    @property
    def partition(self) -> int:
        return self._r[2]

    @property
    def delta(self) -> int:
        return self._r[3]

    @property
    def timestamp(self) -> int:
        return self._r[4]

    @property
    def key_size(self) -> int:
        return self._r[5]

    @property
    def value_size(self) -> int:
        return self._r[6]

    def _value(self) -> RecordMetadata:
        o, topic, partition, delta, ts, key_size, value_size = self._r
        if o.error is not None:
            raise o.error
        offset = -1 if o.base_offset < 0 else o.base_offset + delta
        if o.log_append_time >= 0:
            ts = o.log_append_time
        return RecordMetadata(topic, partition, offset, ts, key_size, value_size)

    def done(self) -> bool:
        return self.outcome.done

    def succeeded(self) -> bool:
        return self.outcome.done and self.outcome.error is None

    def failed(self) -> bool:
        return self.outcome.done and self.outcome.error is not None

    def get(self, timeout: float | None = None) -> RecordMetadata:
        if not self.outcome.wait(timeout):
            raise KafkaTimeoutError(f"record not acknowledged within {timeout} s")
        return self._value()

    result = get

    def exception(self, timeout: float | None = None) -> BaseException | None:
        if not self.outcome.wait(timeout):
            raise KafkaTimeoutError(f"record not acknowledged within {timeout} s")
        return self.outcome.error

    def add_callback(self, fn: Callable[[RecordMetadata], Any]) -> FutureRecordMetadata:
        def cb() -> None:
            if self.outcome.error is None:
                fn(self._value())

        self.outcome.on_done(cb)
        return self

    def add_errback(self, fn: Callable[[BaseException], Any]) -> FutureRecordMetadata:
        def cb() -> None:
            if self.outcome.error is not None:
                fn(self.outcome.error)

        self.outcome.on_done(cb)
        return self

    def add_both(self, fn: Callable[[RecordMetadata | None, BaseException | None], Any]) -> None:
        """Java-style onCompletion(metadata, exception)."""

        def cb() -> None:
            err = self.outcome.error
            fn(None if err is not None else self._value(), err)

        self.outcome.on_done(cb)

    def __await__(self) -> Generator[Any, None, RecordMetadata]:
        if not self.outcome.done:
            loop = asyncio.get_running_loop()
            waiter: asyncio.Future[None] = loop.create_future()

            def wake() -> None:
                if not waiter.done():
                    waiter.set_result(None)

            def cb() -> None:
                try:
                    loop.call_soon_threadsafe(wake)
                except RuntimeError:  # the awaiting loop is closed
                    pass

            self.outcome.on_done(cb)
            yield from waiter.__await__()
        return self._value()

    def __repr__(self) -> str:
        state = "pending" if not self.done() else ("failed" if self.failed() else "done")
        return f"<FutureRecordMetadata {self.topic}-{self.partition} {state}>"


class _RecordFuture(FutureRecordMetadata):
    """FutureRecordMetadata as the producer's hot path makes it: `f = _RecordFuture(); f._r = (...)`
    (a C-level construction, about half the cost of a Python __init__ with seven arguments)."""

    __slots__ = ()
    __init__ = object.__init__
