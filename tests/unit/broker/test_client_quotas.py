"""Client quotas on the wire: throttle_time_ms in answers and the connection muted that long (KIP-219),
old request versions answered late instead, request-time quotas, follower-free fetch caps, the quota
APIs behind the authorizer, and quotas kept across a restart."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

from test_produce_fetch import produce

from kafkalite.cli.wire import WireClient
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.schema import APIS
from kafkalite.records.batch import build_batch
from kafkalite.testing import Broker

DESCRIBE: Any = APIS[48].request
ALTER: Any = APIS[49].request
API_VERSIONS: Any = APIS[18].request
_E = ALTER.EntryData


def set_quota(c: WireClient, entity: list[tuple[str, str | None]], **ops: float | None) -> Any:
    entry = _E(
        entity=[_E.EntityData(entity_type=t, entity_name=n) for t, n in entity],
        ops=[_E.OpData(key=k, value=v or 0.0, remove=v is None) for k, v in ops.items()],
    )
    (result,) = c.send(ALTER(entries=[entry], validate_only=False)).entries
    return result


def described(c: WireClient) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
    resp = c.send(DESCRIBE(components=[], strict=False))
    assert resp.error_code == 0, resp.error_message
    return {
        tuple((e.entity_type, e.entity_name) for e in entry.entity): {
            v.key: v.value for v in entry.values
        }
        for entry in resp.entries
    }


def blob(size: int) -> bytes:
    return build_batch([(None, b"x" * size)], base_offset=0)


def test_produce_over_quota_is_throttled_and_the_connection_muted(
    broker: Broker, client: WireClient, topic: str
) -> None:
    cid = f"q-{uuid.uuid4().hex[:6]}"
    assert set_quota(client, [("client-id", cid)], producer_byte_rate=100_000).error_code == 0
    with WireClient(broker.bootstrap_servers, timeout=10, client_id=cid) as c:
        first = produce(c, topic, blob(60_000))
        assert first.error_code == 0  # within one window's allowance
        resp = c.send(
            APIS[0].request(
                transactional_id=None,
                acks=1,
                timeout_ms=5000,
                topic_data=[
                    APIS[0].request.TopicProduceData(
                        name=topic,
                        partition_data=[
                            APIS[0].request.TopicProduceData.PartitionProduceData(
                                index=0, records=blob(60_000)
                            )
                        ],
                    )
                ],
            ),
            version=9,
        )
        # the write is done (Kafka throttles after the fact) and the client is told to back off
        assert resp.responses[0].partition_responses[0].error_code == 0
        throttle = resp.throttle_time_ms
        assert 800 <= throttle <= 1300  # 120 kB at 100 kB/s since the window began
        t0 = time.monotonic()
        c.send(API_VERSIONS(client_software_name="t", client_software_version="1"), version=3)
        assert time.monotonic() - t0 >= throttle / 1000 * 0.8  # muted: nothing read meanwhile
    # another client id is not affected
    with WireClient(broker.bootstrap_servers, timeout=10, client_id="other") as c:
        assert produce(c, topic, blob(200_000), version=9).error_code == 0
        resp = c.send(API_VERSIONS(client_software_name="t", client_software_version="1"))
        assert resp.throttle_time_ms == 0
    assert set_quota(client, [("client-id", cid)], producer_byte_rate=None).error_code == 0


def test_old_versions_get_their_answer_late(broker: Broker, client: WireClient, topic: str) -> None:
    cid = f"old-{uuid.uuid4().hex[:6]}"
    assert set_quota(client, [("client-id", cid)], producer_byte_rate=100_000).error_code == 0
    with WireClient(broker.bootstrap_servers, timeout=10, client_id=cid) as c:
        produce(c, topic, blob(60_000), version=2)
        t0 = time.monotonic()
        part = produce(c, topic, blob(60_000), version=2)  # v2 predates KIP-219
        assert part.error_code == 0
        assert time.monotonic() - t0 >= 0.4  # the answer itself waited out the throttle


def test_fetch_is_capped_and_throttled(broker: Broker, client: WireClient, topic: str) -> None:
    for _ in range(4):
        assert produce(client, topic, blob(50_000)).error_code == 0
    cid = f"f-{uuid.uuid4().hex[:6]}"
    assert set_quota(client, [("client-id", cid)], consumer_byte_rate=60_000).error_code == 0
    with WireClient(broker.bootstrap_servers, timeout=10, client_id=cid) as c:
        sizes, throttles = [], []
        for offset in (0, 1):
            resp = _fetch_v11(c, topic, offset)
            sizes.append(len(resp.responses[0].partitions[0].records))
            throttles.append(resp.throttle_time_ms)
    # one window's allowance (60 kB) per answer, at least one batch: never all four batches
    assert all(50_000 < n < 120_000 for n in sizes)
    assert throttles[0] == 0  # within the allowance
    assert 1400 <= throttles[1] <= 1800  # 100 kB at 60 kB/s: due 1.67 s after the window began


def _fetch_v11(c: WireClient, topic: str, offset: int) -> Any:
    return c.send(
        APIS[1].request(
            replica_id=-1,
            max_wait_ms=0,
            min_bytes=1,
            max_bytes=10 << 20,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=[
                APIS[1].request.FetchTopic(
                    topic=topic,
                    topic_id=uuid.UUID(int=0),
                    partitions=[
                        APIS[1].request.FetchTopic.FetchPartition(
                            partition=0, fetch_offset=offset, partition_max_bytes=10 << 20
                        )
                    ],
                )
            ],
            forgotten_topics_data=[],
            rack_id="",
        ),
        version=11,
    )


def test_request_time_quota(broker: Broker, client: WireClient) -> None:
    cid = f"r-{uuid.uuid4().hex[:6]}"
    assert set_quota(client, [("client-id", cid)], request_percentage=0.01).error_code == 0
    with WireClient(broker.bootstrap_servers, timeout=10, client_id=cid) as c:
        # each throttled answer mutes the connection for up to a window (1 s): stop after three of them
        throttles: list[int] = []
        while len(throttles) < 20 and sum(t > 0 for t in throttles) < 3:
            throttles.append(c.send(DESCRIBE(components=[], strict=False)).throttle_time_ms)
    assert sum(t > 0 for t in throttles) == 3, throttles
    assert max(throttles) <= 1000  # a request-time throttle is capped at one window


def test_quota_apis_need_the_cluster_permissions(tmp_path: Path) -> None:
    config = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"}
    with Broker(tmp_path, config=config) as b, WireClient(b.bootstrap_servers) as c:
        result = set_quota(c, [("user", "mallory")], producer_byte_rate=1.0)
        assert result.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        resp = c.send(DESCRIBE(components=[], strict=False))
        assert resp.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        assert b.server.client_quotas.entities() == {}


def test_quotas_survive_a_restart(tmp_path: Path) -> None:
    with Broker(tmp_path) as b, WireClient(b.bootstrap_servers) as c:
        assert (
            set_quota(c, [("user", None), ("client-id", "app")], consumer_byte_rate=5e6).error_code
            == 0
        )
        assert set_quota(c, [("client-id", None)], request_percentage=50.0).error_code == 0
        before = described(c)
    with Broker(tmp_path) as b, WireClient(b.bootstrap_servers) as c:
        assert described(c) == before
        assert b.server.client_quotas.active
