"""Helpers the transaction API handlers share: the broker's transaction coordinator (or the error a client
gets without one), and the error code older request versions use for a fenced producer.
"""

from __future__ import annotations

from kafkalite.broker.context import RequestContext
from kafkalite.coordinator.txn_coordinator import TransactionCoordinator
from kafkalite.protocol.errors import ErrorCode


def coordinator_or_error(ctx: RequestContext) -> tuple[TransactionCoordinator | None, ErrorCode]:
    coord = ctx.broker.transactions.coordinator
    if coord is None or not coord.active:
        return None, ErrorCode.COORDINATOR_NOT_AVAILABLE
    return coord, ErrorCode.NO_ERROR


def old_fenced_code(code: ErrorCode, version: int, fenced_since: int) -> ErrorCode:
    """PRODUCER_FENCED exists for versions >= `fenced_since` (KIP-588); older clients get
    INVALID_PRODUCER_EPOCH, as Kafka answers them."""
    if code == ErrorCode.PRODUCER_FENCED and version < fenced_since:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return code
