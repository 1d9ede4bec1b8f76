"""The share-state handlers (keys 83-87): one answer per requested share-partition in request order,
CLUSTER_ACTION required, the share coordinator's errors carried per partition (NOT_COORDINATOR, fencing).
"""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace
from typing import Any

from kafkalite.broker.apis.share import (
    delete_share_group_state,
    initialize_share_group_state,
    read_share_group_state,
    read_share_group_state_summary,
    write_share_group_state,
)
from kafkalite.coordinator.share_records import PersisterStateBatch, SharePartitionKey
from kafkalite.coordinator.share_state import Outcome, ShareStateManager, ShareStateResult
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.share_state import (
    DeleteShareGroupStateRequest,
    InitializeShareGroupStateRequest,
    ReadShareGroupStateRequest,
    ReadShareGroupStateSummaryRequest,
    WriteShareGroupStateRequest,
)

E = ErrorCode
T1, T2 = uuid.UUID(int=11), uuid.UUID(int=22)
NPART = 4


class Coordinator:
    """Stands in for ShareCoordinatorComponent: leads partitions 0-2 of 4, commits at once."""

    def __init__(self) -> None:
        self.m = ShareStateManager(NPART)
        for p in range(NPART - 1):
            self.m.begin_loading(p, 0)
            self.m.finish_loading(p)

    def _commit(self, key: SharePartitionKey, outcome: Outcome) -> ShareStateResult:
        records, result = outcome
        for r in records:
            self.m.apply(self.m.partition_for(key), r)
        return result

    async def initialize(self, key: SharePartitionKey, state_epoch: int, start: int) -> Any:
        return self._commit(key, self.m.initialize(key, state_epoch, start))

    async def read(self, key: SharePartitionKey, leader_epoch: int) -> Any:
        return self._commit(key, self.m.read(key, leader_epoch))

    async def write(self, key: SharePartitionKey, *args: Any) -> Any:
        return self._commit(key, self.m.write(key, *args))

    async def delete(self, key: SharePartitionKey) -> Any:
        return self._commit(key, self.m.delete(key))

    async def read_summary(self, key: SharePartitionKey, leader_epoch: int) -> Any:
        return self._commit(key, self.m.read_summary(key, leader_epoch))


def _ctx(coordinator: Coordinator, allowed: bool = True) -> Any:
    return SimpleNamespace(
        broker=SimpleNamespace(share_coordinator=coordinator),
        authorize_cluster=lambda op: allowed,
    )


def _unled(coordinator: Coordinator, topic: uuid.UUID) -> int:
    return next(
        p
        for p in range(100)
        if coordinator.m.partition_for(SharePartitionKey("g", topic, p)) == NPART - 1
    )


def _led(coordinator: Coordinator, topic: uuid.UUID) -> list[int]:
    return [
        p
        for p in range(100)
        if coordinator.m.partition_for(SharePartitionKey("g", topic, p)) != NPART - 1
    ][:2]


def test_initialize_write_read_summary_delete() -> None:
    c = Coordinator()
    ctx = _ctx(c)
    p1, p2 = _led(c, T1)
    lost = _unled(c, T2)
    init = InitializeShareGroupStateRequest.InitializeStateData
    resp = asyncio.run(
        initialize_share_group_state.handle(
            ctx,
            InitializeShareGroupStateRequest(
                group_id="g",
                topics=[
                    init(
                        topic_id=T1,
                        partitions=[
                            init.PartitionData(partition=p1, state_epoch=1, start_offset=0),
                            init.PartitionData(partition=p2, state_epoch=1, start_offset=5),
                        ],
                    ),
                    init(
                        topic_id=T2,
                        partitions=[
                            init.PartitionData(partition=lost, state_epoch=1, start_offset=0)
                        ],
                    ),
                ],
            ),
        )
    )
    assert [
        (r.topic_id, [(p.partition, p.error_code) for p in r.partitions]) for r in resp.results
    ] == [
        (T1, [(p1, E.NO_ERROR), (p2, E.NO_ERROR)]),
        (T2, [(lost, E.NOT_COORDINATOR)]),
    ]

    write = WriteShareGroupStateRequest.WriteStateData
    batch = write.PartitionData.StateBatch(
        first_offset=0, last_offset=3, delivery_state=2, delivery_count=1
    )

    def write_req(leader_epoch: int) -> Any:
        return WriteShareGroupStateRequest(
            group_id="g",
            topics=[
                write(
                    topic_id=T1,
                    partitions=[
                        write.PartitionData(
                            partition=p1,
                            state_epoch=1,
                            leader_epoch=leader_epoch,
                            start_offset=-1,
                            state_batches=[batch],
                        )
                    ],
                )
            ],
        )

    resp = asyncio.run(write_share_group_state.handle(ctx, write_req(2)))
    assert resp.results[0].partitions[0].error_code == E.NO_ERROR
    resp = asyncio.run(write_share_group_state.handle(ctx, write_req(1)))
    assert resp.results[0].partitions[0].error_code == E.FENCED_LEADER_EPOCH

    read = ReadShareGroupStateRequest.ReadStateData
    resp = asyncio.run(
        read_share_group_state.handle(
            ctx,
            ReadShareGroupStateRequest(
                group_id="g",
                topics=[
                    read(topic_id=T1, partitions=[read.PartitionData(partition=p1, leader_epoch=2)])
                ],
            ),
        )
    )
    part = resp.results[0].partitions[0]
    assert (part.error_code, part.error_message, part.state_epoch, part.start_offset) == (
        0,
        None,
        1,
        0,
    )
    assert [
        PersisterStateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
        for b in part.state_batches
    ] == [PersisterStateBatch(0, 3, 2, 1)]

    summary = ReadShareGroupStateSummaryRequest.ReadStateSummaryData
    resp = asyncio.run(
        read_share_group_state_summary.handle(
            ctx,
            ReadShareGroupStateSummaryRequest(
                group_id="g",
                topics=[
                    summary(
                        topic_id=T1,
                        partitions=[summary.PartitionData(partition=p2, leader_epoch=0)],
                    )
                ],
            ),
        )
    )
    part = resp.results[0].partitions[0]
    assert (part.error_code, part.state_epoch, part.start_offset) == (0, 1, 5)

    delete = DeleteShareGroupStateRequest.DeleteStateData
    resp = asyncio.run(
        delete_share_group_state.handle(
            ctx,
            DeleteShareGroupStateRequest(
                group_id="g",
                topics=[delete(topic_id=T1, partitions=[delete.PartitionData(partition=p1)])],
            ),
        )
    )
    assert resp.results[0].partitions[0].error_code == E.NO_ERROR
    assert c.m.state(SharePartitionKey("g", T1, p1)) is None


def test_without_cluster_action_every_partition_is_refused() -> None:
    c = Coordinator()
    read = ReadShareGroupStateRequest.ReadStateData
    request = ReadShareGroupStateRequest(
        group_id="g",
        topics=[
            read(
                topic_id=T1,
                partitions=[read.PartitionData(partition=p, leader_epoch=0) for p in (0, 1)],
            )
        ],
    )
    resp = asyncio.run(read_share_group_state.handle(_ctx(c, allowed=False), request))
    assert [p.error_code for p in resp.results[0].partitions] == [
        E.CLUSTER_AUTHORIZATION_FAILED
    ] * 2
    # the response still encodes
    assert resp.encode(0)
