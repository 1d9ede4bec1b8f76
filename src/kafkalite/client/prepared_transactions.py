"""Two-phase commit with the transactional producer: a transaction prepared in one process (records and
offsets flushed, not committed) and ended with EndTxn elsewhere, knowing only its id, producer id and epoch.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kafkalite.client.config import ADMIN, honoured, make_config
from kafkalite.client.errors import (
    KafkaConnectionError,
    KafkaTimeoutError,
    NoBrokersAvailable,
)
from kafkalite.client.find_coordinator import TRANSACTION_KEY, find_coordinator
from kafkalite.client.io_thread import IOThread
from kafkalite.client.network import NetworkClient
from kafkalite.client.transaction_manager import END_TXN, fatal_error
from kafkalite.protocol.errors import ErrorCode as E
from kafkalite.protocol.errors import KafkaError
from kafkalite.protocol.messages.txn import EndTxnRequest

log = logging.getLogger("kafkalite.client.producer")

_COORDINATOR_MOVED = frozenset({E.NOT_COORDINATOR, E.COORDINATOR_NOT_AVAILABLE})
_RETRY = frozenset({E.CONCURRENT_TRANSACTIONS, E.COORDINATOR_LOAD_IN_PROGRESS})
_FENCED = frozenset({E.PRODUCER_FENCED, E.INVALID_PRODUCER_EPOCH, E.INVALID_PRODUCER_ID_MAPPING})


@dataclass(frozen=True)
class PreparedTransaction:
    """What EndTxn needs to finish a transaction some other producer instance opened and flushed."""

    transactional_id: str
    producer_id: int
    producer_epoch: int


class PreparedTransactionFencedError(KafkaError):
    """The prepared transaction is no longer the open one of its transactional id: a newer producer
    (init_transactions) or the coordinator's timeout aborted it, so it can never be committed."""


async def end_prepared_transaction(
    client: NetworkClient,
    txn: PreparedTransaction,
    commit: bool,
    deadline: float,
    backoff: float = 0.05,
) -> None:
    """EndTxn(committed=`commit`) for `txn` at its transaction coordinator, retrying while the coordinator
    moves or is busy (CONCURRENT_TRANSACTIONS). Repeating an EndTxn that already completed the same way
    succeeds (the coordinator answers NO_ERROR from CompleteCommit / CompleteAbort)."""
    req_cls = EndTxnRequest
    what = "commit" if commit else "abort"
    node: int | None = None
    last: BaseException | None = None
    while True:
        if time.monotonic() > deadline:
            raise KafkaTimeoutError(
                f"could not {what} the prepared transaction of {txn.transactional_id!r} "
                f"in time (last error: {last})"
            )
        try:
            if node is None:
                node = await find_coordinator(client, txn.transactional_id, TRANSACTION_KEY)
            conn = await client.connection(node)
            version = conn.version(END_TXN)
            resp = await conn.send(
                req_cls(
                    transactional_id=txn.transactional_id,
                    producer_id=txn.producer_id,
                    producer_epoch=txn.producer_epoch,
                    committed=commit,
                ),
                version=version,
            )
            code = int(resp.error_code)
        except KafkaError as exc:  # FindCoordinator's answer
            if not exc.retriable:
                raise
            last, node = exc, None
            await asyncio.sleep(backoff)
            continue
        except (KafkaConnectionError, KafkaTimeoutError, NoBrokersAvailable) as exc:
            last, node = exc, None
            await asyncio.sleep(backoff)
            continue
        if code == E.NO_ERROR:
            return
        last = KafkaError(code, "EndTxn")
        if code in _COORDINATOR_MOVED:
            node = None
            await asyncio.sleep(backoff)
        elif code in _RETRY:
            await asyncio.sleep(
                min(backoff, 0.02) if code == E.CONCURRENT_TRANSACTIONS else backoff
            )
        elif code in _FENCED:
            raise PreparedTransactionFencedError(
                code,
                f"cannot {what} the prepared transaction of {txn.transactional_id!r} (producer id "
                f"{txn.producer_id}, epoch {txn.producer_epoch}): a newer producer or the "
                "transaction timeout (transaction.timeout.ms) already aborted it",
            )
        else:
            raise fatal_error(code, f"EndTxn({what}) for {txn.transactional_id!r}")


def end_prepared_transactions(
    config: dict[str, Any],
    transactions: Iterable[PreparedTransaction],
    commit: bool,
    timeout: float = 60.0,
) -> None:
    """Commit (or abort) every prepared transaction, concurrently, with one short-lived connection set.
    `config` is a client configuration (bootstrap.servers, ...); keys the admin client does not know are
    ignored. Raises the first failure once every EndTxn is answered."""
    todo = list(transactions)
    if not todo:
        return
    cfg = make_config(ADMIN, honoured(ADMIN, config), {})
    io = IOThread("kafkalite-end-prepared-txn")
    client = NetworkClient(cfg, io)
    deadline = time.monotonic() + timeout

    async def all_of() -> list[BaseException | None]:
        return await asyncio.gather(
            *(end_prepared_transaction(client, t, commit, deadline) for t in todo),
            return_exceptions=True,
        )

    try:
        outcomes = io.run(all_of(), timeout + 5)
    finally:
        try:
            io.run(client.close(), 5)
        except Exception:  # pragma: no cover - best effort
            pass
        io.stop()
    errors = [o for o in outcomes if isinstance(o, BaseException)]
    for txn, o in zip(todo, outcomes, strict=True):
        if isinstance(o, BaseException):
            log.warning("EndTxn for %s failed: %s", txn.transactional_id, o)
    if errors:
        raise errors[0]
