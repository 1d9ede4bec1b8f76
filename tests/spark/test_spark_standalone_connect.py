"""The kafkalite source and sink through Spark Connect: a Connect server started from pyspark's own jars,
a separate client process that registers the Python data source remotely, batch and streaming I/O."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from spark_support import consume_all, consume_committed, produce
from standalone_support import connect_server

import kafkalite

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SRC = str(Path(kafkalite.__file__).resolve().parents[1])
CLIENT = Path(__file__).with_name("connect_client.py")


def test_kafkalite_source_and_sink_through_spark_connect(broker, topic, tmp_path):
    n = 120
    source, batch_sink, stream_sink = topic + "-in", topic + "-batch", topic + "-stream"
    broker.create_topic(source, 2)
    broker.create_topic(batch_sink, 1)
    broker.create_topic(stream_sink, 2)
    produce(broker, source, [{"value": b"%d" % i, "partition": i % 2} for i in range(n)])
    python_path = os.pathsep.join(filter(None, [SRC, os.environ.get("PYTHONPATH")]))
    with connect_server(tmp_path / "server", python_path=python_path) as url:
        args = [url, broker.bootstrap_servers, source, batch_sink, stream_sink]
        env = {**os.environ, "PYTHONPATH": python_path}
        done = subprocess.run(
            [sys.executable, str(CLIENT), *args, str(tmp_path / "ckpt")],
            env=env,
            capture_output=True,
            text=True,
            timeout=240,
        )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["session"] == "pyspark.sql.connect.session"  # really a Connect client
    assert result["values"] == list(range(n))
    assert result["stream_finished"] and result["stream_error"] is None
    assert result["stream_rows"] == n
    assert sorted(int(r.value) for r in consume_all(broker, batch_sink)) == list(range(n))
    got = Counter(int(r.value) for r in consume_committed(broker, stream_sink))
    assert got == Counter(range(n))  # the exactly-once sink through Connect: each record once
