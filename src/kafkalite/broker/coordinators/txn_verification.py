"""KIP-890 part 1 on the partition leader (Kafka's AddPartitionsToTxnManager): before a transaction's first
batch on a partition is appended, ask its coordinator whether the partition is in the transaction.

The question is AddPartitionsToTxn v4+ with VerifyOnly over the inter-broker channel, or a direct call when
this broker is the coordinator. Pure decisions (which batch asks, how an answer becomes the produce's error)
are the functions at the top; the guards live in each partition's producer state (storage).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
from collections.abc import Callable, Mapping
from typing import Protocol

from kafkalite.broker.network.inter_broker import InterBrokerSettings
from kafkalite.cluster.append_records import Records
from kafkalite.cluster.channel import ChannelError, ChannelManager, UnsupportedVersion
from kafkalite.cluster.metadata_cache import MetadataCache
from kafkalite.coordinator import TRANSACTION_STATE_TOPIC, TopicPartition
from kafkalite.coordinator.txn_coordinator import TransactionCoordinator
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.txn import AddPartitionsToTxnRequest
from kafkalite.storage.producer_state import VerificationGuard

log = logging.getLogger("kafkalite.broker.txn_verification")

E = ErrorCode
_Txn = AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction
_Topic = _Txn.AddPartitionsToTxnTopic

# v2 batch header: magic at byte 16, attributes (int16) at 21, producer id at 43, epoch at 51
_unpack_producer = struct.Struct(">16xb4xh20xqh").unpack_from
_TRANSACTIONAL, _CONTROL = 0x10, 0x20
# what the coordinator answers while it cannot tell yet: old clients retry NOT_ENOUGH_REPLICAS
_RETRY_LATER = frozenset(
    {E.CONCURRENT_TRANSACTIONS, E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE,
     E.NOT_COORDINATOR}
)  # fmt: skip
# Produce v11+ knows TRANSACTION_ABORTABLE; older clients get INVALID_TXN_STATE (as Kafka maps it)
TRANSACTION_ABORTABLE_SINCE = 11


def transactional_producer(records: Records | None) -> tuple[int, int] | None:
    """(producer id, epoch) when the first batch of a partition's records is a transactional data
    batch (the one verification is about), else None. Reads the header only."""
    if records is None or len(records) < 61:
        return None
    magic, attrs, producer_id, epoch = _unpack_producer(records)
    if magic != 2 or not attrs & _TRANSACTIONAL or attrs & _CONTROL or producer_id < 0:
        return None
    return producer_id, epoch


def needs_round_trip(guard: VerificationGuard, sentinel: VerificationGuard) -> bool:
    """Only a transaction's first batch on a partition asks the coordinator: not when the
    transaction is already open here (the sentinel) nor when its guard was already verified."""
    return guard is not sentinel and not guard.verified


def produce_error(code: ErrorCode, produce_version: int) -> tuple[ErrorCode, str] | None:
    """How a coordinator's verification answer for one partition reaches the producer (None: it may
    be appended), as Kafka's leader maps it: a fenced producer is INVALID_PRODUCER_EPOCH, 'not yet
    known' answers are the retriable NOT_ENOUGH_REPLICAS, a partition outside the transaction is
    TRANSACTION_ABORTABLE (Produce v11+) or INVALID_TXN_STATE."""
    if code == E.NO_ERROR:
        return None
    if code == E.PRODUCER_FENCED:
        code = E.INVALID_PRODUCER_EPOCH
    if code == E.TRANSACTION_ABORTABLE and produce_version < TRANSACTION_ABORTABLE_SINCE:
        code = E.INVALID_TXN_STATE
    if code in _RETRY_LATER:
        return E.NOT_ENOUGH_REPLICAS, (
            "Unable to verify the partition has been added to the transaction. "
            f"Underlying error: {code.name}"
        )
    if code in (E.INVALID_TXN_STATE, E.TRANSACTION_ABORTABLE):
        return code, "Partition was not added to the transaction"
    return code, f"the transaction could not be verified: {code.name}"


def response_codes(
    response: object, wanted: list[TopicPartition]
) -> dict[TopicPartition, ErrorCode]:
    """A v4+ AddPartitionsToTxn response as a code per partition asked about. A top-level
    CLUSTER_AUTHORIZATION_FAILED is not the client's to see: INVALID_TXN_STATE, as Kafka does."""
    top = E(getattr(response, "error_code", 0))
    if top:
        return dict.fromkeys(
            wanted, E.INVALID_TXN_STATE if top == E.CLUSTER_AUTHORIZATION_FAILED else top
        )
    out: dict[TopicPartition, ErrorCode] = {}
    for result in getattr(response, "results_by_transaction", []):
        for t in result.topic_results:
            for p in t.results_by_partition:
                out[TopicPartition(t.name, p.partition_index)] = E(p.partition_error_code)
    return {tp: out.get(tp, E.UNKNOWN_SERVER_ERROR) for tp in wanted}


