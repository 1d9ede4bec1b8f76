"""Consumer groups of aiokafka against kafkalite: three members share six partitions, a member leaves and
its partitions move, committed offsets are where the next member starts."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import pytest
from groups_support import GROUP_BROKER_PROPS, produce_numbered

from kafkalite.testing import Broker

aiokafka = pytest.importorskip("aiokafka")
from aiokafka import AIOKafkaConsumer  # noqa: E402

pytestmark = pytest.mark.compat


@pytest.fixture(scope="module")
def gbroker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    with Broker(tmp_path_factory.mktemp("groups-aiokafka"), **GROUP_BROKER_PROPS) as b:
        yield b


async def _until(cond, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        if cond():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def test_three_members_then_one_leaves(gbroker: Broker) -> None:
    topic = f"ak-{uuid.uuid4().hex[:10]}"
    gbroker.create_topic(topic, 6)
    group = f"ak-{uuid.uuid4().hex[:6]}"
    produced = produce_numbered(gbroker.bootstrap_servers, topic, 0, 60, 6)

    async def scenario() -> None:
        consumers = [
            AIOKafkaConsumer(
                topic,
                bootstrap_servers=gbroker.bootstrap_servers,
                group_id=group,
                auto_offset_reset="earliest",
                enable_auto_commit=False,
                session_timeout_ms=6000,
                heartbeat_interval_ms=500,
            )
            for _ in range(3)
        ]
        seen: list[set[str]] = [set() for _ in consumers]
        stop = asyncio.Event()

        async def run(i: int) -> None:
            c = consumers[i]
            while not stop.is_set():
                batch = await c.getmany(timeout_ms=100)
                for msgs in batch.values():
                    seen[i].update(m.value.decode() for m in msgs)
                if batch:
                    await c.commit()

        for c in consumers:
            await c.start()
        tasks = [asyncio.create_task(run(i)) for i in range(3)]
        try:
            await _until(
                lambda: (
                    [len(c.assignment()) for c in consumers] == [2, 2, 2]
                    and set().union(*seen) == produced
                ),
                60,
                "two partitions each and every message",
            )
            # one member leaves (LeaveGroup): the other two take over its partitions
            tasks[2].cancel()
            await consumers[2].stop()
            more = await asyncio.to_thread(
                produce_numbered, gbroker.bootstrap_servers, topic, 60, 30, 6
            )
            await _until(
                lambda: (
                    [len(c.assignment()) for c in consumers[:2]] == [3, 3]
                    and more <= seen[0] | seen[1]
                ),
                60,
                "three partitions each after a member left, and the new messages",
            )
        finally:
            stop.set()
            for t in tasks[:2]:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for c in consumers[:2]:
                await c.stop()

        # everything was committed: a new member of the group starts at the end
        late = AIOKafkaConsumer(
            topic,
            bootstrap_servers=gbroker.bootstrap_servers,
            group_id=group,
            auto_offset_reset="earliest",
        )
        await late.start()
        try:
            await _until(lambda: len(late.assignment()) == 6, 30, "the late member's assignment")
            positions = {tp.partition: await late.committed(tp) for tp in late.assignment()}
            assert positions == {p: 15 for p in range(6)}
        finally:
            await late.stop()

    asyncio.run(scenario())
