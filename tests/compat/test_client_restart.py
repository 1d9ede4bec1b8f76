"""The kafkalite client across a broker restart (kafkalite subprocess on a fixed port): the producer
reconnects and retries so every send is acknowledged once, and a consumer resumes where it was."""

from __future__ import annotations

import signal
import threading
import time

import pytest

from kafkalite.client import KafkaAdminClient, KafkaConsumer, KafkaProducer, NewTopic

pytestmark = [pytest.mark.compat, pytest.mark.slow, pytest.mark.timeout(60)]


def test_producer_and_consumer_survive_restart(spawn_broker, port, tmp_path) -> None:
    b = spawn_broker(tmp_path / "data", port).start()
    bs = b.bootstrap_servers
    with KafkaAdminClient(bootstrap_servers=bs) as admin:
        admin.create_topics([NewTopic("r", 2, 1)])
    p = KafkaProducer(
        bootstrap_servers=bs,
        acks="all",
        linger_ms=2,
        retry_backoff_ms=50,
        reconnect_backoff_ms=50,
        reconnect_backoff_max_ms=500,
        request_timeout_ms=5000,
        delivery_timeout_ms=60000,
        max_in_flight_requests_per_connection=1,
    )
    c = KafkaConsumer(
        "r",
        bootstrap_servers=bs,
        group_id="rg",
        auto_offset_reset="earliest",
        session_timeout_ms=6000,
        heartbeat_interval_ms=300,
        reconnect_backoff_max_ms=500,
        request_timeout_ms=5000,
    )
    futs = []
    seen: list[bytes] = []
    stop = threading.Event()

    def consume() -> None:
        while not stop.is_set():
            try:
                for recs in c.poll(200).values():
                    seen.extend(r.value for r in recs)
            except Exception:
                time.sleep(0.1)

    t = threading.Thread(target=consume, daemon=True)
    t.start()
    try:
        for i in range(300):
            futs.append(p.send("r", b"%d" % i, partition=i % 2))
            time.sleep(0.002)
            if i == 150:
                p.flush(30)
                b.stop(signal.SIGTERM)
                b.start()
        p.flush(60)
        metas = [f.get(1) for f in futs]
        assert all(m.offset >= 0 for m in metas)
        for part in (0, 1):
            offs = sorted(m.offset for m in metas if m.partition == part)
            assert offs == list(range(150))  # each record exactly once, in order
        deadline = time.monotonic() + 45
        while len(set(seen)) < 300 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert set(seen) == {b"%d" % i for i in range(300)}
    finally:
        stop.set()
        t.join(20)
        c.close()
        p.close()