class VerifierHost(Protocol):
    """What verification reads of the broker (BrokerServer is one)."""

    @property
    def metadata_cache(self) -> MetadataCache: ...

    @property
    def inter_broker(self) -> InterBrokerSettings: ...


class AddPartitionsToTxnManager:
    """Asks transaction coordinators whether partitions are in a transaction, once per guard: a
    question already in flight for the same guard is joined, not repeated."""

    def __init__(
        self, broker: VerifierHost, coordinator: Callable[[], TransactionCoordinator | None]
    ) -> None:
        self.broker = broker
        self._coordinator = coordinator
        self._channels: ChannelManager | None = None
        self._inflight: dict[VerificationGuard, asyncio.Future[ErrorCode]] = {}
        self.round_trips = 0  # questions sent over the wire (tests and metrics read it)
        self.local_checks = 0  # questions answered by this broker's own coordinator

    async def verify(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        guards: Mapping[TopicPartition, VerificationGuard],
    ) -> dict[TopicPartition, ErrorCode]:
        """The coordinator's code for each partition; a NO_ERROR marks its guard verified."""
        loop = asyncio.get_running_loop()
        waits: dict[TopicPartition, asyncio.Future[ErrorCode]] = {}
        ask: list[TopicPartition] = []
        for tp, guard in guards.items():
            fut = self._inflight.get(guard)
            if fut is None:
                fut = self._inflight[guard] = loop.create_future()
                ask.append(tp)
            waits[tp] = fut
        if ask:
            codes: dict[TopicPartition, ErrorCode] = {}
            try:
                codes = await self._ask(transactional_id, producer_id, producer_epoch, ask)
            except Exception:
                log.exception("verifying %r failed", transactional_id)
            finally:
                # answered, failed or cancelled: the joiners are released and the guard may ask again
                for tp in ask:
                    guard = guards[tp]
                    code = codes.get(tp, E.NETWORK_EXCEPTION)
                    if code == E.NO_ERROR:
                        guard.verified = True
                    fut = self._inflight.pop(guard)
                    if not fut.done():
                        fut.set_result(code)
        return {tp: await asyncio.shield(fut) for tp, fut in waits.items()}

    async def _ask(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        tps: list[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        coord = self._coordinator()
        if coord is None:
            return dict.fromkeys(tps, E.COORDINATOR_NOT_AVAILABLE)
        cache = self.broker.metadata_cache
        meta = cache.partition(TRANSACTION_STATE_TOPIC, coord.partition_for(transactional_id))
        leader = meta.leader if meta is not None else -1
        if leader < 0:
            return dict.fromkeys(tps, E.COORDINATOR_NOT_AVAILABLE)
        if leader == self.broker.inter_broker.broker_id:
            # the coordinator is here: ask it in process, no wire hop
            self.local_checks += 1
            if not coord.active:
                return dict.fromkeys(tps, E.COORDINATOR_NOT_AVAILABLE)
            return coord.verify_partitions(transactional_id, producer_id, producer_epoch, tps)
        endpoint = cache.broker(leader)
        if endpoint is None:
            return dict.fromkeys(tps, E.COORDINATOR_NOT_AVAILABLE)
        if self._channels is None:
            self._channels = self.broker.inter_broker.channels("txn-verification")
        by_topic: dict[str, list[int]] = {}
        for tp in tps:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        request = AddPartitionsToTxnRequest(
            transactions=[
                _Txn(
                    transactional_id=transactional_id,
                    producer_id=producer_id,
                    producer_epoch=producer_epoch,
                    verify_only=True,
                    topics=[_Topic(name=t, partitions=ps) for t, ps in by_topic.items()],
                )
            ]
        )
        self.round_trips += 1
        try:
            channel = self._channels.get(leader, endpoint.host, endpoint.port)
            response = await channel.send(request, min_version=4)
        except UnsupportedVersion as exc:
            # a coordinator from before KIP-890 cannot be asked: append unverified, as Kafka does
            log.warning("not verifying %r: %s", transactional_id, exc)
            return dict.fromkeys(tps, E.NO_ERROR)
        except (ChannelError, OSError) as exc:
            log.info("AddPartitionsToTxn (verify) to broker %d failed: %s", leader, exc)
            return dict.fromkeys(tps, E.NETWORK_EXCEPTION)
        return response_codes(response, tps)

    async def stop(self) -> None:
        for fut in self._inflight.values():
            if not fut.done():
                fut.set_result(E.NETWORK_EXCEPTION)
        self._inflight.clear()
        if self._channels is not None:
            with contextlib.suppress(Exception):
                await self._channels.close_all()
