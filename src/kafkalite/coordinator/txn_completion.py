"""The completion half of a transaction: once its Prepare record is in the log, the markers go out, and
once they are written CompleteCommit / CompleteAbort is; a completion write that failed is retried.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from kafkalite.coordinator.txn_records import txn_record
from kafkalite.coordinator.txn_state import TransactionMetadata, TransactionState
from kafkalite.coordinator.txn_state_manager import TransactionStateManager
from kafkalite.coordinator.txn_types import TxnMarkerRequest
from kafkalite.protocol.errors import ErrorCode

log = logging.getLogger("kafkalite.coordinator.txn")

E = ErrorCode
_S = TransactionState

# a completion write that failed is tried again this long after
COMPLETION_RETRY_BACKOFF_MS = 100


class TxnCompletion:
    """Markers out and the Complete* record in, for the transactions of a TransactionStateManager."""

    def __init__(
        self, state: TransactionStateManager, send_markers: Callable[[TxnMarkerRequest], None]
    ) -> None:
        self._state = state
        self._send_markers = send_markers
        self._completion_retries: list[tuple[int, TxnMarkerRequest]] = []

    def begin(self, partition: int, coordinator_epoch: int, metadata: TransactionMetadata) -> None:
        """A Prepare record is in the log: send the markers (or, with no partitions, complete now)."""
        current = self._state.current(partition, coordinator_epoch, metadata.transactional_id)
        if current is not metadata or metadata.pending_transition_in_progress:
            return
        if metadata.state not in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
            return
        commit = metadata.state is _S.PREPARE_COMMIT
        metadata.pending_state = _S.COMPLETE_COMMIT if commit else _S.COMPLETE_ABORT
        request = TxnMarkerRequest(
            metadata.transactional_id,
            metadata.producer_id,
            metadata.producer_epoch,
            coordinator_epoch,
            commit,
            frozenset(metadata.topic_partitions),
        )
        if not request.partitions:
            self._write_completion(partition, metadata, request)
            return
        try:
            self._send_markers(request)
        except Exception:
            log.exception("send_markers raised for %r", metadata.transactional_id)

    def _awaiting(self, request: TxnMarkerRequest) -> TransactionMetadata | None:
        """The metadata whose markers `request` carried, if it is still waiting for them."""
        partition = self._state.partition_for(request.transactional_id)
        metadata = self._state.current(
            partition, request.coordinator_epoch, request.transactional_id
        )
        prepare, complete = (
            (_S.PREPARE_COMMIT, _S.COMPLETE_COMMIT)
            if request.commit
            else (_S.PREPARE_ABORT, _S.COMPLETE_ABORT)
        )
        if (
            metadata is None
            or metadata.producer_id != request.producer_id
            or metadata.producer_epoch != request.producer_epoch
            or metadata.state is not prepare
            or metadata.pending_state is not complete
        ):
            return None
        return metadata

    def markers_written(self, request: TxnMarkerRequest) -> None:
        """Every partition of `request` has its marker (or is gone): write CompleteCommit/CompleteAbort."""
        metadata = self._awaiting(request)
        if metadata is None:
            log.info("markers of %r are no longer awaited; ignored", request.transactional_id)
            return
        self._write_completion(
            self._state.partition_for(request.transactional_id), metadata, request
        )

    def _write_completion(
        self, partition: int, metadata: TransactionMetadata, request: TxnMarkerRequest
    ) -> None:
        transit = metadata.prepare_complete(self._state.now())

        def done(code: ErrorCode) -> None:
            if code == E.NO_ERROR or code in (E.NOT_COORDINATOR, E.COORDINATOR_LOAD_IN_PROGRESS):
                return  # done, or the partition moved: its next leader completes it on load
            self._completion_retries.append(
                (self._state.now() + COMPLETION_RETRY_BACKOFF_MS, request)
            )

        self._state.write(
            partition,
            request.coordinator_epoch,
            [txn_record(metadata.transactional_id, transit)],
            done,
            reset_pending_on_error=False,
        )

    def retry_due(self, now: int) -> None:
        """Write again the completions whose retry is due."""
        due = [r for t, r in self._completion_retries if t <= now]
        self._completion_retries = [(t, r) for t, r in self._completion_retries if t > now]
        for request in due:
            metadata = self._awaiting(request)
            if metadata is not None:
                self._write_completion(
                    self._state.partition_for(request.transactional_id), metadata, request
                )

    def retry_deadlines(self) -> list[int]:
        return [t for t, _ in self._completion_retries]

    def drop_retries(self, partition: int) -> None:
        self._completion_retries = [
            (due, r)
            for due, r in self._completion_retries
            if self._state.partition_for(r.transactional_id) != partition
        ]

    def shutdown(self) -> None:
        self._completion_retries = []
