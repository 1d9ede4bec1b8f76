"""An OSError inside any request handler (EMFILE, EIO, ENOSPC injected into storage) answers that request
with KAFKA_STORAGE_ERROR on every entry, logs one WARNING, and the same connection serves the next request.
"""

from __future__ import annotations

import errno
import logging
import uuid
from pathlib import Path
from typing import Any

import pytest

from kafkalite.broker import storage_errors
from kafkalite.broker.network.connection import CloseConnection
from kafkalite.broker.storage_errors import storage_error_answer
from kafkalite.cli.wire import WireClient
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.schema import APIS
from kafkalite.storage.log import Log
from kafkalite.testing import Broker

STORAGE = ErrorCode.KAFKA_STORAGE_ERROR


@pytest.fixture(autouse=True)
def fresh_log_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(storage_errors, "_limit", storage_errors._RateLimit())


def fail(exc: OSError) -> Any:
    def raiser(*args: Any, **kwargs: Any) -> Any:
        raise exc

    return raiser


def test_offset_for_leader_epoch_emfile_answers_every_partition(
    broker: Broker, client: WireClient, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    topic = f"oe-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic, 3)
    monkeypatch.setattr(
        Log, "end_offset_for_epoch", fail(OSError(errno.EMFILE, "Too many open files"))
    )
    cls: Any = APIS[23].request
    req = cls(
        replica_id=-1,
        topics=[
            cls.OffsetForLeaderTopic(
                topic=topic,
                partitions=[
                    cls.OffsetForLeaderTopic.OffsetForLeaderPartition(
                        partition=i, current_leader_epoch=-1, leader_epoch=0
                    )
                    for i in range(3)
                ],
            )
        ],
    )
    caplog.set_level(logging.WARNING, "kafkalite.broker.storage_errors")
    for _ in range(3):  # repeated failures: answered each time, logged once
        resp = client.send(req)
        [t] = resp.topics
        assert t.topic == topic
        assert [(p.partition, p.error_code, p.end_offset) for p in t.partitions] == [
            (i, STORAGE, -1) for i in range(3)
        ]
    lines = [r.getMessage() for r in caplog.records if r.name == "kafkalite.broker.storage_errors"]
    assert len(lines) == 1, lines
    assert "OffsetForLeaderEpoch" in lines[0] and "EMFILE" in lines[0]
    assert "client id 'kafkalite-cli'" in lines[0] and "answered KAFKA_STORAGE_ERROR" in lines[0]
    # the same socket serves on
    assert client.metadata([topic]).topics[0].error_code == 0
    monkeypatch.undo()
    ok = client.send(req).topics[0].partitions
    assert [p.error_code for p in ok] == [0, 0, 0]


def test_describe_producers_eio_names_the_file(
    broker: Broker, client: WireClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = f"dp-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic, 2)
    eio = OSError(errno.EIO, "Input/output error", f"/data/{topic}-0/00000000000000000000.snapshot")
    monkeypatch.setattr(Log, "producer_state", property(fail(eio)))
    cls: Any = APIS[61].request
    req = cls(topics=[cls.TopicRequest(name=topic, partition_indexes=[0, 1])])
    [t] = client.send(req).topics
    assert [(p.partition_index, p.error_code) for p in t.partitions] == [(0, STORAGE), (1, STORAGE)]
    message = t.partitions[0].error_message
    assert "EIO" in message and "00000000000000000000.snapshot" in message
    # ApiVersions on the same connection
    assert (
        client.send(
            APIS[18].request(client_software_name="t", client_software_version="1")
        ).error_code
        == 0
    )


def test_hot_path_produce_fsync_eio_answers_each_partition(
    broker: Broker, client: WireClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Produce v9 is decoded by the hot-path codec; the fsync of a flush.messages=1 topic runs
    outside the per-partition catch, so the answer comes from the declaration's view of the frame."""
    from kafkalite.records.builder import build_batch

    topic = f"fs-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic, 2, flush_messages=1)
    monkeypatch.setattr(Log, "flush", fail(OSError(errno.EIO, "Input/output error")))
    prod: Any = APIS[0].request
    data = prod.TopicProduceData
    for acks in (1, -1):  # the flush comes before any wait for replicas: both answer now
        req = prod(
            transactional_id=None,
            acks=acks,
            timeout_ms=5000,
            topic_data=[
                data(
                    name=topic,
                    partition_data=[
                        data.PartitionProduceData(index=i, records=build_batch([(None, b"v")]))
                        for i in (0, 1)
                    ],
                )
            ],
        )
        [t] = client.send(req, version=9).responses
        assert t.name == topic
        got = [(p.index, p.error_code) for p in t.partition_responses]
        assert got == [(0, STORAGE), (1, STORAGE)], acks
    assert client.metadata([topic]).topics[0].error_code == 0


def test_acks0_produce_answers_nothing_and_unanswerable_apis_close(
    caplog: pytest.LogCaptureFixture,
) -> None:
    produce: Any = APIS[0].request
    req = produce(acks=0, timeout_ms=1000, topic_data=[])
    exc = OSError(errno.ENOSPC, "No space left on device", "/data/t-0/00000000000000000000.log")
    with caplog.at_level(logging.WARNING, "kafkalite.broker.storage_errors"):
        assert storage_error_answer(APIS[0], 2, req, "1.2.3.4:5", "p", exc) is None
    assert "acks=0" in caplog.text and "ENOSPC" in caplog.text
    # a timeout is an OSError in Python but not storage: REQUEST_TIMED_OUT, as Kafka answers it
    dg: Any = APIS[15].request
    resp = storage_error_answer(APIS[15], 5, dg(groups=["g"]), "p", None, TimeoutError())
    assert resp.groups[0].error_code == ErrorCode.REQUEST_TIMED_OUT
    # the log is rate-limited per (API, errno); the next line says how many it left out
    limit = storage_errors._RateLimit()
    assert limit.allow((3, 5)) == 0
    assert limit.allow((3, 5)) is None and limit.allow((3, 5)) is None
    assert limit.allow((3, 24)) == 0  # another errno is its own line
    limit.last[(3, 5)] -= storage_errors.LOG_EVERY_S
    assert limit.allow((3, 5)) == 2
    # AlterUserScramCredentials answers per user, which the request names in two lists: the
    # generic answer cannot say which entry failed, so the connection closes as before
    scram: Any = APIS[51].request
    with pytest.raises(CloseConnection):
        storage_error_answer(APIS[51], 0, scram(deletions=[], upsertions=[]), "p", None, exc)


def test_without_the_handler_catch_the_connection_would_drop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the broker did before: prove the failure path this file tests is the real one (an
    OSError escaping the handler) by letting it escape past storage_error_answer."""
    from kafkalite.broker.network import request_handler as server_mod

    def reraise(api: Any, version: int, request: Any, peer: str, cid: Any, exc: OSError) -> Any:
        raise exc

    monkeypatch.setattr(server_mod, "storage_error_answer", reraise)
    with Broker(tmp_path) as b:
        b.create_topic("gone", 1)
        monkeypatch.setattr(Log, "end_offset_for_epoch", fail(OSError(errno.EIO, "I/O error")))
        cls: Any = APIS[23].request
        part = cls.OffsetForLeaderTopic.OffsetForLeaderPartition(partition=0, leader_epoch=0)
        req = cls(replica_id=-1, topics=[cls.OffsetForLeaderTopic(topic="gone", partitions=[part])])
        with WireClient(b.bootstrap_servers, timeout=10) as wc, pytest.raises(Exception) as err:
            wc.send(req)
        assert "closed the connection" in str(err.value)


@pytest.mark.compat
def test_confluent_admin_sees_storage_error_not_a_dropped_connection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real client nobody here wrote: confluent-kafka's AdminClient altering a topic's config while
    the metadata file cannot be written (ENOSPC) gets KAFKA_STORAGE_ERROR, and its next call works."""
    ck = pytest.importorskip("confluent_kafka")
    admin_mod = pytest.importorskip("confluent_kafka.admin")
    from kafkalite.cluster import metadata

    with Broker(tmp_path) as b:
        b.create_topic("full", 1)
        admin = admin_mod.AdminClient({"bootstrap.servers": b.bootstrap_servers})
        assert "full" in admin.list_topics(timeout=10).topics
        enospc = OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "topics.json"))
        monkeypatch.setattr(metadata, "_atomic_write", fail(enospc))
        resource = admin_mod.ConfigResource(
            admin_mod.ResourceType.TOPIC,
            "full",
            incremental_configs=[
                admin_mod.ConfigEntry(
                    "retention.ms", "1000", incremental_operation=admin_mod.AlterConfigOpType.SET
                )
            ],
        )
        fut = admin.incremental_alter_configs([resource], request_timeout=10)[resource]
        with pytest.raises(ck.KafkaException) as err:
            fut.result(15)
        kerr = err.value.args[0]
        assert kerr.code() == ck.KafkaError.KAFKA_STORAGE_ERROR, kerr
        assert "ENOSPC" in kerr.str()
        monkeypatch.undo()
        assert "full" in admin.list_topics(timeout=10).topics
