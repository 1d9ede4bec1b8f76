"""The transaction coordinator inside a broker: `__transaction_state` partitions loaded when this broker
becomes their leader (the leader epoch is the coordinator epoch) and unloaded when it stops, producer ids,
the marker channel, timers.

Built on broker.coordinator_log like the group coordinator; the logic is coordinator.txn_coordinator's.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Protocol

from kafkalite.broker.apis.txn.init_producer_id import next_producer_id
from kafkalite.broker.config.broker_config import BrokerConfig
from kafkalite.broker.coordinators.coordinator_log import (
    CoordinatorHost,
    CoordinatorPartitions,
    StoredBatch,
    now_ms,
)
from kafkalite.broker.coordinators.txn_markers import MarkerHost, TransactionMarkerChannelManager
from kafkalite.broker.coordinators.txn_verification import AddPartitionsToTxnManager
from kafkalite.coordinator import (
    OFFSETS_TOPIC,
    TRANSACTION_STATE_TOPIC,
    CoordinatorRecord,
    Deferred,
    TopicPartition,
)
from kafkalite.coordinator.records import encode_batch
from kafkalite.coordinator.txn_coordinator import TransactionCoordinator
from kafkalite.coordinator.txn_types import TxnConfig, TxnMarkerRequest
from kafkalite.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkalite.broker.zk_broker import ZkBroker

log = logging.getLogger("kafkalite.broker.transactions")


def txn_config(cfg: BrokerConfig, partitions: int) -> TxnConfig:
    return TxnConfig(
        transaction_state_log_num_partitions=partitions,
        transaction_max_timeout_ms=int(cfg.get("transaction.max.timeout.ms")),
        transactional_id_expiration_ms=int(cfg.get("transactional.id.expiration.ms")),
        abort_timed_out_check_interval_ms=int(
            cfg.get("transaction.abort.timed.out.transaction.cleanup.interval.ms")
        ),
        remove_expired_check_interval_ms=int(
            cfg.get("transaction.remove.expired.transaction.cleanup.interval.ms")
        ),
    )


class TransactionHost(CoordinatorHost, MarkerHost, Protocol):
    """What the transaction coordinator reads of the broker (BrokerServer is one), beside its
    partitions' and its markers' needs: ZooKeeper's producer id blocks in a cluster."""

    @property
    def zk_broker(self) -> ZkBroker | None: ...


class TransactionCoordinatorComponent(CoordinatorPartitions):
    """The transaction coordinator of one broker, following leadership of `__transaction_state`."""

    topic = TRANSACTION_STATE_TOPIC
    partitions_config = "transaction.state.log.num.partitions"
    replication_config = "transaction.state.log.replication.factor"
    timeout_config = "offsets.commit.timeout.ms"
    name = "transaction coordinator"

    def __init__(self, broker: TransactionHost) -> None:
        super().__init__(broker)
        self.host = broker
        self.coordinator: TransactionCoordinator | None = None
        self.markers = TransactionMarkerChannelManager(
            broker, self._markers_written, self._still_wanted
        )
        # KIP-890: the partition leader's questions to the coordinators (this one in process)
        self.verifier = AddPartitionsToTxnManager(broker, lambda: self.coordinator)
        cfg = broker.config
        # Kafka's topic configs for __transaction_state; min.insync.replicas never above the RF
        rf = 1 if not broker.cluster_mode else int(cfg.get(self.replication_config))
        self.topic_configs = {
            "cleanup.policy": "compact",
            "segment.bytes": str(cfg.get("transaction.state.log.segment.bytes")),
            "compression.type": "uncompressed",
            "unclean.leader.election.enable": "false",
            "min.insync.replicas": str(
                max(1, min(int(cfg.get("transaction.state.log.min.isr")), rf))
            ),
        }

    # -- lifecycle ---------------------------------------------------------------------------------
    async def start(self) -> None:
        partitions = await self._open_topic()
        groups = self.host.groups

        def offsets_partition_for(group_id: str) -> TopicPartition:
            gc = groups.coordinator
            assert gc is not None
            return TopicPartition(OFFSETS_TOPIC, gc.partition_for(group_id))

        coordinator = TransactionCoordinator(
            self._append,
            config=txn_config(self.broker.config, partitions),
            clock=now_ms,
            new_producer_id=self._new_producer_id,
            send_markers=self.markers.send,
            offsets_partition_for=offsets_partition_for,
        )
        self.coordinator = coordinator
        started = time.monotonic()
        led = await self._load_led_partitions()
        log.info(
            "transaction coordinator loaded %d %s partition(s) in %.0f ms: %d transactional id(s)",
            led, self.topic, (time.monotonic() - started) * 1000,
            sum(len(ids) for ids in coordinator.transactions.values()),
        )  # fmt: skip
        self._start_timers(coordinator.tick, coordinator.next_deadline)

    async def stop(self) -> None:
        await self.markers.stop()
        await self.verifier.stop()
        await self._stop_tasks()
        if self.coordinator is not None:
            self.coordinator.shutdown()

    # -- loading hooks -------------------------------------------------------------------------------
    def _coord(self) -> TransactionCoordinator:
        assert self.coordinator is not None
        return self.coordinator

    def _started(self) -> bool:
        return self.coordinator is not None

    def _owns(self, partition: int) -> bool:
        return partition in self._coord().coordinator_epochs

    def _begin_loading(self, partition: int, leader_epoch: int) -> None:
        self._coord().begin_loading(partition, leader_epoch)

    def _replay(self, partition: int, batch: StoredBatch) -> None:
        coord = self._coord()
        for key, value in batch.records:
            coord.replay(partition, key, value)

    def _finish_loading(self, partition: int) -> None:
        self._coord().finish_loading(partition)

    def _unload(self, partition: int) -> None:
        self._coord().unload(partition)

    # -- edges -------------------------------------------------------------------------------------
    def _append(self, partition: int, records: list[CoordinatorRecord]) -> Deferred[ErrorCode]:
        return self.append(partition, encode_batch(records, now_ms()))

    def _new_producer_id(self) -> Deferred[int]:
        zk = self.host.zk_broker
        if zk is None:
            return Deferred.completed(next_producer_id())
        d: Deferred[int] = Deferred()
        task = asyncio.get_running_loop().create_task(zk.next_producer_id())

        def done(t: asyncio.Task[int]) -> None:
            if t.cancelled() or t.exception() is not None:
                log.warning(
                    "could not allocate a producer id: %s", None if t.cancelled() else t.exception()
                )
                d.complete(-1)
            else:
                d.complete(t.result())

        task.add_done_callback(done)
        return d

    def _markers_written(self, request: TxnMarkerRequest) -> None:
        coord = self.coordinator
        if coord is not None:
            coord.markers_written(request)

    def _still_wanted(self, request: TxnMarkerRequest) -> bool:
        coord = self.coordinator
        if coord is None or not coord.active:
            return False
        partition = coord.partition_for(request.transactional_id)
        return coord.coordinator_epochs.get(partition) == request.coordinator_epoch
