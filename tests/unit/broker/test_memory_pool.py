"""KIP-72's memory pool as pure decisions: allocation, waiting, waking in order, and one connection's part."""

from __future__ import annotations

import pytest

from kafkalite.broker.network.memory_pool import ConnectionMemory, MemoryPool


def test_non_strict_allocation_overdraws_once_then_refuses() -> None:
    pool = MemoryPool(100)
    assert pool.try_allocate(60) and pool.available == 40
    assert pool.try_allocate(500)  # any request fits while some memory is free
    assert pool.out_of_memory and not pool.try_allocate(1)
    pool.release(500)
    assert not pool.out_of_memory and pool.try_allocate(1)
    with pytest.raises(ValueError):
        MemoryPool(0)


def test_release_wakes_waiters_oldest_first_while_memory_is_free() -> None:
    pool = MemoryPool(100)
    assert pool.try_allocate(100)
    woken: list[str] = []

    def waiter(name: str, size: int) -> None:
        def wake() -> None:
            woken.append(name)
            if not pool.try_allocate(size):
                pool.wait_for_memory(name, wake)

        pool.wait_for_memory(name, wake)

    waiter("a", 80)
    waiter("b", 30)
    waiter("c", 10)
    pool.stop_waiting("c")
    pool.release(100)
    # a takes 80 and b 30: the pool is out of memory again before c (gone anyway) would be asked
    assert woken == ["a", "b"] and pool.used == 110 and pool.waiting == 0
    with pytest.raises(RuntimeError):
        pool.release(111)


def test_a_connection_takes_a_requests_declared_size_when_its_length_arrives() -> None:
    pool = MemoryPool(1000)
    woken: list[tuple[str, bool]] = []
    # as a connection does: woken, it takes memory for the request it has begun (b: none, a: 30)
    a = ConnectionMemory(pool, lambda: woken.append(("a", a.take(30))))
    b = ConnectionMemory(pool, lambda: woken.append(("b", b.take(-1))))
    assert a.read([], 5000)  # a 5000-byte request begun: it gets all of it (non-strict)
    assert a.reserved == 5000 and pool.out_of_memory
    assert a.read([], 5000)  # still arriving: nothing more taken, reading goes on
    assert not b.read([b"x" * 10], -1)  # a whole small request came in: counted; then b waits
    assert pool.used == 5010 and pool.waiting == 1
    # a's request is whole (its memory stands for it, queued), one more came whole, and the
    # request begun after them finds no memory
    assert not a.read([b"r" * 5000, b"s" * 7], 30)
    assert pool.used == 5017 and a.reserved == 0 and pool.waiting == 2
    a.handled(5000)  # memory again: b (oldest) reads on, then a takes the 30 bytes of its request
    assert woken == [("b", True), ("a", True)]
    assert pool.used == 47 and a.reserved == 30 and pool.waiting == 0
    b.handled(10)
    a.close(queued_bytes=7)  # closed with a request queued and one begun: all of it comes back
    assert pool.used == 0 and a.reserved == 0
