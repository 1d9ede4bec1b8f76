"""end_prepared_transaction's retry rules against a scripted coordinator: coordinator moves, lost
connections, CONCURRENT_TRANSACTIONS back-off, fencing and the deadline."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace
from typing import Any

import pytest

from kafkalite.client import prepared_transactions as pt
from kafkalite.client.errors import KafkaConnectionError
from kafkalite.protocol.errors import ErrorCode as E

TXN = pt.PreparedTransaction("tid-p0", 7, 3)


class ScriptedClient:
    """Answers EndTxn with the next code of `codes` (an exception is raised instead of answered)."""

    def __init__(self, codes: list[Any]) -> None:
        self.codes = list(codes)
        self.requests: list[Any] = []

    async def connection(self, node: int) -> Any:
        return self

    def version(self, api_key: int) -> int:
        return 3

    async def send(self, request: Any, version: int) -> Any:
        self.requests.append(request)
        code = self.codes.pop(0)
        if isinstance(code, BaseException):
            raise code
        return SimpleNamespace(error_code=code)


def _run(client: ScriptedClient, monkeypatch: pytest.MonkeyPatch, commit: bool = True) -> list[str]:
    lookups: list[str] = []

    async def find(_client: Any, key: str, key_type: int) -> int:
        lookups.append(key)
        return len(lookups)

    monkeypatch.setattr(pt, "find_coordinator", find)
    asyncio.run(
        pt.end_prepared_transaction(client, TXN, commit, time.monotonic() + 5, backoff=0.001)  # type: ignore[arg-type]
    )
    return lookups


def test_retries_until_the_coordinator_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    client = ScriptedClient(
        [E.NOT_COORDINATOR, KafkaConnectionError("gone"), E.CONCURRENT_TRANSACTIONS, E.NO_ERROR]
    )
    lookups = _run(client, monkeypatch)
    assert lookups == ["tid-p0"] * 3  # first, after NOT_COORDINATOR, after the lost connection
    assert len(client.requests) == 4
    r = client.requests[-1]
    assert (r.transactional_id, r.producer_id, r.producer_epoch, r.committed) == (
        "tid-p0",
        7,
        3,
        True,
    )


@pytest.mark.parametrize("code", [E.PRODUCER_FENCED, E.INVALID_PRODUCER_ID_MAPPING])
def test_a_fenced_transaction_is_reported(monkeypatch: pytest.MonkeyPatch, code: E) -> None:
    with pytest.raises(pt.PreparedTransactionFencedError, match="already aborted it"):
        _run(ScriptedClient([code]), monkeypatch)


def test_other_errors_are_not_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(Exception, match="INVALID_TXN_STATE"):
        _run(ScriptedClient([E.INVALID_TXN_STATE, E.NO_ERROR]), monkeypatch, commit=False)


def test_gives_up_at_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    client = ScriptedClient([E.CONCURRENT_TRANSACTIONS] * 100_000)

    async def find(_client: Any, key: str, key_type: int) -> int:
        return 1

    monkeypatch.setattr(pt, "find_coordinator", find)
    with pytest.raises(pt.KafkaTimeoutError, match="could not commit"):
        asyncio.run(pt.end_prepared_transaction(client, TXN, True, time.monotonic() + 0.1))  # type: ignore[arg-type]
