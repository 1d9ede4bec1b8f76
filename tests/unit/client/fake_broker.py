"""A scripted in-process Kafka broker for client unit tests: ApiVersions, Metadata, Produce (with
injected per-request errors), InitProducerId on demand; it records what it received."""

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
        self, partitions: int = 2, *, init_producer_id: bool = False, max_produce: int = 9
    ):
        self.partitions = partitions
        self.offer = {18: 3, 3: 9, 0: max_produce}
        if init_producer_id:
            self.offer[22] = 4
        self.produce_errors: list[int] = []  # error code for each following Produce request
        self.produce_delay = 0.0
        self.log: dict[int, list[tuple[bytes | None, bytes | None]]] = {}
        self.batches: list[Any] = []
        self.requests: list[int] = []
        self.next_seq: dict[int, int] = {}
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
        if key == 22:
            return R(error_code=0, producer_id=4242, producer_epoch=0)
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
                        if b0.producer_id >= 0:
                            expected = self.next_seq.get(p.index, 0)
                            if b0.base_sequence > expected:
                                pcode = 45  # OUT_OF_ORDER_SEQUENCE_NUMBER
                            elif b0.base_sequence < expected:
                                pcode = 46  # DUPLICATE_SEQUENCE_NUMBER
                            else:
                                self.next_seq[p.index] = expected + sum(len(b) for b in batches)
                    if pcode == 0:
                        log = self.log.setdefault(p.index, [])
                        base = len(log)
                        for b in iter_batches(p.records):
                            self.batches.append((p.index, b))
                            log.extend((r.key, r.value) for r in b.records)
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
