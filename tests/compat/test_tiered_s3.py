"""Tiered storage on S3 against a real S3-compatible server (moto's, a process on loopback) through boto3: the
store copies with multipart upload, reads ranges, aborts a failed upload and deletes without leftovers; a
broker archives to the bucket and a confluent-kafka consumer reads every record from offset 0; listing the
bucket finds only objects the remote log metadata points at."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("boto3")
pytest.importorskip("moto")
confluent_kafka = pytest.importorskip("confluent_kafka")

from test_tiered_storage import TOPIC, N, _read_all, _value, _wait  # noqa: E402

from kafkalite.cluster.remote_log_policy import copy_candidates  # noqa: E402
from kafkalite.storage.remote import (  # noqa: E402
    LogSegmentData,
    RemoteLogSegmentState,
    RemoteStorageError,
)
from kafkalite.storage.remote.metadata import RemoteLogSegmentMetadata  # noqa: E402
from kafkalite.storage.remote.s3_storage import S3RemoteStorageManager, S3Settings  # noqa: E402
from kafkalite.testing import Broker  # noqa: E402

pytestmark = [pytest.mark.compat]

MiB = 1024 * 1024


@pytest.fixture(scope="module")
def moto_server() -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("moto server did not start") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}", proc
    finally:
        proc.send_signal(signal.SIGCONT)
        proc.terminate()
        proc.wait(10)


@pytest.fixture
def s3_endpoint(moto_server: tuple[str, subprocess.Popen[bytes]]) -> str:
    return moto_server[0]


def _settings(endpoint: str, bucket: str) -> S3Settings:
    return S3Settings(
        bucket, endpoint, "us-east-1", "test", "test", path_style=True, part_size=5 * MiB
    )


def _bucket(endpoint: str) -> str:
    import boto3

    name = f"b-{uuid.uuid4().hex[:12]}"
    boto3.client(
        "s3", endpoint_url=endpoint, region_name="us-east-1",
        aws_access_key_id="test", aws_secret_access_key="test",
    ).create_bucket(Bucket=name)  # fmt: skip
    return name


def _broker_props(endpoint: str, bucket: str) -> dict[str, str]:
    return {
        "remote.log.storage.system.enable": "true",
        "remote.log.storage.manager.class.name": "io.aiven.kafka.tieredstorage.RemoteStorageManager",
        "rsm.config.storage.backend.class": "io.aiven.kafka.tieredstorage.storage.s3.S3Storage",
        "rsm.config.storage.s3.bucket.name": bucket,
        "rsm.config.storage.s3.endpoint.url": endpoint,
        "rsm.config.storage.s3.region": "us-east-1",
        "rsm.config.storage.s3.path.style.access.enabled": "true",
        "rsm.config.storage.s3.api.call.attempt.timeout": "1000",
        "rsm.config.storage.aws.access.key.id": "test",
        "rsm.config.storage.aws.secret.access.key": "test",
        "rlmm.config.remote.log.metadata.topic.num.partitions": "1",
        "remote.log.manager.task.interval.ms": "100",
        "log.retention.check.interval.ms": "100",
        # an S3 read here may retry past 500 ms on a loaded machine (attempt timeout 1 s); the
        # expiry itself is tested in tests/unit/cluster/test_remote_log_manager.py
        "remote.fetch.max.wait.ms": "5000",
    }


def _meta(start: int, size: int) -> RemoteLogSegmentMetadata:
    return RemoteLogSegmentMetadata(
        uuid.UUID(int=5), "t", 0, uuid.uuid4(), start, start + 9, 0, 1, 0, (), size
    )


def test_multipart_copy_ranges_abort_and_delete(s3_endpoint: str, tmp_path: Path) -> None:
    rsm = S3RemoteStorageManager(_settings(s3_endpoint, _bucket(s3_endpoint)))
    blob = bytes(range(256)) * (12 * MiB // 256 + 7)  # three parts
    seg = tmp_path / "00000000000000000000.log"
    seg.write_bytes(blob)
    m = _meta(0, len(blob))
    data = LogSegmentData(seg, len(blob), b"offsets", b"times", None, b"snap", b"0\n0\n")
    rsm.copy_log_segment_data(m, data)
    assert rsm.fetch_log_segment(m, 0, None) == blob
    assert rsm.fetch_log_segment(m, 5 * MiB - 3, 5 * MiB + 3) == blob[5 * MiB - 3 : 5 * MiB + 4]
    assert len(rsm.list_objects()) == 5  # .log, .index, .timeindex, .snapshot, checkpoint
    # an upload that fails half-way (the file is shorter than said) is aborted: nothing is left
    bad = _meta(100, len(blob) + 6 * MiB)
    short = LogSegmentData(seg, len(blob) + 6 * MiB, b"", b"", None, None, b"")
    with pytest.raises(RemoteStorageError):
        rsm.copy_log_segment_data(bad, short)
    assert rsm.list_uploads() == []
    rsm.delete_log_segment_data(bad)
    rsm.delete_log_segment_data(m)
    assert rsm.list_objects() == []
    rsm.close()


def test_broker_archives_to_s3_and_consumer_reads_from_zero(
    s3_endpoint: str, tmp_path: Path
) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    bucket = _bucket(s3_endpoint)
    props = _broker_props(s3_endpoint, bucket)
    with Broker(tmp_path / "data", config=props) as b:
        bs = f"{b.host}:{b.port}"
        configs = {
            "remote.storage.enable": "true",
            "segment.bytes": str(256 * 1024),
            "local.retention.bytes": str(256 * 1024),
        }
        admin = AdminClient({"bootstrap.servers": bs})
        admin.create_topics([NewTopic(TOPIC, 1, 1, config=configs)])[TOPIC].result(10)
        p = Producer({"bootstrap.servers": bs, "acks": "all", "linger.ms": 5, "batch.size": 65536})
        for i in range(N):
            p.produce(TOPIC, value=_value(i))
            if i % 200 == 0:
                p.poll(0)
        assert p.flush(30) == 0
        del p
        part = b.server.replica_manager.get_partition(TOPIC, 0)
        rlm = b.server.remote_log_manager
        _wait(lambda: part.log_start_offset > N // 2, "segments archived to S3 and deleted locally")
        got = _read_all(bs, N)
        assert [o for o, _ in got] == list(range(N))
        assert all(v == _value(o) for o, v in got)
        # nothing in the bucket without metadata pointing at it
        rsm = S3RemoteStorageManager(_settings(s3_endpoint, bucket))

        def settled() -> bool:  # every rolled segment copied, no copy or deletion under way
            segs = rlm.cache.segments(TOPIC, 0)
            highest = rlm.cache.highest_copied_offset(TOPIC, 0)
            return not copy_candidates(part, highest) and all(
                m.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED for m in segs
            )

        _wait(settled, "the archive to settle")
        names = {m.object_name for m in rlm.cache.segments(TOPIC, 0)}
        keys = rsm.list_objects()
        assert names and {k.split("/")[1].split(".")[0] for k in keys} == names
        assert rsm.list_uploads() == []


def _produce(bs: str, first: int, count: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bs, "acks": "all", "linger.ms": 5, "batch.size": 65536})
    for i in range(first, first + count):
        p.produce(TOPIC, value=_value(i))
        if i % 200 == 0:
            p.poll(0)
    assert p.flush(30) == 0


@pytest.mark.slow  # (about 20 s: S3 timeouts and retries while the server is paused)
def test_s3_paused_copy_waits_local_goes_on_and_archive_catches_up(
    moto_server: tuple[str, subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    endpoint, proc = moto_server
    bucket = _bucket(endpoint)
    half = N // 2
    with Broker(tmp_path / "data", config=_broker_props(endpoint, bucket)) as b:
        bs = f"{b.host}:{b.port}"
        configs = {
            "remote.storage.enable": "true",
            "segment.bytes": str(256 * 1024),
            "local.retention.bytes": str(256 * 1024),
        }
        admin = AdminClient({"bootstrap.servers": bs})
        admin.create_topics([NewTopic(TOPIC, 1, 1, config=configs)])[TOPIC].result(10)
        _produce(bs, 0, half)
        part = b.server.replica_manager.get_partition(TOPIC, 0)
        rlm = b.server.remote_log_manager
        _wait(lambda: part.log_start_offset > half // 2, "the first half archived")
        proc.send_signal(signal.SIGSTOP)  # the object store stops answering
        try:
            errors = rlm.stats.remote_copy_errors
            _produce(bs, half, N - half)  # produce goes on
            _wait(lambda: rlm.stats.remote_copy_errors > errors, "a copy to fail", 60)
            # no local segment the remote tier does not hold was deleted
            highest = rlm.cache.highest_copied_offset(TOPIC, 0)
            assert part.log_start_offset <= highest + 1 < half + 1000
            # fetch of local data goes on
            c = Consumer(
                {"bootstrap.servers": bs, "group.id": "local", "enable.auto.commit": False}
            )
            c.assign([TopicPartition(TOPIC, 0, N - 10)])
            tail = []
            deadline = time.monotonic() + 30
            while len(tail) < 10 and time.monotonic() < deadline:
                m = c.poll(0.2)
                if m is not None and m.error() is None:
                    tail.append(m.offset())
            c.close()
            assert tail == list(range(N - 10, N))
        finally:
            proc.send_signal(signal.SIGCONT)
        # the archive catches up, and nothing is lost
        _wait(lambda: part.log_start_offset > N // 2 + half // 2, "the archive to catch up", 60)
        got = _read_all(bs, N)
        assert [o for o, _ in got] == list(range(N))
        assert all(v == _value(o) for o, v in got)
        rsm = S3RemoteStorageManager(_settings(endpoint, bucket))
        assert rsm.list_uploads() == []
