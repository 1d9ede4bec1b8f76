"""examples/consume_transform_produce.py run as a program against the embedded broker: the output topic,
read read_committed, holds each transformed input exactly once, also across a second run that resumes.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from test_client_support import create_topic, new_topic_name

import kafkalite
from kafkalite.client import KafkaConsumer, KafkaProducer, TopicPartition

pytestmark = [pytest.mark.compat, pytest.mark.slow, pytest.mark.timeout(180)]
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "consume_transform_produce.py"


def _produce(bs: str, topic: str, values: list[bytes]) -> None:
    with KafkaProducer(bootstrap_servers=bs) as p:
        for i, v in enumerate(values):
            p.send(topic, v, key=b"k%d" % i)
        p.flush(30)


def _run_example(bs: str, src: str, dst: str, group: str, tid: str, n: int) -> str:
    env = dict(os.environ)
    src_root = str(Path(kafkalite.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src_root, env.get("PYTHONPATH")) if p)
    argv = [sys.executable, str(EXAMPLE), "--bootstrap-server", bs, "--input", src]
    argv += ["--output", dst, "--group", group, "--transactional-id", tid, "--max-records", str(n)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _read_committed(bs: str, topic: str, partitions: int) -> list[bytes]:
    with KafkaConsumer(
        bootstrap_servers=bs,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
        consumer_timeout_ms=3000,
    ) as c:
        c.assign([TopicPartition(topic, p) for p in range(partitions)])
        return [r.value for r in c]


def test_each_input_lands_once(broker: Any) -> None:
    bs = broker.bootstrap_servers
    src = create_topic(bs, new_topic_name("ctp-in"), 3)
    dst = create_topic(bs, new_topic_name("ctp-out"), 2)
    group, tid = f"ctp-{uuid.uuid4().hex[:8]}", f"ctp-tid-{uuid.uuid4().hex[:8]}"

    first = [b"word-%d" % i for i in range(40)]
    _produce(bs, src, first)
    assert "transformed 40 record(s)" in _run_example(bs, src, dst, group, tid, 40)
    assert sorted(_read_committed(bs, dst, 2)) == sorted(v.upper() for v in first)

    second = [b"more-%d" % i for i in range(25)]  # a new run resumes from the committed offsets
    _produce(bs, src, second)
    assert "transformed 25 record(s)" in _run_example(bs, src, dst, group, tid, 25)
    assert sorted(_read_committed(bs, dst, 2)) == sorted(v.upper() for v in first + second)

    with KafkaConsumer(bootstrap_servers=bs, group_id=group) as c:
        committed = [c.committed(TopicPartition(src, p)) for p in range(3)]
    assert sum(om.offset for om in committed if om is not None) == 65
