"""A one-shot result that completes later, awaitable from asyncio without threads.

The coordinator completes these on the caller's thread (the broker's event loop); it never blocks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Generator
from typing import Any, Generic, TypeVar

T = TypeVar("T")

_UNSET: Any = object()


class Deferred(Generic[T]):
    """A value that is set once; callbacks run when it is (immediately if it already is).

    `await deferred` works inside a running asyncio loop. The deferred must be completed on that
    loop's thread (use `loop.call_soon_threadsafe` from a worker thread).
    """

    __slots__ = ("_callbacks", "_value")

    def __init__(self) -> None:
        self._value: Any = _UNSET
        self._callbacks: list[Callable[[T], None]] = []

    @classmethod
    def completed(cls, value: T) -> Deferred[T]:
        d: Deferred[T] = cls()
        d.complete(value)
        return d

    def done(self) -> bool:
        return self._value is not _UNSET

    def result(self) -> T:
        if self._value is _UNSET:
            raise RuntimeError("deferred result is not ready")
        value: T = self._value
        return value

    def complete(self, value: T) -> bool:
        """Set the value and run the callbacks; a second completion is ignored (returns False)."""
        if self._value is not _UNSET:
            return False
        self._value = value
        callbacks, self._callbacks = self._callbacks, []
        for cb in callbacks:
            cb(value)
        return True

    def on_done(self, callback: Callable[[T], None]) -> None:
        if self._value is not _UNSET:
            callback(self._value)
        else:
            self._callbacks.append(callback)

    def __await__(self) -> Generator[Any, None, T]:
        if self._value is not _UNSET:
            return self.result()
        fut: asyncio.Future[T] = asyncio.get_running_loop().create_future()

        def _set(value: T) -> None:
            if not fut.done():
                fut.set_result(value)

        self.on_done(_set)
        return (yield from fut.__await__())

    def __repr__(self) -> str:
        return f"Deferred({self._value!r})" if self.done() else "Deferred(<pending>)"
