"""KIP-405 tiered storage against confluent-kafka: a topic with remote.storage.enable and a small local
retention is archived to a directory and deleted locally, and a consumer from offset 0 reads every record in
order, served from the remote tier below the local log start, before and after a broker restart."""

from __future__ import annotations

import re
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from kafkalite.storage.remote import LocalTieredStorage
from kafkalite.testing import Broker

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec  # noqa: E402

pytestmark = [pytest.mark.compat]

TOPIC = "archived"
N = 3000
SEGMENT = 256 * 1024


def _props(tmp: Path) -> dict[str, str]:
    return {
        "remote.log.storage.system.enable": "true",
        "remote.log.storage.manager.class.name": (
            "org.apache.kafka.server.log.remote.storage.LocalTieredStorage"
        ),
        "rsm.config.dir": str(tmp / "remote"),
        "rlmm.config.remote.log.metadata.topic.num.partitions": "1",
        "remote.log.manager.task.interval.ms": "100",
        "log.retention.check.interval.ms": "100",
        "num.partitions": "1",
    }


def _wait(cond: Callable[[], bool], what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _value(i: int) -> bytes:
    return f"{i:08d}".encode() * 128  # 1 KiB


def _read_all(bs: str, upto: int) -> list[tuple[int, bytes]]:
    c = Consumer(
        {"bootstrap.servers": bs, "group.id": "tiered", "enable.auto.commit": False,
         "fetch.max.bytes": 300_000, "max.partition.fetch.bytes": 200_000,
         "message.max.bytes": 300_000}
    )  # fmt: skip
    out: list[tuple[int, bytes]] = []
    try:
        c.assign([TopicPartition(TOPIC, 0, 0)])
        deadline = time.monotonic() + 60
        while len(out) < upto and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error() is not None:
                raise KafkaException(m.error())
            out.append((m.offset(), m.value()))
    finally:
        c.close()
    return out


def _list_offset(bs: str, spec: OffsetSpec) -> int:
    admin = AdminClient({"bootstrap.servers": bs})
    fut = admin.list_offsets({TopicPartition(TOPIC, 0): spec})
    return int(fut[TopicPartition(TOPIC, 0)].result(10).offset)


def test_archive_then_read_from_offset_zero_before_and_after_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with Broker(data, config={**_props(tmp_path), "http.listeners": "http://127.0.0.1:0"}) as b:
        bs = f"{b.host}:{b.port}"
        admin = AdminClient({"bootstrap.servers": bs})
        configs = {
            "remote.storage.enable": "true",
            "segment.bytes": str(SEGMENT),
            "local.retention.bytes": str(SEGMENT),
        }
        admin.create_topics([NewTopic(TOPIC, 1, 1, config=configs)])[TOPIC].result(10)
        p = Producer({"bootstrap.servers": bs, "acks": "all", "linger.ms": 5, "batch.size": 65536})
        for i in range(N):
            p.produce(TOPIC, value=_value(i), key=str(i).encode())
            if i % 200 == 0:
                p.poll(0)
        assert p.flush(30) == 0
        del p
        part = b.server.replica_manager.get_partition(TOPIC, 0)
        rlm = b.server.remote_log_manager
        # archived, then deleted locally: the local log starts well past 0
        _wait(lambda: part.log_start_offset > N // 2, "local segments to be archived and deleted")
        assert rlm.log_start_offset(part) == 0
        assert rlm.cache.highest_copied_offset(TOPIC, 0) >= part.log_start_offset - 1
        remote = LocalTieredStorage(tmp_path / "remote")
        copied = rlm.cache.copied_segments(TOPIC, 0)
        # every object in the store has metadata pointing at it, and the other way round
        assert len(remote.list_segments()) == len(copied) >= 5
        # ListOffsets EARLIEST (-2) is the remote log start (librdkafka does not send -4 / -5:
        # those are checked in tests/unit/cluster/test_remote_log_manager.py)
        assert _list_offset(bs, OffsetSpec.earliest()) == 0
        got = _read_all(bs, N)
        assert [o for o, _ in got] == list(range(N))
        assert all(v == _value(o) for o, v in got)
        assert rlm.stats.remote_fetch_bytes > 0
        # Kafka's metric names for the remote tier
        metrics = urllib.request.urlopen(b.http_url + "/metrics", timeout=10).read().decode()
        fetched = re.search(
            r"^kafka_server_brokertopicmetrics_remotefetchbytes_total (\S+)$", metrics, re.M
        )
        assert fetched is not None and float(fetched.group(1)) > 0
        assert f'kafka_server_brokertopicmetrics_remotelogsizebytes{{topic="{TOPIC}"}}' in metrics
    # after a restart the metadata is rebuilt from __remote_log_metadata
    with Broker(data, config=_props(tmp_path)) as b:
        bs = f"{b.host}:{b.port}"
        part = b.server.replica_manager.get_partition(TOPIC, 0)
        assert part.log_start_offset > N // 2
        assert b.server.remote_log_manager.log_start_offset(part) == 0
        got = _read_all(bs, N)
        assert [o for o, _ in got] == list(range(N))
        assert all(v == _value(o) for o, v in got)


def test_a_broker_without_tiered_storage_refuses_the_topic_config(tmp_path: Path) -> None:
    with Broker(tmp_path / "plain") as b:
        admin = AdminClient({"bootstrap.servers": f"{b.host}:{b.port}"})
        fut = admin.create_topics([NewTopic("t", 1, 1, config={"remote.storage.enable": "true"})])
        with pytest.raises(KafkaException) as info:
            fut["t"].result(10)
        err = info.value.args[0]
        assert err.name() == "INVALID_CONFIG"
        assert "Tiered Storage functionality is disabled in the broker" in err.str()


def test_read_committed_from_the_remote_tier_skips_aborted_transactions(tmp_path: Path) -> None:
    topic = "txn-archived"
    with Broker(tmp_path / "data", config=_props(tmp_path)) as b:
        bs = f"{b.host}:{b.port}"
        admin = AdminClient({"bootstrap.servers": bs})
        configs = {
            "remote.storage.enable": "true",
            "segment.bytes": str(64 * 1024),
            "local.retention.bytes": str(64 * 1024),
        }
        admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic].result(10)
        p = Producer({"bootstrap.servers": bs, "transactional.id": "tiered-tx", "linger.ms": 5})
        p.init_transactions(30)
        committed: list[bytes] = []
        for k in range(24):
            p.begin_transaction()
            values = [f"{k:03d}-{i:03d}".encode() * 150 for i in range(30)]
            for v in values:
                p.produce(topic, value=v)
            if k % 3 == 2:
                p.abort_transaction(30)
            else:
                p.commit_transaction(30)
                committed += values
        del p
        part = b.server.replica_manager.get_partition(topic, 0)
        # more than half of the log, with aborted transactions in it, is read from the remote tier
        _wait(lambda: part.log_start_offset > part.log_end_offset // 2, "archiving")
        c = Consumer(
            {"bootstrap.servers": bs, "group.id": "rc", "enable.auto.commit": False,
             "isolation.level": "read_committed"}
        )  # fmt: skip
        got: list[bytes] = []
        try:
            c.assign([TopicPartition(topic, 0, 0)])
            deadline = time.monotonic() + 60
            while len(got) < len(committed) and time.monotonic() < deadline:
                m = c.poll(0.5)
                if m is not None and m.error() is None:
                    got.append(m.value())
        finally:
            c.close()
        assert got == committed


def test_timestamp_lookup_and_delete_records_across_tiers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    topic = "cut"
    n = 1200
    data = tmp_path / "data"
    remote = LocalTieredStorage(tmp_path / "remote")
    tp = TopicPartition(topic, 0)
    props = {**_props(tmp_path), "http.listeners": "http://127.0.0.1:0"}
    with Broker(data, config=props) as b:
        bs = f"{b.host}:{b.port}"
        admin = AdminClient({"bootstrap.servers": bs})
        configs = {
            "remote.storage.enable": "true",
            "segment.bytes": str(64 * 1024),
            "local.retention.bytes": str(64 * 1024),
        }
        admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic].result(10)
        p = Producer({"bootstrap.servers": bs, "linger.ms": 5, "batch.size": 16384})
        t0 = int(time.time() * 1000) - 3_600_000
        for i in range(n):
            p.produce(topic, value=_value(i), timestamp=t0 + 10 * i)
        assert p.flush(30) == 0
        del p
        part = b.server.replica_manager.get_partition(topic, 0)
        rlm = b.server.remote_log_manager
        _wait(lambda: part.log_start_offset > n // 2, "archiving and local deletion")
        before = rlm.cache.copied_segments(topic, 0)
        # by timestamp across tiers: the remote time indexes answer below the local log start, to
        # the record (not the batch), and the local log above it
        local_start = part.log_start_offset
        for k in (0, 1, 7, before[1].start_offset + 5, local_start - 1, local_start + 3):
            assert _list_offset_of(bs, topic, OffsetSpec.for_timestamp(t0 + 10 * k - 5)) == k
        # an offset inside the third remote segment: two whole segments lie below it
        cut = before[2].start_offset + 3
        assert cut < part.log_start_offset
        res = admin.delete_records([TopicPartition(topic, 0, cut)])[tp].result(10)
        assert res.low_watermark == cut  # the low watermark, across tiers
        assert _list_offset_of(bs, topic, OffsetSpec.earliest()) == cut
        # the two remote segments wholly below the cut go, data and metadata
        _wait(lambda: len(remote.list_segments()) == len(before) - 2, "remote deletion")
        assert [m.start_offset for m in rlm.cache.copied_segments(topic, 0)] == [
            m.start_offset for m in before[2:]
        ]
        _assert_out_of_range(bs, topic, cut - 1)
        assert _list_offset_of(bs, topic, OffsetSpec.for_timestamp(t0)) == cut
        _check_sizes(b, bs, topic, capsys)
        first = _first_offset_from(bs, topic, cut)
        assert first == cut
    # the cut survives a restart (it is in __remote_log_metadata)
    with Broker(data, config=_props(tmp_path)) as b:
        bs = f"{b.host}:{b.port}"
        assert _list_offset_of(bs, topic, OffsetSpec.earliest()) == cut
        _assert_out_of_range(bs, topic, before[2].start_offset)


def _list_offset_of(bs: str, topic: str, spec: OffsetSpec) -> int:
    admin = AdminClient({"bootstrap.servers": bs})
    fut = admin.list_offsets({TopicPartition(topic, 0): spec})
    return int(fut[TopicPartition(topic, 0)].result(10).offset)


def _first_offset_from(bs: str, topic: str, offset: int) -> int:
    c = Consumer({"bootstrap.servers": bs, "group.id": "cut", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, offset)])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None:
                if m.error() is not None:
                    raise KafkaException(m.error())
                return int(m.offset())
        raise AssertionError("no record")
    finally:
        c.close()


def _assert_out_of_range(bs: str, topic: str, offset: int) -> None:
    """A fetch below the log start answers OFFSET_OUT_OF_RANGE (the consumer reports it, with
    auto.offset.reset=error)."""
    c = Consumer(
        {"bootstrap.servers": bs, "group.id": "cut-oor", "enable.auto.commit": False,
         "auto.offset.reset": "error"}
    )  # fmt: skip
    try:
        c.assign([TopicPartition(topic, 0, offset)])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            assert m.error() is not None, f"read offset {m.offset()} below the log start"
            assert "out of range" in m.error().str().lower() or m.error().code() in (
                confluent_kafka.KafkaError.OFFSET_OUT_OF_RANGE,
                confluent_kafka.KafkaError._AUTO_OFFSET_RESET,
            ), m.error()
            return
        raise AssertionError("no answer")
    finally:
        c.close()


def _check_sizes(b: Broker, bs: str, topic: str, capsys: pytest.CaptureFixture[str]) -> None:
    """DescribeLogDirs (kafka-python), `kafkalite log-dirs describe` and the console's REST figures
    give the local size in the data directory and the remote one in the "remote://" directory."""
    import json

    from kafka import KafkaAdminClient

    from kafkalite.cli.main import main

    part = b.server.replica_manager.get_partition(topic, 0)
    rlm = b.server.remote_log_manager
    local, remote = part.size_in_bytes, rlm.remote_size(topic, 0)
    assert local > 0 and remote > 0
    kp = KafkaAdminClient(bootstrap_servers=bs)
    try:
        described = kp.describe_log_dirs(topic_partitions={topic: [0]})
    finally:
        kp.close()
    sizes = {}
    for broker in described:
        for d in broker["log_dirs"]:
            for t in d["topics"]:
                for p in t["partitions"]:
                    if t["name"] == topic:
                        sizes[d["log_dir"]] = p["partition_size"]
    assert sizes[rlm.remote_log_dir] == remote
    assert rlm.remote_log_dir == f"remote://{Path(rlm.rsm.root)}"  # type: ignore[attr-defined]
    assert sorted(v for k, v in sizes.items() if not k.startswith("remote://")) == [local]
    capsys.readouterr()
    assert main(["log-dirs", "describe", "--bootstrap-server", bs, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    by_dir = {
        d["logDir"]: {p["partition"]: p["size"] for p in d["partitions"]}
        for d in doc["brokers"][0]["logDirs"]
    }
    assert by_dir[rlm.remote_log_dir][f"{topic}-0"] == remote
    # the console's partition figures: local and remote sizes, the earliest offset across tiers
    cid = b.server.cluster_id
    url = f"{b.http_url}/v3/clusters/{cid}/topics/{topic}/partitions/0"
    body = json.loads(urllib.request.urlopen(url, timeout=10).read())
    assert (body["size_bytes"], body["remote_size_bytes"]) == (local, remote)
    assert body["earliest_offset"] == rlm.log_start_offset(part)
