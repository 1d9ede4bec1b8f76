"""CreateTopics / CreatePartitions that cannot make a partition's log (EMFILE injected on the Nth partition)
answer KAFKA_STORAGE_ERROR, leave nothing of the half-made topic behind, and keep the connection serving.
"""

from __future__ import annotations

import errno
import time
from pathlib import Path
from typing import Any

import pytest

from kafkalite.cli.wire import WireClient
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.schema import APIS
from kafkalite.storage.log import Log
from kafkalite.testing import Broker

ck = pytest.importorskip("confluent_kafka")
admin_mod = pytest.importorskip("confluent_kafka.admin")

# a real client nobody here wrote (confluent-kafka's AdminClient), so marked as the compat tests are
pytestmark = pytest.mark.compat


def fail_nth_open(monkeypatch: pytest.MonkeyPatch, topic: str, n: int) -> list[int]:
    """Make the n-th (0-based) log created for `topic` fail as a process out of descriptors does,
    after its directory was made (as a real open half done leaves it)."""
    real = Log.create.__func__  # type: ignore[attr-defined]
    calls: list[int] = []

    def open_(cls: Any, directory: Path, *args: Any, **kwargs: Any) -> Log:
        if Path(directory).name.rsplit("-", 1)[0] == topic:
            calls.append(1)
            if len(calls) == n + 1:
                Path(directory).mkdir(parents=True, exist_ok=True)
                raise OSError(errno.EMFILE, "Too many open files")
        return real(cls, directory, *args, **kwargs)  # type: ignore[no-any-return]

    monkeypatch.setattr(Log, "create", classmethod(open_))
    return calls


def topic_dirs(data: Path, topic: str) -> list[str]:
    return sorted(p.name for p in data.iterdir() if p.is_dir() and p.name.startswith(f"{topic}-"))


def wait_gone(data: Path, topic: str, timeout: float = 10.0) -> None:
    """Rolled-back logs go the way of deleted ones (renamed `-delete`, removed after the grace)."""
    deadline = time.monotonic() + timeout
    while topic_dirs(data, topic):
        assert time.monotonic() < deadline, topic_dirs(data, topic)
        time.sleep(0.1)


def test_create_topics_rolls_back_on_emfile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    with Broker(tmp_path, log_segment_delete_delay_ms=0) as b:
        admin = admin_mod.AdminClient({"bootstrap.servers": b.bootstrap_servers})
        calls = fail_nth_open(monkeypatch, "half", 3)
        fut = admin.create_topics([admin_mod.NewTopic("half", 6, 1)], operation_timeout=10)["half"]
        with pytest.raises(ck.KafkaException) as err:
            fut.result(15)
        kerr = err.value.args[0]
        assert kerr.code() == ck.KafkaError.KAFKA_STORAGE_ERROR, kerr
        assert "half-3" in kerr.str() and "Too many open files" in kerr.str()
        assert len(calls) == 4  # partitions 0..2 made, 3 failed, 4..5 never tried
        assert any("rolled back" in r.getMessage() for r in caplog.records)
        # nothing of it is left: no metadata entry, no hosted partition, no directory
        assert b.server.metadata_store.get("half") is None
        assert b.server.metadata_cache.topic("half") is None
        assert b.server.get_log("half", 0) is None
        wait_gone(tmp_path, "half")
        # on one raw connection: the failing request is answered and the connection serves on
        with WireClient(b.bootstrap_servers, timeout=10) as wc:
            fail_nth_open(monkeypatch, "solo", 0)
            cls = APIS[19].request
            req = cls(
                topics=[cls.CreatableTopic(name="solo", num_partitions=2, replication_factor=1)],
                timeout_ms=5000,
            )
            answer = wc.send(req).topics[0]
            assert answer.error_code == ErrorCode.KAFKA_STORAGE_ERROR
            assert wc.metadata(None).brokers  # same socket, next request answered
        wait_gone(tmp_path, "solo")
        assert b.server.metadata_store.get("solo") is None
        monkeypatch.undo()
        # the name is free again and the topic can be made once descriptors are available
        admin.create_topics([admin_mod.NewTopic("half", 6, 1)])["half"].result(15)
        md = admin.list_topics(timeout=10)
        assert len(md.topics["half"].partitions) == 6
        assert topic_dirs(tmp_path, "half") == [f"half-{i}" for i in range(6)]


def test_create_partitions_rolls_back_on_emfile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Broker(tmp_path, log_segment_delete_delay_ms=0) as b:
        admin = admin_mod.AdminClient({"bootstrap.servers": b.bootstrap_servers})
        admin.create_topics([admin_mod.NewTopic("grow", 2, 1)])["grow"].result(15)
        fail_nth_open(monkeypatch, "grow", 1)  # partitions 2 made, 3 fails
        fut = admin.create_partitions([admin_mod.NewPartitions("grow", 5)])["grow"]
        with pytest.raises(ck.KafkaException) as err:
            fut.result(15)
        assert err.value.args[0].code() == ck.KafkaError.KAFKA_STORAGE_ERROR
        assert b.server.metadata_store.get("grow").partitions == 2
        assert b.server.get_log("grow", 2) is None
        deadline = time.monotonic() + 10
        while topic_dirs(tmp_path, "grow") != ["grow-0", "grow-1"]:
            assert time.monotonic() < deadline, topic_dirs(tmp_path, "grow")
            time.sleep(0.1)
        monkeypatch.undo()
        admin.create_partitions([admin_mod.NewPartitions("grow", 5)])["grow"].result(15)
        assert len(admin.list_topics(timeout=10).topics["grow"].partitions) == 5
