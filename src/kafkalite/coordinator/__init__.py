"""The group coordinator (`__consumer_offsets`) and the transaction coordinator (`__transaction_state`):
pure logic over their internal topics; the broker supplies the clock, the log appends and the I/O.
"""

from kafkalite.coordinator.coordinator import GroupCoordinator
from kafkalite.coordinator.deferred import Deferred
from kafkalite.coordinator.records import partition_for
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
    "TRANSACTION_STATE_TOPIC",
    "CoordinatorConfig",
    "CoordinatorRecord",
    "Deferred",
    "GroupCoordinator",
    "GroupState",
    "InitProducerIdResult",
    "TopicPartition",
    "TransactionCoordinator",
    "TxnConfig",
    "TxnMarkerRequest",
    "partition_for",
]
