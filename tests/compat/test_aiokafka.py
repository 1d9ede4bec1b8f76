"""aiokafka against kafkalite: produce and consume with every codec, headers, null keys/values and
a long-polling consumer woken by new data."""

from __future__ import annotations

import asyncio

import pytest

aiokafka = pytest.importorskip("aiokafka")
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition  # noqa: E402

pytestmark = pytest.mark.compat


async def _consume(bs: str, topic: str, count: int, timeout: float = 30) -> list:
    c = AIOKafkaConsumer(
        bootstrap_servers=bs, auto_offset_reset="earliest", enable_auto_commit=False
    )
    await c.start()
    try:
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        await c.seek_to_beginning(tp)
        out: list = []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while len(out) < count and loop.time() < deadline:
            batch = await c.getmany(timeout_ms=500)
            for msgs in batch.values():
                out.extend(msgs)
        return out
    finally:
        await c.stop()


ALSO_ON_CLUSTER = True  # every test here runs on one broker and on an RF=3 cluster


@pytest.mark.parametrize("codec", [None, "gzip", "snappy", "lz4", "zstd"])
def test_roundtrip_every_codec(broker, topic, codec):
    async def main() -> None:
        p = AIOKafkaProducer(
            bootstrap_servers=broker.bootstrap_servers, compression_type=codec, linger_ms=5
        )
        await p.start()
        records = [
            (b"k", b"v", [("h", b"1")]),
            (None, b"nokey", []),
            (b"", b"", []),
            (b"del", None, []),
        ]
        records += [(b"%d" % i, b"y" * i, []) for i in range(100)]
        try:
            futs = [await p.send(topic, value=v, key=k, headers=h) for k, v, h in records]
            metas = [await f for f in futs]
        finally:
            await p.stop()
        assert [m.offset for m in metas] == list(range(len(records)))
        got = await _consume(broker.bootstrap_servers, topic, len(records))
        assert [(m.key, m.value) for m in got] == [(k, v) for k, v, _ in records]
        assert list(got[0].headers) == [("h", b"1")]

    asyncio.run(main())


def test_long_poll_is_woken_by_produce(broker, topic):
    async def main() -> None:
        # acks=all: on a cluster "first" must be below the high watermark before seek_to_end
        p = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers, acks="all")
        await p.start()
        await p.send_and_wait(topic, b"first")
        c = AIOKafkaConsumer(
            bootstrap_servers=broker.bootstrap_servers,
            fetch_max_wait_ms=5000,
            enable_auto_commit=False,
        )
        await c.start()
        try:
            tp = TopicPartition(topic, 0)
            c.assign([tp])
            await c.seek_to_end(tp)
            loop = asyncio.get_running_loop()
            t0 = loop.time()
            getter = asyncio.ensure_future(c.getone())
            await asyncio.sleep(0.3)
            await p.send_and_wait(topic, b"second")
            msg = await asyncio.wait_for(getter, 10)
            assert msg.value == b"second"
            assert loop.time() - t0 < 4.5  # woken by the append, not by max wait
        finally:
            await c.stop()
            await p.stop()

    asyncio.run(main())
