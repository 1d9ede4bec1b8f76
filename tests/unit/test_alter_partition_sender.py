"""The broker's AlterPartition sender survives any failure: a zombie leader (cut from ZooKeeper) whose
proposal the controller refuses looks the controller up in ZooKeeper, which raises kazoo's ConnectionLoss;
the sender must retry, not die (issue 36: it died, and the leader never grew its ISR again).
"""

from __future__ import annotations

import asyncio
from typing import Any

from kazoo.exceptions import ConnectionLoss

from kafkalite.broker.zk_broker import ZkBroker


def test_sender_retries_after_a_zookeeper_error() -> None:
    async def scenario() -> list[str]:
        zb: Any = object.__new__(ZkBroker)  # only what the sender touches
        zb._alter_wake = asyncio.Event()
        zb._pending_isr = {("t", 0): (1, 2, 3)}
        zb.controller_id = 2
        calls: list[str] = []

        async def send() -> None:
            if not calls:
                calls.append("zookeeper unreachable")
                raise ConnectionLoss()
            calls.append("sent")
            zb._pending_isr.clear()

        zb._send_alter_partition = send
        task = asyncio.create_task(zb._alter_partition_sender())
        zb._alter_wake.set()
        for _ in range(100):  # the retry comes 0.5 s after the failure
            if "sent" in calls:
                break
            await asyncio.sleep(0.05)
        assert not task.done(), task.exception()
        task.cancel()
        assert zb.controller_id == -1  # looked up again after the failure
        return calls

    assert asyncio.run(scenario()) == ["zookeeper unreachable", "sent"]
