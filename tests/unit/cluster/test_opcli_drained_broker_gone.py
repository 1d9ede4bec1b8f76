"""The controller when a broker that holds no replica dies (a drained broker stopped): no election is
needed, yet every live broker hears that it is gone (UpdateMetadata), as Kafka's onBrokerFailure does.
"""

from __future__ import annotations

import uuid

from kafkalite.cluster.controller.machine import (
    BrokerInfo,
    BrokersChanged,
    ControllerMachine,
    PartitionStatesWritten,
    SendUpdateMetadata,
    Startup,
    TopicInfo,
    TopicsChanged,
    WritePartitionStates,
)


def _broker(i: int) -> BrokerInfo:
    return BrokerInfo(i, "127.0.0.1", 9000 + i, None, 100 + i)


def _run(m: ControllerMachine, event: object, versions: dict[object, int]) -> list[object]:
    out: list[object] = []
    queue = list(m.handle(event))  # type: ignore[arg-type]
    while queue:
        eff = queue.pop(0)
        out.append(eff)
        if isinstance(eff, WritePartitionStates):
            done = {}
            for tp in eff.states:
                versions[tp] = versions.get(tp, -1) + 1
                done[tp] = versions[tp]
            queue[:0] = m.handle(PartitionStatesWritten(eff.tag, done))
    return out


def test_a_broker_without_replicas_dying_updates_every_live_broker() -> None:
    m = ControllerMachine(1)
    versions: dict[object, int] = {}
    _run(m, Startup(1, {i: _broker(i) for i in (1, 2, 3)}, {}, {}), versions)
    info = TopicInfo("drained", uuid.uuid4(), {0: (1, 2), 1: (2, 1)})
    _run(m, TopicsChanged({"drained": info}), versions)
    out = _run(m, BrokersChanged({1: _broker(1), 2: _broker(2)}), versions)
    um = [e for e in out if isinstance(e, SendUpdateMetadata)]
    assert um, out
    assert um[-1].broker_ids == (1, 2)
    assert [b.broker_id for b in um[-1].brokers] == [1, 2]
    assert not [e for e in out if isinstance(e, WritePartitionStates)]  # nothing to elect
