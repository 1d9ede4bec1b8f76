"""A scripted in-process Kafka broker for client unit tests: ApiVersions, Metadata, Produce (with
injected per-request errors), InitProducerId on demand, and with `transactions=True` a transaction and
group coordinator (FindCoordinator, AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn) that
fences older epochs and refuses transactional batches of partitions not added; it records what it received."""

from __future__ import annotations

import asyncio
import struct
import threading
from typing import Any

import kafkalite.protocol.messages  # noqa: F401
from kafkalite.protocol.headers import (
    decode_request_header,
    encode_response_header,
    peek_api,
    request_header_version,
    response_header_version,
)
from kafkalite.protocol.schema import APIS
from kafkalite.records.batch import iter_batches

_LEN = struct.Struct(">i")


class FakeBroker:
    def __init__(
        self,
        partitions: int = 2,
        *,
        init_producer_id: bool = False,
        max_produce: int = 9,
        transactions: bool = False,
        find_coordinator_version: int = 4,
    ):
        self.partitions = partitions
        self.offer = {18: 3, 3: 9, 0: max_produce}
        if init_producer_id or transactions:
            self.offer[22] = 4
        if transactions:
            self.offer.update({10: find_coordinator_version, 24: 3, 25: 3, 26: 3, 28: 3})
            self.offer.update({27: 1, 61: 0, 65: 0, 66: 0})
        self.markers: list[Any] = []
        # transaction coordinator state: transactional id -> (producer id, epoch)
        self.txn_ids: dict[str, tuple[int, int]] = {}
        self.txn_partitions: set[tuple[str, int]] = set()
        self.txn_groups: set[str] = set()
        self.pending_offsets: dict[tuple[str, str, int], int] = {}
        self.committed_offsets: dict[tuple[str, str, int], int] = {}
        self.txn_offset_commits: list[Any] = []
        self.end_txns: list[bool] = []
        self.api_errors: dict[int, list[int]] = {}  # api key -> codes for its next requests
        self.violations: list[str] = []  # protocol rules the client broke
        self.txn_log: dict[int, list[tuple[bytes | None, bool]]] = {}  # value, committed
        self.produce_errors: list[int] = []  # error code for each following Produce request
        self.produce_delay = 0.0
        self.log: dict[int, list[tuple[bytes | None, bytes | None]]] = {}
        self.batches: list[Any] = []
        self.requests: list[int] = []
        self.next_seq: dict[tuple[int, int, int], int] = {}
        self.loop = asyncio.new_event_loop()
        self.port = 0
        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(self.loop)

            async def start() -> None:
                self.server = await asyncio.start_server(self._conn, "127.0.0.1", 0)
                self.port = self.server.sockets[0].getsockname()[1]
                ready.set()

            self.loop.run_until_complete(start())
            self.loop.run_forever()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        ready.wait(10)

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def close(self) -> None:
        async def stop() -> None:
            self.server.close()

        asyncio.run_coroutine_threadsafe(stop(), self.loop).result(5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)

    async def _conn(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                size = _LEN.unpack(await reader.readexactly(4))[0]
                frame = await reader.readexactly(size)
                key, ver, corr = peek_api(frame)
                api = APIS[key]
                flexible = api.request.is_flexible(ver)
                _hdr, pos = decode_request_header(frame, request_header_version(key, ver, flexible))
                req = api.request.decode(frame, ver, pos)
                self.requests.append(key)
                resp = await self._handle(key, ver, req)
                if resp is None:
                    continue
                out = bytearray(4)
                encode_response_header(out, corr, response_header_version(key, flexible))
                resp.encode_into(out, ver)
                _LEN.pack_into(out, 0, len(out) - 4)
                writer.write(out)
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    async def _handle(self, key: int, ver: int, req: Any) -> Any:
        R: Any = APIS[key].response
        if key == 18:
            return R(
                error_code=0,
                api_keys=[
                    R.ApiVersion(api_key=k, min_version=0, max_version=v)
                    for k, v in self.offer.items()
                ],
            )
        if key == 3:
            parts = [
                R.MetadataResponseTopic.MetadataResponsePartition(
                    error_code=0, partition_index=i, leader_id=1, replica_nodes=[1], isr_nodes=[1]
                )
                for i in range(self.partitions)
            ]
            names = [t.name for t in req.topics] if req.topics else ["t"]
            return R(
                brokers=[R.MetadataResponseBroker(node_id=1, host="127.0.0.1", port=self.port)],
                cluster_id="fake",
                controller_id=1,
                topics=[
                    R.MetadataResponseTopic(error_code=0, name=n, partitions=parts) for n in names
                ],
            )
        scripted = self.api_errors.get(key)
        forced = scripted.pop(0) if scripted else 0
        if key == 22:
            if forced:
                return R(error_code=forced, producer_id=-1, producer_epoch=-1)
            tid = req.transactional_id
            if tid is None:
                return R(error_code=0, producer_id=4242, producer_epoch=0)
            pid, epoch = self.txn_ids.get(tid, (5000 + len(self.txn_ids), -1))
            self.txn_ids[tid] = (pid, epoch + 1)
            self._end(False)  # an open transaction of the old epoch is aborted
            return R(error_code=0, producer_id=pid, producer_epoch=epoch + 1)
        if key == 10:
            if ver >= 4:
                c = R.Coordinator(
                    key=req.coordinator_keys[0],
                    node_id=1,
                    host="127.0.0.1",
                    port=self.port,
                    error_code=forced,
                )
                return R(coordinators=[c])
            return R(error_code=forced, node_id=1, host="127.0.0.1", port=self.port)
        if key == 24:
            code = forced or self._fenced(
                req.v3_and_below_transactional_id,
                req.v3_and_below_producer_id,
                req.v3_and_below_producer_epoch,
            )
            if not code:
                for t in req.v3_and_below_topics:
                    self.txn_partitions.update((t.name, p) for p in t.partitions)
            return R(
                results_by_topic_v3_and_below=[
                    R.AddPartitionsToTxnTopicResult(
                        name=t.name,
                        results_by_partition=[
                            R.AddPartitionsToTxnTopicResult.AddPartitionsToTxnPartitionResult(
                                partition_index=p, partition_error_code=code
                            )
                            for p in t.partitions
                        ],
                    )
                    for t in req.v3_and_below_topics
                ]
            )
        if key == 25:
            code = forced or self._fenced(req.transactional_id, req.producer_id, req.producer_epoch)
            if not code:
                self.txn_groups.add(req.group_id)
            return R(error_code=code)
        if key == 28:
            self.txn_offset_commits.append(req)
            code = forced
            if not code and req.group_id not in self.txn_groups:
                self.violations.append("TxnOffsetCommit before AddOffsetsToTxn")
            if not code:
                for t in req.topics:
                    for p in t.partitions:
                        self.pending_offsets[(req.group_id, t.name, p.partition_index)] = (
                            p.committed_offset
                        )
            return R(
                topics=[
                    R.TxnOffsetCommitResponseTopic(
                        name=t.name,
                        partitions=[
                            R.TxnOffsetCommitResponseTopic.TxnOffsetCommitResponsePartition(
                                partition_index=p.partition_index, error_code=code
                            )
                            for p in t.partitions
                        ],
                    )
                    for t in req.topics
                ]
            )
        if key == 65:
            states = []
            for tid in req.transactional_ids:
                pid, epoch = self.txn_ids.get(tid, (-1, -1))
                ongoing = bool(self.txn_partitions) and pid >= 0
                states.append(
                    R.TransactionState(
                        error_code=0 if pid >= 0 else 105,  # TRANSACTIONAL_ID_NOT_FOUND
                        transactional_id=tid,
                        transaction_state="Ongoing" if ongoing else "Empty",
                        transaction_timeout_ms=60000,
                        transaction_start_time_ms=1 if ongoing else -1,
                        producer_id=pid,
                        producer_epoch=epoch,
                        topics=[
                            R.TransactionState.TopicData(topic=t, partitions=[p])
                            for t, p in sorted(self.txn_partitions)
                        ],
                    )
                )
            return R(transaction_states=states)
        if key == 66:
            rows = [
                R.TransactionState(transactional_id=tid, producer_id=pid, transaction_state="Empty")
                for tid, (pid, _) in sorted(self.txn_ids.items())
                if not req.producer_id_filters or pid in req.producer_id_filters
            ]
            return R(error_code=0, unknown_state_filters=[], transaction_states=rows)
        if key == 61:
            P = R.TopicResponse.PartitionResponse
            return R(
                topics=[
                    R.TopicResponse(
                        name=t.name,
                        partitions=[
                            P(
                                partition_index=i,
                                error_code=0,
                                active_producers=[
                                    P.ProducerState(
                                        producer_id=77,
                                        producer_epoch=3,
                                        last_sequence=9,
                                        last_timestamp=1000,
                                        coordinator_epoch=2,
                                        current_txn_start_offset=40,
                                    )
                                ],
                            )
                            for i in t.partition_indexes
                        ],
                    )
                    for t in req.topics
                ]
            )
        if key == 27:
            self.markers.extend(req.markers)
            M = R.WritableTxnMarkerResult
            return R(
                markers=[
                    M(
                        producer_id=m.producer_id,
                        topics=[
                            M.WritableTxnMarkerTopicResult(
                                name=t.name,
                                partitions=[
                                    M.WritableTxnMarkerTopicResult.WritableTxnMarkerPartitionResult(
                                        partition_index=p, error_code=forced
                                    )
                                    for p in t.partition_indexes
                                ],
                            )
                            for t in m.topics
                        ],
                    )
                    for m in req.markers
                ]
            )
        if key == 26:
            code = forced or self._fenced(req.transactional_id, req.producer_id, req.producer_epoch)
            if not code:
                self.end_txns.append(req.committed)
                self._end(req.committed)
            return R(error_code=code)
        if key == 0:
            if self.produce_delay:
                await asyncio.sleep(self.produce_delay)
            code = self.produce_errors.pop(0) if self.produce_errors else 0
            out = []
            for t in req.topic_data:
                prs = []
                for p in t.partition_data:
                    base = -1
                    pcode = code
                    if code == 0:
                        batches = list(iter_batches(p.records))
                        b0 = batches[0]
                        if b0.is_transactional:
                            pcode = self._check_txn_batch(req.transactional_id, t.name, p.index, b0)
                        if b0.producer_id >= 0 and not pcode:
                            # sequences per producer id and epoch (a new epoch starts at 0)
                            seq_key = (b0.producer_id, b0.producer_epoch, p.index)
                            expected = self.next_seq.get(seq_key, 0)
                            if b0.base_sequence > expected:
                                pcode = 45  # OUT_OF_ORDER_SEQUENCE_NUMBER
                            elif b0.base_sequence < expected:
                                pcode = 46  # DUPLICATE_SEQUENCE_NUMBER
                            else:
                                self.next_seq[seq_key] = expected + sum(len(b) for b in batches)
                    if pcode == 0:
                        log = self.log.setdefault(p.index, [])
                        base = len(log)
                        for b in iter_batches(p.records):
                            self.batches.append((p.index, b))
                            log.extend((r.key, r.value) for r in b.records)
                            if b.is_transactional:
                                self.txn_log.setdefault(p.index, []).extend(
                                    (r.value, False) for r in b.records
                                )
                    prs.append(
                        R.TopicProduceResponse.PartitionProduceResponse(
                            index=p.index, error_code=pcode, base_offset=base
                        )
                    )
                out.append(R.TopicProduceResponse(name=t.name, partition_responses=prs))
            if req.acks == 0:
                return None
            return R(responses=out)
        raise AssertionError(f"unexpected API {key}")

    def _fenced(self, tid: str, pid: int, epoch: int) -> int:
        known = self.txn_ids.get(tid)
        if known is None or known[0] != pid:
            return 49  # INVALID_PRODUCER_ID_MAPPING
        return 90 if epoch < known[1] else 0  # PRODUCER_FENCED

    def _check_txn_batch(self, tid: str | None, topic: str, partition: int, batch: Any) -> int:
        if tid is None or self.txn_ids.get(tid, (-1, -1))[0] != batch.producer_id:
            self.violations.append(f"transactional batch without its transactional id ({tid})")
            return 49
        if batch.producer_epoch < self.txn_ids[tid][1]:
            return 47  # INVALID_PRODUCER_EPOCH
        if (topic, partition) not in self.txn_partitions:
            self.violations.append(f"batch for {topic}-{partition} before AddPartitionsToTxn")
            return 48  # INVALID_TXN_STATE
        return 0

    def _end(self, commit: bool) -> None:
        """Write the markers: the open transaction's records become committed (or stay out)."""
        for part, entries in self.txn_log.items():
            self.txn_log[part] = [(v, True) if not done else (v, done) for v, done in entries]
            if not commit:
                self.txn_log[part] = [e for e in entries if e[1]]
        if commit:
            self.committed_offsets.update(self.pending_offsets)
        self.pending_offsets.clear()
        self.txn_partitions.clear()
        self.txn_groups.clear()
