"""`kafkalite produce` / `consume` / `perf` against embedded brokers: Kafka's console flags, JSON output,
retries across a broker restart, Ctrl-C without a traceback, and the perf summaries.
"""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkalite.cli import console_consumer, console_producer
from kafkalite.cli.main import build_parser, main
from kafkalite.cli.wire import CliError
from kafkalite.testing import Broker

SRC = str(Path(__file__).resolve().parents[3] / "src")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    with Broker(
        tmp_path_factory.mktemp("console-clients"),
        group_initial_rebalance_delay_ms=0,
        offsets_topic_num_partitions=1,
    ) as b:
        yield b


def new_topic(b: Broker, partitions: int = 1) -> str:
    name = f"cc-{uuid.uuid4().hex[:10]}"
    b.create_topic(name, partitions)
    return name


def stdin_bytes(monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))


def produce(monkeypatch: pytest.MonkeyPatch, bs: str, topic: str, data: bytes, *extra: str) -> int:
    stdin_bytes(monkeypatch, data)
    return main(["produce", "--bootstrap-server", bs, "--topic", topic, *extra])


def consume_json(bs: str, topic: str, capsys: pytest.CaptureFixture[str], *extra: str) -> list[Any]:
    capsys.readouterr()
    assert (
        main(["consume", "--bootstrap-server", bs, "--topic", topic, "--output", "json", *extra])
        == 0
    )
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = SRC + os.pathsep + e.get("PYTHONPATH", "")
    e["PYTHONUNBUFFERED"] = "1"
    return e


def cli(*args: str, **kw: Any) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "kafkalite.cli.main", *args],
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        **kw,
    )


# -- argument parsing
@pytest.mark.parametrize(("given", "acks"), [("all", "all"), ("-1", "all"), ("1", "1"), ("0", "0")])
def test_acks_values(given: str, acks: str) -> None:
    a = build_parser().parse_args(["produce", "--topic", "t", "--acks", given])
    assert a.acks == acks


def test_acks_invalid(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["produce", "--topic", "t", "--acks", "2"])
    assert "invalid acks" in capsys.readouterr().err


def test_line_reader_properties() -> None:
    r = console_producer.LineReader(
        {
            "parse.key": "true",
            "key.separator": ":",
            "parse.headers": "true",
            "headers.delimiter": "|",
            "headers.separator": ";",
            "headers.key.separator": "=",
            "null.marker": "NULL",
        }
    )
    assert r.parse(b"a=1;a=2;b|k:v") == (b"k", b"v", [("a", b"1"), ("a", b"2"), ("b", None)])
    assert r.parse(b"NULL|NULL:x") == (None, b"x", [])
    assert r.parse(b"a=NULL|k:NULL") == (b"k", None, [("a", None)])
    with pytest.raises(ValueError, match="key separator"):
        r.parse(b"|novalue")
    lenient = console_producer.LineReader({"parse.key": "true", "ignore.error": "true"})
    assert lenient.parse(b"whole line") == (None, b"whole line", [])
    with pytest.raises(CliError, match="unknown --property"):
        console_producer.LineReader({"parse.keys": "true"})


def test_json_bytes() -> None:
    assert console_consumer.json_bytes(None) is None
    assert console_consumer.json_bytes("é".encode()) == "é"
    assert console_consumer.json_bytes(b"\xff\x00") == {"base64": "/wA="}


