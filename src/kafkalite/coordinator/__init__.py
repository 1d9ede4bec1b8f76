"""The group coordinator: classic consumer-group state machine, rebalances and committed offsets kept in
`__consumer_offsets`. Pure logic; the broker supplies the clock and the log appends.
"""

from kafkalite.coordinator.coordinator import GroupCoordinator
from kafkalite.coordinator.deferred import Deferred
from kafkalite.coordinator.records import partition_for
from kafkalite.coordinator.state import GroupState
from kafkalite.coordinator.types import (
    CONSUMER_PROTOCOL_TYPE,
    OFFSETS_TOPIC,
    CoordinatorConfig,
    CoordinatorRecord,
    TopicPartition,
)

__all__ = [
    "CONSUMER_PROTOCOL_TYPE",
    "OFFSETS_TOPIC",
    "CoordinatorConfig",
    "CoordinatorRecord",
    "Deferred",
    "GroupCoordinator",
    "GroupState",
    "TopicPartition",
    "partition_for",
]
