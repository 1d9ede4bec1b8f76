"""Delayed operations ("purgatory"): requests that wait for data or time, woken by appends to a partition.

The ReplicaManager's delayed produce (acks=all) and delayed fetch (long poll) wait here, keyed by partition.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable, Iterable


class DelayedOperations:
    """Watchers keyed by (topic, partition); `notify(key)` wakes the waiters of that key."""

    def __init__(self, on_notify: Callable[[Hashable], None] | None = None) -> None:
        self._watchers: dict[Hashable, set[asyncio.Future[None]]] = {}
        self.closed = False
        self._on_notify = on_notify  # told of every notify too (tests watching the wake-ups)

    def close(self) -> None:
        """Shutting down: wake every waiter and let none wait again (they answer with what they have)."""
        self.closed = True
        self.notify_all()

    def __len__(self) -> int:
        return sum(len(s) for s in self._watchers.values())

    def notify(self, key: Hashable) -> None:
        if self._on_notify is not None:
            self._on_notify(key)
        waiters = self._watchers.pop(key, None)
        if waiters:
            for fut in waiters:
                if not fut.done():
                    fut.set_result(None)

    def notify_all(self) -> None:
        for key in list(self._watchers):
            self.notify(key)

    async def wait_until(
        self,
        keys: Iterable[Hashable],
        check: Callable[[], bool],
        timeout: float,
    ) -> bool:
        """Wait until `check()` is true (re-checked on every notify of one of `keys`) or `timeout` s pass.

        Returns the last result of `check()`.
        """
        keys = list(keys)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0.0, timeout)
        while True:
            if check():
                return True
            if self.closed:
                return False
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            fut: asyncio.Future[None] = loop.create_future()
            for k in keys:
                self._watchers.setdefault(k, set()).add(fut)
            handle = loop.call_later(remaining, _wake, fut)
            try:
                await fut
            finally:
                handle.cancel()
                for k in keys:
                    s = self._watchers.get(k)
                    if s is not None:
                        s.discard(fut)
                        if not s:
                            del self._watchers[k]


def _wake(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