# -- produce and consume
def test_produce_acks_all_keys_headers_then_json(
    broker: Broker, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    bs, topic = broker.bootstrap_servers, new_topic(broker)
    lines = b"h:1,h:2,x:\xff\tk1:v1\nNO\tk2:\xc3\x28\n\tk3:v3\n"
    rc = produce(
        monkeypatch,
        bs,
        topic,
        lines,
        "--acks",
        "all",
        "--property",
        "parse.key=true",
        "--property",
        "key.separator=:",
        "--property",
        "parse.headers=true",
        "--compression-codec",
        "lz4",
    )
    assert rc == 0
    assert "3 records sent, 0 failed" in capsys.readouterr().err
    docs = consume_json(bs, topic, capsys, "--from-beginning", "--max-messages", "3")
    assert [d["offset"] for d in docs] == [0, 1, 2]
    assert all(d["topic"] == topic and d["partition"] == 0 for d in docs)
    assert docs[0]["key"] == "k1" and docs[0]["value"] == "v1"
    assert docs[0]["headers"] == [["h", "1"], ["h", "2"], ["x", {"base64": "/w=="}]]
    assert docs[1]["headers"] == [["NO", None]]
    assert docs[1]["value"] == {"base64": "wyg="}
    assert docs[2]["headers"] == [] and docs[2]["key"] == "k3"
    assert all(isinstance(d["timestamp"], int) and d["timestamp"] > 0 for d in docs)


def test_produce_bad_line_counts_as_failed(
    broker: Broker, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    bs, topic = broker.bootstrap_servers, new_topic(broker)
    rc = produce(
        monkeypatch,
        bs,
        topic,
        b"a:1\nno separator\nb:2\n",
        "--property",
        "parse.key=true",
        "key.separator=:",
    )
    err = capsys.readouterr().err
    assert rc == 2
    assert "line 2" in err and "2 records sent, 1 failed" in err


def test_produce_acks_zero_and_sync(
    broker: Broker, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    bs, topic = broker.bootstrap_servers, new_topic(broker)
    assert produce(monkeypatch, bs, topic, b"a\nb\n", "--acks", "1", "--sync") == 0
    assert "2 records sent, 0 failed" in capsys.readouterr().err
    assert (
        produce(monkeypatch, bs, topic, b"c\n", "--acks", "0", "--producer-property", "linger.ms=0")
        == 0
    )
    assert "1 records sent, 0 failed" in capsys.readouterr().err
    docs = consume_json(bs, topic, capsys, "--from-beginning", "--max-messages", "3")
    assert [d["value"] for d in docs] == ["a", "b", "c"]


def test_consume_group_properties_and_commits(
    broker: Broker,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    bs, topic = broker.bootstrap_servers, new_topic(broker)
    data = b"".join(b"h:%d\tk%d=v%d\n" % (i, i, i) for i in range(5))
    props = ["--property", "parse.key=true", "key.separator==", "parse.headers=true"]
    assert produce(monkeypatch, bs, topic, data, *props) == 0
    group = f"g-{uuid.uuid4().hex[:6]}"
    conf = tmp_path / "consumer.properties"
    conf.write_text("# a comment\nclient.id=from-file\n")
    capsys.readouterr()
    argv = ["consume", "--bootstrap-server", bs, "--topic", topic, "--group", group]
    rc = main(
        [
            *argv,
            "--from-beginning",
            "--max-messages",
            "2",
            "--consumer.config",
            str(conf),
            "--consumer-property",
            "session.timeout.ms=10000",
            "--property",
            "print.key=true",
            "print.timestamp=true",
            "print.headers=true",
            "print.partition=true",
            "print.offset=true",
            "key.separator=|",
        ]
    )
    out, err = capsys.readouterr()
    assert rc == 0
    assert "Processed a total of 2 messages" in err
    first = out.splitlines()[0].split("|")
    assert first[0].startswith("CreateTime:") and first[1:] == [
        "Partition:0",
        "Offset:0",
        "h:0",
        "k0",
        "v0",
    ]
    # the group committed 2: the next run goes on from offset 2
    docs = consume_json(bs, topic, capsys, "--group", group, "--timeout-ms", "1500")
    assert [d["offset"] for d in docs] == [2, 3, 4]
    docs = consume_json(bs, topic, capsys, "--group", group, "--timeout-ms", "500")
    assert docs == []


def test_consume_partition_and_offset(
    broker: Broker, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    bs, topic = broker.bootstrap_servers, new_topic(broker, 2)
    assert produce(monkeypatch, bs, topic, b"a\nb\nc\nd\n", "--partition", "1") == 0
    docs = consume_json(
        bs, topic, capsys, "--partition", "1", "--offset", "2", "--max-messages", "2"
    )
    assert [(d["partition"], d["offset"], d["value"]) for d in docs] == [(1, 2, "c"), (1, 3, "d")]
    docs = consume_json(
        bs, topic, capsys, "--partition", "1", "--offset", "earliest", "--max-messages", "4"
    )
    assert [d["value"] for d in docs] == ["a", "b", "c", "d"]
    docs = consume_json(
        bs, topic, capsys, "--partition", "1", "--offset", "-1", "--max-messages", "1"
    )
    assert [d["value"] for d in docs] == ["d"]
    docs = consume_json(
        bs, topic, capsys, "--partition", "0", "--offset", "earliest", "--timeout-ms", "500"
    )
    assert docs == []
    docs = consume_json(
        bs, topic, capsys, "--partition", "1", "--offset", "latest", "--timeout-ms", "500"
    )
    assert docs == []
    assert main(["consume", "--bootstrap-server", bs, "--topic", topic, "--partition", "5"]) == 2
    assert "partitions 0..1" in capsys.readouterr().err
    argv = ["consume", "--bootstrap-server", bs, "--topic", topic, "--partition", "1"]
    assert main([*argv, "--offset", "9"]) == 2
    err = capsys.readouterr().err
    assert "offset 9 is out of range" in err and "valid offsets are 0 to 4" in err
    assert "Traceback" not in err


def test_consume_isolation_level(
    broker: Broker, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    bs, topic = broker.bootstrap_servers, new_topic(broker)
    assert produce(monkeypatch, bs, topic, b"x\n") == 0
    docs = consume_json(
        bs,
        topic,
        capsys,
        "--from-beginning",
        "--isolation-level",
        "read_committed",
        "--max-messages",
        "1",
    )
    assert [d["value"] for d in docs] == ["x"]


# -- a broker restart under a running producer
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_produce_survives_broker_restart(tmp_path: Path) -> None:
    port = _free_port()
    data = tmp_path / "data"
    props = {"group_initial_rebalance_delay_ms": 0, "offsets_topic_num_partitions": 1}
    b = Broker(data, port=port, **props).start()
    try:
        b.create_topic("restart", 1)
        proc = cli(
            "produce",
            "--bootstrap-server",
            f"127.0.0.1:{port}",
            "--topic",
            "restart",
            "--retry-timeout",
            "60",
            stdin=subprocess.PIPE,
        )
        assert proc.stdin is not None

        def write(lo: int, hi: int) -> None:
            assert proc.stdin is not None
            proc.stdin.write(b"".join(b"line-%d\n" % i for i in range(lo, hi)))
            proc.stdin.flush()

        write(0, 50)
        deadline = time.monotonic() + 30
        while _end_offset(b, "restart") < 50 and time.monotonic() < deadline:
            time.sleep(0.1)  # the producer is up and its first records landed
        assert _end_offset(b, "restart") == 50
        b.stop()
        write(50, 100)  # sent while the broker is down
        time.sleep(2.0)
        b = Broker(data, port=port, **props).start()
        write(100, 150)
        _, err = proc.communicate(timeout=90)  # closes stdin: end of input
        text = err.decode()
        assert proc.returncode == 0, text
        assert "150 records sent, 0 failed" in text
        assert "Traceback" not in text
        from kafkalite.client import KafkaConsumer

        c = KafkaConsumer(bootstrap_servers=b.bootstrap_servers, auto_offset_reset="earliest")
        c.assign([("restart", 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 20
        while len(got) < 150 and time.monotonic() < deadline:
            for recs in c.poll(500).values():
                got.extend(r.value for r in recs)
        c.close()
        assert sorted(set(got)) == sorted(b"line-%d" % i for i in range(150))
    finally:
        b.stop()


# -- Ctrl-C
def test_consume_ctrl_c_prints_count_without_traceback(
    broker: Broker, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    bs, topic = broker.bootstrap_servers, new_topic(broker)
    assert produce(monkeypatch, bs, topic, b"1\n2\n3\n") == 0
    group = f"g-{uuid.uuid4().hex[:6]}"
    proc = cli(
        "consume", "--bootstrap-server", bs, "--topic", topic, "--group", group, "--from-beginning"
    )
    assert proc.stdout is not None
    lines = [proc.stdout.readline() for _ in range(3)]
    assert lines == [b"1\n", b"2\n", b"3\n"]
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    text = err.decode()
    assert proc.returncode == 130, text
    assert "Traceback" not in text
    assert "Processed a total of 3 messages" in text
    # the clean close committed: the group goes on after offset 2
    docs = consume_json(bs, topic, capsys, "--group", group, "--timeout-ms", "500")
    assert docs == []


def test_produce_ctrl_c_prints_count_without_traceback(broker: Broker) -> None:
    bs, topic = broker.bootstrap_servers, new_topic(broker)
    proc = cli("produce", "--bootstrap-server", bs, "--topic", topic, stdin=subprocess.PIPE)
    assert proc.stdin is not None
    proc.stdin.write(b"a\nb\n")
    proc.stdin.flush()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # both records landed
        if _end_offset(broker, topic) >= 2:
            break
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    proc.wait(60)  # stdin stays open: the interrupt, not the end of input, stops it
    assert proc.stderr is not None
    text = proc.stderr.read().decode()
    proc.stdin.close()
    assert proc.returncode == 130, text
    assert "Traceback" not in text
    assert "2 records sent, 0 failed" in text


def _end_offset(b: Broker, topic: str) -> int:
    from kafkalite.client import KafkaConsumer

    c = KafkaConsumer(bootstrap_servers=b.bootstrap_servers)
    try:
        return int(c.end_offsets([(topic, 0)])[(topic, 0)])
    finally:
        c.close()


# -- perf
def test_perf_produce_then_consume(broker: Broker, capsys: pytest.CaptureFixture[str]) -> None:
    bs, topic = broker.bootstrap_servers, new_topic(broker)
    base = ["perf", "produce", "--bootstrap-server", bs, "--topic", topic, "--record-size", "100"]
    assert main([*base, "--num-records", "20000", "--client", "kafkalite", "--output", "json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["records_sent"] == 20000 and s["records_failed"] == 0
    assert s["records_per_sec"] > 0 and s["mb_per_sec"] > 0
    lat = [s[f"latency_{k}_ms"] for k in ("p50", "p95", "p99", "p999", "max")]
    assert lat == sorted(lat) and lat[-1] > 0 and s["latency_avg_ms"] > 0
    assert main([*base, "--num-records", "20000", "--producer-props", "acks=1", "linger.ms=5"]) == 0
    out = capsys.readouterr().out
    summary = out.strip().splitlines()[-1]
    assert summary.startswith("20000 records sent, ")
    for field in (
        "records/sec",
        "MB/sec",
        "ms avg latency",
        "ms max latency",
        "50th",
        "95th",
        "99th",
        "99.9th",
    ):
        assert field in summary
    assert (
        main(
            [
                *base,
                "--duration",
                "1",
                "--throughput",
                "500",
                "--output",
                "json",
                "--client",
                "kafkalite",
            ]
        )
        == 0
    )
    s = json.loads(capsys.readouterr().out)
    assert 200 <= s["records_sent"] <= 700
    argv = ["perf", "consume", "--bootstrap-server", bs, "--topic", topic, "--timeout", "5000"]
    assert main([*argv, "--messages", "40000", "--client", "kafkalite", "--output", "json"]) == 0
    c = json.loads(capsys.readouterr().out)
    assert c["records_consumed"] == 40000
    assert c["data_consumed_mb"] > 3.8 and c["records_per_sec"] > 0 and c["rebalance_time_ms"] >= 0
    assert main([*argv, "--messages", "1000"]) == 0
    header, row = capsys.readouterr().out.strip().splitlines()[-2:]
    assert header.startswith("start.time, end.time, data.consumed.in.MB")
    assert row.split(", ")[4] == "1000"


def test_pipeline_without_java_says_so(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    pytest.importorskip("pyspark")
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no java on it
    assert main(["pipeline", "--work-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "Spark needs a Java runtime" in err and "Traceback" not in err
