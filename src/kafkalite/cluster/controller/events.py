"""The controller's vocabulary: the events ControllerMachine reacts to (ZooKeeper changes, broker
requests, admin requests) and the effects it returns for KafkaController to carry out.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from kafkalite.cluster.controller.states import LeaderIsr, TopicPartition
from kafkalite.cluster.metadata_cache import ListenerEndpoint
from kafkalite.protocol.errors import ErrorCode


# -- inputs ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class BrokerInfo:
    broker_id: int
    host: str
    port: int
    rack: str | None
    epoch: int
    listeners: tuple[ListenerEndpoint, ...] = ()


@dataclass(frozen=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    assignment: dict[int, tuple[int, ...]]
    adding: dict[int, tuple[int, ...]] = field(default_factory=dict)  # partitions being moved
    removing: dict[int, tuple[int, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class Startup:
    """This broker won the election: the whole cluster as ZooKeeper has it."""

    epoch: int
    brokers: dict[int, BrokerInfo]
    topics: dict[str, TopicInfo]
    states: dict[TopicPartition, LeaderIsr]
    deleting: frozenset[str] = frozenset()


@dataclass(frozen=True)
class BrokersChanged:
    brokers: dict[int, BrokerInfo]


@dataclass(frozen=True)
class TopicsChanged:
    topics: dict[str, TopicInfo]


@dataclass(frozen=True)
class TopicDeletionRequested:
    names: frozenset[str]


@dataclass(frozen=True)
class PartitionStatesWritten:
    """What the driver's ZooKeeper write of a WritePartitionStates did: new znode versions, and the
    partitions whose compare-and-set lost (someone else wrote them)."""

    tag: str
    done: dict[TopicPartition, int]
    failed: tuple[TopicPartition, ...] = ()


@dataclass(frozen=True)
class PartitionStatesReloaded:
    states: dict[TopicPartition, LeaderIsr]


@dataclass(frozen=True)
class ControlledShutdownRequested:
    broker_id: int
    broker_epoch: int
    request_id: int


@dataclass(frozen=True)
class AlterPartitionItem:
    tp: TopicPartition
    leader_epoch: int
    new_isr: tuple[int, ...]
    partition_epoch: int


@dataclass(frozen=True)
class AlterPartitionRequested:
    broker_id: int
    broker_epoch: int
    items: tuple[AlterPartitionItem, ...]
    request_id: int


@dataclass(frozen=True)
class LeaderElectionRequested:
    """ElectLeaders: election type 0 (preferred) or 1 (unclean) for these partitions (None: every
    partition); `request_id` -1 when nobody waits for the answer."""

    election_type: int = 0
    partitions: frozenset[TopicPartition] | None = None
    request_id: int = -1


@dataclass(frozen=True)
class LeaderImbalanceCheck:
    """The periodic check of auto.leader.rebalance.enable (leader.imbalance.per.broker.percentage)."""

    per_broker_percentage: int


@dataclass(frozen=True)
class ReassignmentRequested:
    """AlterPartitionReassignments: a target replica set per partition (None: cancel the move)."""

    targets: dict[TopicPartition, tuple[int, ...] | None]
    request_id: int


@dataclass(frozen=True)
class LegacyReassignmentRequested:
    """/admin/reassign_partitions as it is now (Kafka's pre-KIP-455 request): partition -> target."""

    targets: dict[TopicPartition, tuple[int, ...]]


@dataclass(frozen=True)
class LogDirEventNotified:
    """/log_dir_event_notification named these brokers: a log dir of theirs failed."""

    broker_ids: frozenset[int]


@dataclass(frozen=True)
class LeaderAndIsrResponseReceived:
    """A broker (at `broker_epoch`) answered LeaderAndIsr with KAFKA_STORAGE_ERROR for these
    partitions: their replicas there are in an offline log dir."""

    broker_id: int
    broker_epoch: int
    storage_errors: frozenset[TopicPartition]


Event = (
    Startup
    | BrokersChanged
    | TopicsChanged
    | TopicDeletionRequested
    | PartitionStatesWritten
    | PartitionStatesReloaded
    | ControlledShutdownRequested
    | AlterPartitionRequested
    | LeaderElectionRequested
    | LeaderImbalanceCheck
    | ReassignmentRequested
    | LegacyReassignmentRequested
    | LogDirEventNotified
    | LeaderAndIsrResponseReceived
)


# -- outputs -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class WritePartitionStates:
    """Write each partition's new LeaderIsr; `partition_epoch` is the version expected (-1: create)."""

    tag: str
    states: dict[TopicPartition, LeaderIsr]
    controller_epoch: int


@dataclass(frozen=True)
class ReadPartitionStates:
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True)
class PartitionInfo:
    """What a broker is told about one partition."""

    state: LeaderIsr
    replicas: tuple[int, ...]
    offline: tuple[int, ...] = ()
    is_new: bool = False


@dataclass(frozen=True)
class SendLeaderAndIsr:
    broker_id: int
    controller_epoch: int
    partitions: dict[TopicPartition, PartitionInfo]
    topic_ids: dict[str, uuid.UUID]


@dataclass(frozen=True)
class SendUpdateMetadata:
    broker_ids: tuple[int, ...]
    controller_epoch: int
    partitions: dict[TopicPartition, PartitionInfo]
    brokers: tuple[BrokerInfo, ...]
    topic_ids: dict[str, uuid.UUID]


@dataclass(frozen=True)
class SendStopReplica:
    broker_id: int
    controller_epoch: int
    partitions: tuple[TopicPartition, ...]
    delete: bool


@dataclass(frozen=True)
class WriteTopicAssignment:
    """Rewrite a topic znode's replicas (with the adding / removing replicas of moves in flight)."""

    topic: TopicInfo


@dataclass(frozen=True)
class WriteLegacyReassignments:
    """Rewrite /admin/reassign_partitions with the moves it asked for that still run (empty:
    delete it, as Kafka's controller does once they are all done)."""

    targets: dict[TopicPartition, tuple[int, ...]]


@dataclass(frozen=True)
class ReplyReassignment:
    request_id: int
    results: dict[TopicPartition, tuple[ErrorCode, str | None]]


@dataclass(frozen=True)
class ReplyLeaderElection:
    """The answer to a LeaderElectionRequested, per partition (once its new leader is written)."""

    request_id: int
    results: dict[TopicPartition, tuple[ErrorCode, str | None]]
    leaders: dict[TopicPartition, int] = field(
        default_factory=dict
    )  # the new leader of each elected


@dataclass(frozen=True)
class DeleteTopicZNodes:
    topic: str


@dataclass(frozen=True)
class ReplyControlledShutdown:
    request_id: int
    error: ErrorCode
    remaining: tuple[TopicPartition, ...]


@dataclass(frozen=True)
class ReplyAlterPartition:
    request_id: int
    error: ErrorCode
    results: dict[TopicPartition, tuple[ErrorCode, LeaderIsr | None]]


Effect = (
    WritePartitionStates
    | ReadPartitionStates
    | SendLeaderAndIsr
    | SendUpdateMetadata
    | SendStopReplica
    | DeleteTopicZNodes
    | ReplyControlledShutdown
    | ReplyAlterPartition
    | WriteTopicAssignment
    | ReplyReassignment
    | WriteLegacyReassignments
    | ReplyLeaderElection
)
