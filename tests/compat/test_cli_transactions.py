"""`kafkalite transactions` against the embedded broker: a confluent-kafka transaction left open shows in
`list` and `describe` as Ongoing, and `abort --start-offset` ends it so the last stable offset moves past it.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kafkalite.cli.main import main

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

pytestmark = [pytest.mark.compat, pytest.mark.timeout(120)]


def _create(bs: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bs})  # kept alive until the creation is answered
    admin.create_topics([NewTopic(topic, 1)])[topic].result(30)


def _cli(capsys: pytest.CaptureFixture[str], bs: str, *argv: str) -> tuple[int, str, str]:
    code = main(["transactions", "--bootstrap-server", bs, *argv])
    out, err = capsys.readouterr()
    return code, out, err


def _lso(bs: str, topic: str) -> int:
    c = Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": f"g-{uuid.uuid4().hex[:8]}",
            "isolation.level": "read_committed",
        }
    )
    try:
        return int(c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1])
    finally:
        c.close()


@pytest.fixture
def open_txn(broker: Any, topic: str) -> Iterator[tuple[str, str, Producer]]:
    """A transaction of 3 records on `topic` partition 0, after 2 plain records, flushed, never ended."""
    bs = broker.bootstrap_servers
    _create(bs, topic)
    plain = Producer({"bootstrap.servers": bs})
    for i in range(2):
        plain.produce(topic, b"plain-%d" % i, partition=0)
    plain.flush(10)
    tid = f"cli-txn-{uuid.uuid4().hex[:8]}"
    p = Producer(
        {"bootstrap.servers": bs, "transactional.id": tid, "transaction.timeout.ms": 60000}
    )
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, b"txn-%d" % i, partition=0)
    assert p.flush(10) == 0
    yield tid, topic, p


def test_list_describe_abort(
    broker: Any, open_txn: tuple[str, str, Producer], capsys: pytest.CaptureFixture[str]
) -> None:
    bs = broker.bootstrap_servers
    tid, topic, _producer = open_txn

    code, out, err = _cli(capsys, bs, "list")
    assert code == 0, err
    assert "TransactionalId" in out and "Coordinator" in out
    row = next(line for line in out.splitlines() if tid in line)
    assert "Ongoing" in row

    code, out, err = _cli(capsys, bs, "list", "--state", "Ongoing")
    assert code == 0 and tid in out

    code, out, err = _cli(capsys, bs, "describe", "--transactional-id", tid)
    assert code == 0, err
    assert "Ongoing" in out and f"{topic}-0" in out and "60000" in out

    assert _lso(bs, topic) == 2  # the open transaction starts at offset 2 and holds the LSO there

    code, out, err = _cli(
        capsys, bs, "abort", "--topic", topic, "--partition", "0", "--start-offset", "1"
    )
    assert code == 2 and "no open transaction starts at offset 1" in err and "2" in err

    code, out, err = _cli(
        capsys, bs, "abort", "--topic", topic, "--partition", "0", "--start-offset", "2"
    )
    assert code == 0, err
    assert "Aborted" in out

    deadline = time.monotonic() + 15
    while (lso := _lso(bs, topic)) <= 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert lso > 4  # past the 3 aborted records (and their marker)


def test_errors_are_sentences(broker: Any, capsys: pytest.CaptureFixture[str]) -> None:
    bs = broker.bootstrap_servers
    code, _, err = _cli(capsys, bs, "describe", "--transactional-id", "no-such-txn")
    assert code == 2 and "does not exist" in err and "Traceback" not in err
    code, _, err = _cli(capsys, bs, "abort", "--topic", "t", "--partition", "0")
    assert code == 2 and "--start-offset" in err
