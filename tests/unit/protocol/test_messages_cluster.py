"""The inter-broker messages (LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown,
AlterPartition): a round trip at every version, hand-built bytes for the layouts our brokers use, and
truncated bodies that fail with DecodeError.
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

import pytest

from kafkalite.protocol.exceptions import DecodeError
from kafkalite.protocol.messages.cluster import (
    AlterPartitionRequest,
    AlterPartitionResponse,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)

TID = uuid.UUID(int=0x1234)


def leader_and_isr(v: int) -> Any:
    P = LeaderAndIsrRequest.LeaderAndIsrPartitionState
    part = P(
        topic_name="orders" if v <= 1 else "",
        partition_index=2,
        controller_epoch=7,
        leader=1,
        leader_epoch=9,
        isr=[1, 3],
        partition_epoch=11,
        replicas=[1, 2, 3],
        adding_replicas=[] if v >= 3 else None,
        removing_replicas=[] if v >= 3 else None,
        is_new=v >= 1,
        leader_recovery_state=0,
    )
    return LeaderAndIsrRequest(
        controller_id=3,
        is_kraft_controller=False,
        controller_epoch=7,
        broker_epoch=123 if v >= 2 else -1,
        type=0,
        ungrouped_partition_states=[part] if v <= 1 else [],
        topic_states=[
            LeaderAndIsrRequest.LeaderAndIsrTopicState(
                topic_name="orders", topic_id=TID if v >= 5 else None, partition_states=[part]
            )
        ]
        if v >= 2
        else [],
        live_leaders=[
            LeaderAndIsrRequest.LeaderAndIsrLiveLeader(broker_id=1, host_name="h1", port=9)
        ],
    )


def leader_and_isr_response(v: int) -> Any:
    PE = LeaderAndIsrResponse.LeaderAndIsrPartitionError
    if v <= 4:
        return LeaderAndIsrResponse(
            error_code=0,
            partition_errors=[PE(topic_name="orders", partition_index=2, error_code=0)],
        )
    return LeaderAndIsrResponse(
        error_code=0,
        topics=[
            LeaderAndIsrResponse.LeaderAndIsrTopicError(
                topic_id=TID, partition_errors=[PE(partition_index=2, error_code=6)]
            )
        ],
    )


def stop_replica(v: int) -> Any:
    R = StopReplicaRequest
    return R(
        controller_id=3,
        controller_epoch=7,
        broker_epoch=5 if v >= 1 else -1,
        delete_partitions=v <= 2,
        ungrouped_partitions=[R.StopReplicaPartitionV0(topic_name="t", partition_index=0)]
        if v == 0
        else [],
        topics=[R.StopReplicaTopicV1(name="t", partition_indexes=[0, 1])] if 1 <= v <= 2 else [],
        topic_states=[
            R.StopReplicaTopicState(
                topic_name="t",
                partition_states=[
                    R.StopReplicaTopicState.StopReplicaPartitionState(
                        partition_index=0, leader_epoch=4, delete_partition=True
                    )
                ],
            )
        ]
        if v >= 3
        else [],
    )


def update_metadata(v: int) -> Any:
    R = UpdateMetadataRequest
    P = R.UpdateMetadataPartitionState
    part = P(
        topic_name="t" if v <= 4 else "",
        partition_index=0,
        controller_epoch=7,
        leader=2,
        leader_epoch=3,
        isr=[2],
        zk_version=4,
        replicas=[1, 2],
        offline_replicas=[1] if v >= 4 else [],
    )
    B = R.UpdateMetadataBroker
    broker = B(
        id=2,
        v0_host="h2" if v == 0 else "",
        v0_port=92 if v == 0 else 0,
        endpoints=[
            B.UpdateMetadataEndpoint(
                port=92, host="h2", listener="PLAINTEXT" if v >= 3 else "", security_protocol=0
            )
        ]
        if v >= 1
        else [],
        rack="r1" if v >= 2 else None,
    )
    return R(
        controller_id=3,
        controller_epoch=7,
        broker_epoch=9 if v >= 5 else -1,
        ungrouped_partition_states=[part] if v <= 4 else [],
        topic_states=[
            R.UpdateMetadataTopicState(
                topic_name="t", topic_id=TID if v >= 7 else None, partition_states=[part]
            )
        ]
        if v >= 5
        else [],
        live_brokers=[broker],
    )


def alter_partition(v: int) -> Any:
    T = AlterPartitionRequest.TopicData
    P = T.PartitionData
    return AlterPartitionRequest(
        broker_id=1,
        broker_epoch=77,
        topics=[
            T(
                topic_name="t" if v <= 1 else "",
                topic_id=TID if v >= 2 else None,
                partitions=[
                    P(
                        partition_index=0,
                        leader_epoch=5,
                        new_isr=[1, 2] if v <= 2 else [],
                        new_isr_with_epochs=[P.BrokerState(broker_id=1, broker_epoch=77)]
                        if v >= 3
                        else [],
                        leader_recovery_state=0,
                        partition_epoch=8,
                    )
                ],
            )
        ],
    )


def alter_partition_response(v: int) -> Any:
    T = AlterPartitionResponse.TopicData
    return AlterPartitionResponse(
        throttle_time_ms=0,
        error_code=0,
        topics=[
            T(
                topic_name="t" if v <= 1 else "",
                topic_id=TID if v >= 2 else None,
                partitions=[
                    T.PartitionData(
                        partition_index=0,
                        error_code=0,
                        leader_id=1,
                        leader_epoch=5,
                        isr=[1, 2],
                        leader_recovery_state=0,
                        partition_epoch=9,
                    )
                ],
            )
        ],
    )


CASES = (
    [("LeaderAndIsrRequest", LeaderAndIsrRequest, leader_and_isr, v) for v in range(8)]
    + [("LeaderAndIsrResponse", LeaderAndIsrResponse, leader_and_isr_response, v) for v in range(8)]
    + [("StopReplicaRequest", StopReplicaRequest, stop_replica, v) for v in range(5)]
    + [
        (
            "StopReplicaResponse",
            StopReplicaResponse,
            lambda v: StopReplicaResponse(
                error_code=0,
                partition_errors=[
                    StopReplicaResponse.StopReplicaPartitionError(
                        topic_name="t", partition_index=0, error_code=0
                    )
                ],
            ),
            v,
        )
        for v in range(5)
    ]
    + [("UpdateMetadataRequest", UpdateMetadataRequest, update_metadata, v) for v in range(9)]
    + [
        (
            "UpdateMetadataResponse",
            UpdateMetadataResponse,
            lambda v: UpdateMetadataResponse(error_code=11),
            v,
        )
        for v in range(9)
    ]
    + [
        (
            "ControlledShutdownRequest",
            ControlledShutdownRequest,
            lambda v: ControlledShutdownRequest(broker_id=2, broker_epoch=5 if v >= 2 else -1),
            v,
        )
        for v in range(4)
    ]
    + [
        (
            "ControlledShutdownResponse",
            ControlledShutdownResponse,
            lambda v: ControlledShutdownResponse(
                error_code=0,
                remaining_partitions=[
                    ControlledShutdownResponse.RemainingPartition(topic_name="t", partition_index=1)
                ],
            ),
            v,
        )
        for v in range(4)
    ]
    + [("AlterPartitionRequest", AlterPartitionRequest, alter_partition, v) for v in range(4)]
    + [
        ("AlterPartitionResponse", AlterPartitionResponse, alter_partition_response, v)
        for v in range(4)
    ]
)


@pytest.mark.parametrize(
    ("name", "cls", "build", "version"),
    CASES,
    ids=lambda x: str(x) if isinstance(x, (str, int)) else "",
)
def test_round_trip_at_every_version(name: str, cls: Any, build: Any, version: int) -> None:
    msg = build(version)
    data = msg.encode(version)
    again = cls.decode(data, version)
    assert again.encode(version) == data
    with pytest.raises(DecodeError):
        cls.decode(data[: len(data) // 2], version)


def test_controlled_shutdown_v2_layout() -> None:
    assert ControlledShutdownRequest(broker_id=2, broker_epoch=5).encode(2) == struct.pack(
        ">iq", 2, 5
    )
    assert ControlledShutdownRequest(broker_id=2).encode(1) == struct.pack(">i", 2)


def test_leader_and_isr_v1_layout() -> None:
    """controller id, controller epoch, [topic, partition, controller epoch, leader, leader epoch,
    isr[], zk version, replicas[], is_new], live leaders[id, host, port]"""
    expected = (
        struct.pack(">iii", 3, 7, 1)
        + struct.pack(">h", 6)
        + b"orders"
        + struct.pack(">iiii", 2, 7, 1, 9)
        + struct.pack(">iii", 2, 1, 3)
        + struct.pack(">i", 11)
        + struct.pack(">iiii", 3, 1, 2, 3)
        + b"\x01"
        + struct.pack(">ii", 1, 1)
        + struct.pack(">h", 2)
        + b"h1"
        + struct.pack(">i", 9)
    )
    assert leader_and_isr(1).encode(1) == expected


def test_alter_partition_v1_layout_is_flexible() -> None:
    got = alter_partition(1).encode(1)
    expected = (
        struct.pack(">iq", 1, 77)
        + b"\x02"  # one topic (compact array: n + 1)
        + b"\x02t"  # compact string "t"
        + b"\x02"  # one partition
        + struct.pack(">ii", 0, 5)
        + b"\x03"
        + struct.pack(">ii", 1, 2)  # new isr [1, 2]
        + b"\x00"  # leader recovery state
        + struct.pack(">i", 8)
        + b"\x00"  # partition tags
        + b"\x00"  # topic tags
        + b"\x00"  # request tags
    )
    assert got == expected
