"""Incremental fetch sessions (KIP-227) over the wire: open with epoch 0, send only changes, get only changes,
forget partitions, epoch checks, closing with epoch -1; and a real client (kafka-python) using them."""

from __future__ import annotations

import pytest

from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.schema import APIS
from kafkalite.records.batch import build_batch

F = APIS[1].request
P = APIS[0].request


def produce(c, topic, partition, value):  # type: ignore[no-untyped-def]
    td = P.TopicProduceData(
        name=topic,
        partition_data=[
            P.TopicProduceData.PartitionProduceData(
                index=partition, records=build_batch([(None, value)])
            )
        ],
    )
    assert (
        c.send(P(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[td]))
        .responses[0]
        .partition_responses[0]
        .error_code
        == 0
    )


def fetch(c, session_id, epoch, parts, forgotten=()):  # type: ignore[no-untyped-def]
    topics = {}
    for topic, p, off in parts:
        topics.setdefault(topic, []).append(
            F.FetchTopic.FetchPartition(partition=p, fetch_offset=off, partition_max_bytes=1 << 20)
        )
    req = F(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=1 << 20,
        session_id=session_id,
        session_epoch=epoch,
        topics=[F.FetchTopic(topic=t, partitions=ps) for t, ps in topics.items()],
        forgotten_topics_data=[
            F.ForgottenTopic(topic=t, partitions=list(ps)) for t, ps in forgotten
        ],
    )
    resp = c.send(req, version=12)
    got = {(t.topic, p.partition_index): p for t in resp.responses for p in t.partitions}
    return resp, got


def test_session_lifecycle(broker, client, topic):
    broker.create_topic(topic, 3)
    for p in range(3):
        produce(client, topic, p, b"first")
    resp, got = fetch(client, 0, 0, [(topic, p, 0) for p in range(3)])
    assert resp.error_code == 0 and resp.session_id != 0
    sid = resp.session_id
    assert sorted(got) == [(topic, 0), (topic, 1), (topic, 2)]
    # incremental, positions advanced by the client, nothing new: no partitions in the answer
    resp, got = fetch(client, sid, 1, [(topic, p, 1) for p in range(3)])
    assert (resp.error_code, resp.session_id, got) == (0, sid, {})
    # new data in partition 1 only: only partition 1 comes back, with its records
    produce(client, topic, 1, b"second")
    resp, got = fetch(client, sid, 2, [])
    assert (
        list(got) == [(topic, 1)]
        and got[(topic, 1)].records
        and got[(topic, 1)].high_watermark == 2
    )
    # forget partition 1, new data there is no longer reported
    resp, got = fetch(client, sid, 3, [(topic, 1, 2)], forgotten=[(topic, [1])])
    produce(client, topic, 1, b"third")
    resp, got = fetch(client, sid, 4, [])
    assert got == {}
    # wrong epoch, unknown session
    resp, _ = fetch(client, sid, 9, [])
    assert resp.error_code == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    resp, _ = fetch(client, 424242, 1, [])
    assert resp.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    # close it: a full sessionless fetch, and the id is gone
    resp, got = fetch(client, sid, -1, [(topic, 0, 0)])
    assert resp.session_id == 0 and list(got) == [(topic, 0)]
    resp, _ = fetch(client, sid, 5, [])
    assert resp.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def test_session_cache_is_bounded(tmp_path):
    from kafkalite.cli.wire import WireClient
    from kafkalite.testing import Broker

    with (
        Broker(tmp_path, max_incremental_fetch_session_cache_slots=2) as b,
        WireClient(b.bootstrap_servers) as c,
    ):
        b.create_topic("s", 1)
        ids = [fetch(c, 0, 0, [("s", 0, 0)])[0].session_id for _ in range(3)]
        assert len(set(ids)) == 3 and len(b.server.fetch_sessions) == 2
        assert (
            fetch(c, ids[0], 1, [])[0].error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        )  # evicted
        assert fetch(c, ids[2], 1, [])[0].error_code == 0


def test_kafka_python_consumer_uses_sessions(broker, topic):
    kafka = pytest.importorskip("kafka")
    broker.create_topic(topic, 2)
    p = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
    for i in range(50):
        p.send(topic, value=b"%d" % i, partition=i % 2)
    p.flush(30)
    p.close()
    before = dict(broker.server.fetch_sessions.sessions)
    c = kafka.KafkaConsumer(
        bootstrap_servers=broker.bootstrap_servers,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=2000,
    )
    c.assign([kafka.TopicPartition(topic, 0), kafka.TopicPartition(topic, 1)])
    values = sorted(int(m.value) for m in c)
    c.close()
    assert values == list(range(50))
    new = [s for sid, s in broker.server.fetch_sessions.sessions.items() if sid not in before]
    assert new and max(s.epoch for s in new) > 2  # the client went on with incremental fetches
