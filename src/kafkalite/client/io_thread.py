"""IOThread: the client's asyncio event loop on a thread of its own, running coroutines for the
synchronous producer, consumer and admin APIs (submit, run with a timeout, call_soon, stop).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from kafkalite.client.errors import KafkaTimeoutError

T = TypeVar("T")


class IOThread:
    """A daemon thread running an asyncio loop (uvloop when installed); the client's network thread."""

    def __init__(self, name: str) -> None:
        try:
            import uvloop

            self.loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
        except ImportError:  # pragma: no cover
            self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    @property
    def in_loop(self) -> bool:
        return threading.current_thread() is self._thread

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run a coroutine on the loop and wait for it from the calling (non-loop) thread."""
        if self.in_loop:
            coro.close()
            raise RuntimeError(
                "blocking client call from the client's own I/O thread (a callback?)"
            )
        fut = self.submit(coro)
        try:
            return fut.result(timeout)
        except concurrent.futures.TimeoutError:
            fut.cancel()
            raise KafkaTimeoutError(f"operation did not finish within {timeout} s") from None

    def call_soon(self, fn: Callable[..., Any], *args: Any) -> None:
        if self.loop.is_closed():
            return
        try:
            self.loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:
            pass

    def stop(self, timeout: float = 5.0) -> None:
        if self.loop.is_closed():
            return

        async def _cancel_all() -> None:
            # a task being cancelled may start another (a connection's read loop): a few rounds, so
            # the loop closes with nothing pending ("Task was destroyed but it is pending")
            for _ in range(5):
                tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
                if not tasks:
                    return
                for t in tasks:
                    t.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)

        try:
            self.submit(_cancel_all()).result(timeout)
        except Exception:
            pass
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout)
        if not self._thread.is_alive():
            self.loop.close()
