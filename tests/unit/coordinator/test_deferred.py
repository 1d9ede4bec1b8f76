"""Deferred: one completion, callbacks in order (immediately once done), awaitable from asyncio."""

from __future__ import annotations

import asyncio

import pytest

from kafkalite.coordinator.deferred import Deferred


def test_callbacks_run_once_in_order_and_late_ones_at_once() -> None:
    d: Deferred[int] = Deferred()
    seen: list[tuple[str, int]] = []
    d.on_done(lambda v: seen.append(("a", v)))
    d.on_done(lambda v: seen.append(("b", v)))
    assert not d.done()
    with pytest.raises(RuntimeError):
        d.result()
    assert d.complete(1) is True
    assert d.complete(2) is False  # the first value stays
    d.on_done(lambda v: seen.append(("c", v)))
    assert seen == [("a", 1), ("b", 1), ("c", 1)]
    assert d.result() == 1


def test_await_pending_and_completed() -> None:
    async def main() -> tuple[int, int]:
        pending: Deferred[int] = Deferred()
        asyncio.get_running_loop().call_later(0.01, pending.complete, 7)
        return await pending, await Deferred.completed(8)

    assert asyncio.run(main()) == (7, 8)


def test_cancelled_waiter_does_not_break_completion() -> None:
    async def main() -> int:
        d: Deferred[int] = Deferred()
        task = asyncio.ensure_future(_wait(d))
        await asyncio.sleep(0)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        d.complete(3)  # the cancelled waiter's future is skipped, nothing raises
        return d.result()

    async def _wait(d: Deferred[int]) -> int:
        return await d

    assert asyncio.run(main()) == 3
