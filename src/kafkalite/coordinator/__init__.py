"""The group (`__consumer_offsets`), transaction (`__transaction_state`) and share coordinators
(`__share_group_state`): pure logic over internal topics; the broker supplies clock, appends and I/O.
"""

from kafkalite.coordinator.coordinator import GroupCoordinator
from kafkalite.coordinator.deferred import Deferred
from kafkalite.coordinator.records import partition_for
from kafkalite.coordinator.share_records import SHARE_GROUP_STATE_TOPIC
from kafkalite.coordinator.share_state import ShareStateManager
from kafkalite.coordinator.state import GroupState
from kafkalite.coordinator.txn_coordinator import TransactionCoordinator
from kafkalite.coordinator.txn_records import TRANSACTION_STATE_TOPIC
from kafkalite.coordinator.txn_types import InitProducerIdResult, TxnConfig, TxnMarkerRequest
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
    "SHARE_GROUP_STATE_TOPIC",
    "TRANSACTION_STATE_TOPIC",
    "CoordinatorConfig",
    "CoordinatorRecord",
    "Deferred",
    "GroupCoordinator",
    "GroupState",
    "InitProducerIdResult",
    "ShareStateManager",
    "TopicPartition",
    "TransactionCoordinator",
    "TxnConfig",
    "TxnMarkerRequest",
    "partition_for",
]
