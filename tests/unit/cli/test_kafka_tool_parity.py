"""Kafka's admin tools as users type them, with `kafka-X.sh` replaced by `kafkalite X`, against an embedded
broker: each invocation's effect and output shape, and bad invocations as one-line errors with exit code 2.
"""

from __future__ import annotations

import io
import json
import re
import shlex
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kafkalite.cli.main import main
from kafkalite.testing import Broker

KAFKA_BOOTSTRAP = "localhost:9092"


def translate(command: str, bootstrap: str, **paths: str) -> list[str]:
    """`kafka-topics.sh --bootstrap-server localhost:9092 ...` -> ["topics", "--bootstrap-server", B, ...]."""
    words = shlex.split(command.format(**paths))
    tool = re.fullmatch(r"kafka-([a-z-]+)\.sh", words[0])
    assert tool, words[0]
    return [tool.group(1), *(bootstrap if w == KAFKA_BOOTSTRAP else w for w in words[1:])]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    with Broker(tmp_path_factory.mktemp("parity")) as b:
        yield b


def run(
    broker: Broker, command: str, capsys: pytest.CaptureFixture[str], **paths: str
) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(translate(command, broker.bootstrap_servers, **paths))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def _produce(broker: Broker, topic: str, lines: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    argv = ["produce", "--bootstrap-server", broker.bootstrap_servers, "--topic", topic]
    for line in lines:  # one batch each: the segment's index gets several entries
        monkeypatch.setattr(sys, "stdin", io.StringIO(f"{line}\n"))
        assert main([*argv, "--key-separator", ":", "--partition", "0"]) == 0


Check = Callable[[str, Broker, Path], None]


def _created(out: str, b: Broker, d: Path) -> None:
    assert out.strip() == "Created topic orders."
    info = b.server.metadata_store.get("orders")
    assert info.partitions == 3


def _listed(out: str, b: Broker, d: Path) -> None:
    assert "orders" in out.split()


def _described(out: str, b: Broker, d: Path) -> None:
    lines = out.splitlines()
    assert re.fullmatch(
        r"Topic: orders\tTopicId: [A-Za-z0-9_-]{22}\tPartitionCount: 3\tReplicationFactor: 1\t"
        r"Configs: .*retention\.ms=86400000.*",
        lines[0],
    ), lines[0]
    assert lines[1:] == [
        f"\tTopic: orders\tPartition: {p}\tLeader: 0\tReplicas: 0\tIsr: 0" for p in range(3)
    ]


def _config_altered(out: str, b: Broker, d: Path) -> None:
    assert out.strip() == "Completed updating config for topic orders."


def _config_described(out: str, b: Broker, d: Path) -> None:
    lines = out.splitlines()
    assert lines[0] == "Dynamic configs for topic orders are:"
    assert any(
        line.startswith("  retention.ms=2000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:")
        for line in lines[1:]
    ), lines


def _partitions_altered(out: str, b: Broker, d: Path) -> None:
    assert b.server.metadata_store.get("orders").partitions == 4


def _latest(out: str, b: Broker, d: Path) -> None:
    assert out.splitlines() == ["orders:0:5", "orders:1:0", "orders:2:0", "orders:3:0"]


def _earliest_p0(out: str, b: Broker, d: Path) -> None:
    assert out.splitlines() == ["orders:0:0"]


def _deleted_records(out: str, b: Broker, d: Path) -> None:
    assert out.splitlines() == [
        "Executing records delete operation",
        "Records delete operation completed:",
        "partition: orders-0\tlow_watermark: 2",
    ]


def _earliest_after_delete(out: str, b: Broker, d: Path) -> None:
    assert out.splitlines() == ["orders:0:2"]


def _log_dirs(out: str, b: Broker, d: Path) -> None:
    lines = out.splitlines()
    assert lines[0] == "Querying brokers for log directories information"
    assert lines[1] == "Received log directory information from brokers 0"
    doc = json.loads(lines[2])
    assert doc["version"] == 1
    (broker,) = doc["brokers"]
    assert broker["broker"] == 0
    parts = {p["partition"]: p for ld in broker["logDirs"] for p in ld["partitions"]}
    assert sorted(parts) == ["orders-0", "orders-1", "orders-2", "orders-3"]
    assert parts["orders-0"]["size"] > 0 and parts["orders-0"]["isFuture"] is False


def _dumped(out: str, b: Broker, d: Path) -> None:
    lines = out.splitlines()
    assert lines[0].startswith("Dumping ") and lines[0].endswith("00000000000000000000.log")
    assert lines[1] == "Log starting offset: 0"
    batches = [line for line in lines if line.startswith("baseOffset: ")]
    records = [line for line in lines if line.startswith("| offset: ")]
    assert batches and all(
        re.fullmatch(
            r"baseOffset: \d+ lastOffset: \d+ count: \d+ baseSequence: -?\d+ lastSequence: -?\d+ "
            r"producerId: -?\d+ producerEpoch: -?\d+ partitionLeaderEpoch: \d+ "
            r"isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty "
            r"position: \d+ CreateTime: \d+ size: \d+ magic: 2 compresscodec: none crc: \d+ "
            r"isvalid: true",
            line,
        )
        for line in batches
    ), batches
    assert len(records) == 5
    assert re.fullmatch(
        r"\| offset: 0 CreateTime: \d+ keySize: 2 valueSize: 2 sequence: -?\d+ headerKeys: \[\] "
        r"key: k0 payload: v0",
        records[0],
    ), records[0]


def _index_dumped(out: str, b: Broker, d: Path) -> None:
    lines = out.splitlines()
    assert lines[0].endswith(".index")
    entries = [line for line in lines[1:] if line.startswith("offset: ")]
    assert entries and all(re.fullmatch(r"offset: \d+ position: \d+", e) for e in entries)


def _index_verified(out: str, b: Broker, d: Path) -> None:
    assert "passed the check" in out and "Mismatches" not in out


def _topic_deleted(out: str, b: Broker, d: Path) -> None:
    assert out.strip() == "Deleted topic scratch."
    assert "scratch" not in b.topics()


SEG = "{data}/orders-0/00000000000000000000"
DUMP_TABLE: list[tuple[str, Check]] = [
    (
        "kafka-dump-log.sh --files " + SEG + ".log --print-data-log",
        _dumped,
    ),
    ("kafka-dump-log.sh --files " + SEG + ".index", _index_dumped),
    ("kafka-dump-log.sh --files " + SEG + ".index --verify-index-only", _index_verified),
]

# The table: commands exactly as Kafka users type them, in order (later rows see earlier effects).
TABLE: list[tuple[str, Check]] = [
    (
        "kafka-topics.sh --bootstrap-server localhost:9092 --create --topic orders --partitions 3 "
        "--replication-factor 1 --config retention.ms=86400000",
        _created,
    ),
    ("kafka-topics.sh --bootstrap-server localhost:9092 --list", _listed),
    ("kafka-topics.sh --bootstrap-server localhost:9092 --describe --topic orders", _described),
    (
        "kafka-configs.sh --bootstrap-server localhost:9092 --entity-type topics "
        "--entity-name orders --alter --add-config retention.ms=2000",
        _config_altered,
    ),
    (
        "kafka-configs.sh --bootstrap-server localhost:9092 --entity-type topics "
        "--entity-name orders --describe",
        _config_described,
    ),
    (
        "kafka-topics.sh --bootstrap-server localhost:9092 --alter --topic orders --partitions 4",
        _partitions_altered,
    ),
    ("kafka-get-offsets.sh --bootstrap-server localhost:9092 --topic orders --time -1", _latest),
    (
        "kafka-get-offsets.sh --bootstrap-server localhost:9092 --topic orders --partitions 0 "
        "--time earliest",
        _earliest_p0,
    ),
    (
        "kafka-delete-records.sh --bootstrap-server localhost:9092 --offset-json-file {offsets}",
        _deleted_records,
    ),
    (
        "kafka-get-offsets.sh --bootstrap-server localhost:9092 --topic orders --partitions 0 "
        "--time -2",
        _earliest_after_delete,
    ),
    (
        "kafka-log-dirs.sh --bootstrap-server localhost:9092 --describe --topic-list orders",
        _log_dirs,
    ),
    (
        "kafka-topics.sh --bootstrap-server localhost:9092 --create --topic scratch --partitions 1 "
        "--replication-factor 1",
        lambda out, b, d: None,
    ),
    (
        "kafka-topics.sh --bootstrap-server localhost:9092 --delete --topic scratch",
        _topic_deleted,
    ),
    (
        "kafka-topics.sh --bootstrap-server localhost:9092 --delete --topic scratch --if-exists",
        lambda out, b, d: None,
    ),
]


def test_translate() -> None:
    assert translate(
        "kafka-topics.sh --bootstrap-server localhost:9092 --list --command-config {f}",
        "127.0.0.1:1",
        f="c.properties",
    ) == [
        "topics",
        "--bootstrap-server",
        "127.0.0.1:1",
        "--list",
        "--command-config",
        "c.properties",
    ]


def test_kafka_invocations(
    broker: Broker,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    offsets = tmp_path / "offsets.json"
    offsets.write_text(
        json.dumps({"partitions": [{"topic": "orders", "partition": 0, "offset": 2}], "version": 1})
    )
    paths = {"data": str(broker.data_dir), "offsets": str(offsets)}
    for command, check in TABLE:
        if command.startswith("kafka-get-offsets.sh") and "--time -1" in command:
            _produce(broker, "orders", [f"k{i}:v{i}" for i in range(5)], monkeypatch)
        code, out, err = run(broker, command, capsys, **paths)
        assert code == 0, (command, err)
        check(out, broker, broker.data_dir)


def test_json_output(broker: Broker, capsys: pytest.CaptureFixture[str]) -> None:
    bs = KAFKA_BOOTSTRAP
    assert (
        main(
            translate(
                f"kafka-topics.sh --bootstrap-server {bs} --create --topic js --partitions 2",
                broker.bootstrap_servers,
            )
        )
        == 0
    )
    code, out, _ = run(
        broker,
        f"kafka-topics.sh --bootstrap-server {bs} --describe --topic js --output json",
        capsys,
    )
    (doc,) = json.loads(out)
    assert code == 0 and doc["topic"] == "js" and doc["partitionCount"] == 2
    code, out, _ = run(
        broker, f"kafka-get-offsets.sh --bootstrap-server {bs} --topic js --output json", capsys
    )
    assert json.loads(out) == [
        {"topic": "js", "partition": 0, "offset": 0},
        {"topic": "js", "partition": 1, "offset": 0},
    ]
    code, out, _ = run(
        broker, f"kafka-topics.sh --bootstrap-server {bs} --list --output json", capsys
    )
    assert "js" in json.loads(out)


def test_short_forms_still_work(broker: Broker, capsys: pytest.CaptureFixture[str]) -> None:
    bs = ["--bootstrap-server", broker.bootstrap_servers]
    assert main(["topics", *bs, "create", "short", "--partitions", "2"]) == 0
    assert main(["topics", *bs, "describe", "short"]) == 0
    assert "PartitionCount: 2" in capsys.readouterr().out
    assert main(["topics", *bs, "alter", "short", "--config", "retention.ms=5000"]) == 0
    assert main(["topics", *bs, "delete", "short"]) == 0


def test_users_and_clients(broker: Broker, capsys: pytest.CaptureFixture[str]) -> None:
    bs = KAFKA_BOOTSTRAP
    code, out, err = run(
        broker,
        f"kafka-configs.sh --bootstrap-server {bs} --alter --add-config "
        "'SCRAM-SHA-256=[iterations=8192,password=alice-secret],producer_byte_rate=1024' "
        "--entity-type users --entity-name alice",
        capsys,
    )
    assert code == 0, err
    code, out, err = run(
        broker,
        f"kafka-configs.sh --bootstrap-server {bs} --describe --entity-type users "
        "--entity-name alice",
        capsys,
    )
    assert out.splitlines() == [
        "Quota configs for user-principal 'alice' are producer_byte_rate=1024.0",
        "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192",
    ]
    code, out, err = run(
        broker,
        f"kafka-configs.sh --bootstrap-server {bs} --alter --add-config consumer_byte_rate=2048 "
        "--entity-type clients --entity-default",
        capsys,
    )
    assert code == 0, err
    code, out, err = run(
        broker,
        f"kafka-configs.sh --bootstrap-server {bs} --describe --entity-type clients "
        "--entity-default",
        capsys,
    )
    assert out.strip() == "Quota configs for the default client-id are consumer_byte_rate=2048.0"


def test_brokers_and_groups(broker: Broker, capsys: pytest.CaptureFixture[str]) -> None:
    bs = KAFKA_BOOTSTRAP
    for command in (
        f"kafka-configs.sh --bootstrap-server {bs} --entity-type brokers --entity-name 0 "
        "--alter --add-config log.cleaner.threads=2",
        f"kafka-configs.sh --bootstrap-server {bs} --entity-type groups --entity-name g1 "
        "--alter --add-config consumer.session.timeout.ms=50000",
    ):
        code, out, err = run(broker, command, capsys)
        assert code == 0, err
    code, out, _ = run(
        broker,
        f"kafka-configs.sh --bootstrap-server {bs} --entity-type brokers --entity-name 0 --describe",
        capsys,
    )
    assert out.splitlines()[0] == "Dynamic configs for broker 0 are:"
    assert "  log.cleaner.threads=2 sensitive=false" in out
    code, out, _ = run(
        broker,
        f"kafka-configs.sh --bootstrap-server {bs} --entity-type groups --entity-name g1 --describe",
        capsys,
    )
    assert "  consumer.session.timeout.ms=50000 sensitive=false" in out


def test_command_config(broker: Broker, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    props = tmp_path / "client.properties"
    props.write_text("# plain listener\nsecurity.protocol=PLAINTEXT\n")
    code, _, err = run(
        broker,
        "kafka-topics.sh --bootstrap-server localhost:9092 --list --command-config {props}",
        capsys,
        props=str(props),
    )
    assert code == 0, err
    props.write_text("security.protocol=SASL_SSL\n")
    code, _, err = run(
        broker,
        "kafka-topics.sh --bootstrap-server localhost:9092 --list --command-config {props}",
        capsys,
        props=str(props),
    )
    assert code == 2 and "SASL_SSL" in err


BAD = [
    (
        "kafka-topics.sh --bootstrap-server localhost:9092 --describe --topic no-such-topic",
        "does not exist",
    ),
    (
        "kafka-topics.sh --bootstrap-server localhost:9092 --create --topic dup "
        "--partitions 1 --replication-factor 1",
        "already exists",
    ),
    (
        "kafka-topics.sh --bootstrap-server localhost:9092 --create --topic badcfg --config retention.ms",
        "--config expects key=value",
    ),
    ("kafka-topics.sh --bootstrap-server 127.0.0.1:1 --list", "cannot connect to 127.0.0.1:1"),
    (
        "kafka-topics.sh --bootstrap-server localhost:9092 --delete --topic no-such-topic",
        "does not exist",
    ),
    (
        "kafka-configs.sh --bootstrap-server localhost:9092 --entity-type topics "
        "--entity-name no-such-topic --describe",
        "does not exist",
    ),
    (
        "kafka-configs.sh --bootstrap-server localhost:9092 --entity-type topics "
        "--entity-name dup --alter --add-config retention.ms",
        "--add-config expects",
    ),
    (
        "kafka-get-offsets.sh --bootstrap-server localhost:9092 --topic no-such-topic",
        "does not exist",
    ),
    ("kafka-get-offsets.sh --bootstrap-server localhost:9092 --time yesterday", "--time"),
    (
        "kafka-delete-records.sh --bootstrap-server localhost:9092 --offset-json-file /no/such.json",
        "cannot read",
    ),
    ("kafka-dump-log.sh --files /no/such/00000000000000000000.log", "does not exist"),
    (
        "kafka-configs.sh --bootstrap-server 127.0.0.1:1 --entity-type topics --describe",
        "cannot connect",
    ),
]


@pytest.mark.parametrize(("command", "message"), BAD)
def test_bad_invocations(
    broker: Broker, command: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    if "--topic dup" in command or "--entity-name dup" in command:
        broker.create_topic("dup") if "dup" not in broker.topics() else None
    code, _, err = run(broker, command, capsys)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], err


def test_dump_log_of_a_stopped_broker(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """kafka-dump-log.sh reads segment files directly: the broker that wrote them has stopped."""
    with Broker(tmp_path) as b:
        b.create_topic("orders", 1, index_interval_bytes=1)
        _produce(b, "orders", [f"k{i}:v{i}" for i in range(5)], monkeypatch)
    paths = {"data": str(tmp_path)}
    for command, check in DUMP_TABLE:
        capsys.readouterr()
        code = main(translate(command, "unused:1", **paths))
        out, err = capsys.readouterr()
        assert code == 0, (command, err)
        check(out, b, tmp_path)
    index = Path(SEG.format(**paths) + ".index")
    entries = index.read_bytes()
    index.write_bytes(entries[:4] + (12345).to_bytes(4, "big") + entries[8:])  # a bad position
    code = main(
        translate("kafka-dump-log.sh --files " + SEG + ".index --verify-index-only", "", **paths)
    )
    out = capsys.readouterr().out
    assert code == 2
    assert f"Mismatches in {index}:" in out
    assert "  Index position: 12345 has no batch in the log" in out


def test_command_config_logs_in_to_a_sasl_listener(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    jaas = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="admin" password="admin-secret" user_admin="admin-secret";'
    )
    sasl = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
    }
    props = tmp_path / "admin.properties"
    props.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\\n"
        '    username="admin" password="admin-secret";\n'
    )
    with Broker(tmp_path / "data", config=sasl) as b:
        for command in (
            "kafka-topics.sh --bootstrap-server localhost:9092 --command-config {props} "
            "--create --topic secured --partitions 2 --replication-factor 1",
            "kafka-get-offsets.sh --bootstrap-server localhost:9092 --command-config {props} "
            "--topic secured",
        ):
            code, out, err = run(b, command, capsys, props=str(props))
            assert code == 0, err
        assert out.splitlines() == ["secured:0:0", "secured:1:0"]
        props.write_text(props.read_text().replace('password="admin-secret"', 'password="no"'))
        code, _, err = run(
            b,
            "kafka-topics.sh --bootstrap-server localhost:9092 --command-config {props} --list",
            capsys,
            props=str(props),
        )
        assert code == 2 and err.startswith("error: SASL authentication failed")


def test_describe_takes_a_regular_expression(
    broker: Broker, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("rx-a", "rx-b", "other"):
        broker.create_topic(name, 1)
    code, out, _ = run(
        broker,
        "kafka-topics.sh --bootstrap-server localhost:9092 --describe --topic 'rx-.*'",
        capsys,
    )
    assert code == 0
    assert [line.split("\t")[0] for line in out.splitlines() if line.startswith("Topic:")] == [
        "Topic: rx-a",
        "Topic: rx-b",
    ]


@pytest.mark.parametrize(
    "command",
    [
        "kafka-topics.sh --bootstrap-server localhost:9092 --create --topic x --partitions three",
        "kafka-get-offsets.sh --bootstrap-server localhost:9092 --topic x --output yaml",
        "kafka-dump-log.sh --print-data-log",
    ],
)
def test_usage_errors_are_one_line(
    broker: Broker, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        main(translate(command, broker.bootstrap_servers))
    err = capsys.readouterr().err
    assert exc.value.code == 2
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: "), err


# the client tools' names differ from kafkalite's subcommands
TOOL_NAMES = {
    "console-producer": ["produce"],
    "console-consumer": ["consume"],
    "consumer-groups": ["groups"],
    "producer-perf-test": ["perf", "produce"],
    "consumer-perf-test": ["perf", "consume"],
}


def test_client_tools_and_consumer_groups(
    broker: Broker, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def kafka(command: str, stdin: str = "") -> tuple[int, str, str]:
        words = translate(command, broker.bootstrap_servers)
        words = [*TOOL_NAMES.get(words[0], [words[0]]), *words[1:]]
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
        capsys.readouterr()
        code = main(words)
        out, err = capsys.readouterr()
        assert "Traceback" not in out + err
        return code, out, err

    bs = "--bootstrap-server localhost:9092"
    code, _, err = kafka(
        f"kafka-console-producer.sh {bs} --topic gt --property parse.key=true "
        "--property key.separator=: --producer-property acks=all",
        "k0:v0\nk1:v1\nk2:v2\n",
    )
    assert code == 0 and "3 records sent, 0 failed" in err
    code, out, err = kafka(
        f"kafka-console-consumer.sh {bs} --topic gt --group cg --from-beginning "
        "--max-messages 3 --property print.key=true"
    )
    assert code == 0 and out.splitlines() == ["k0\tv0", "k1\tv1", "k2\tv2"], out
    assert "Processed a total of 3 messages" in err
    code, out, _ = kafka(f"kafka-consumer-groups.sh {bs} --list")
    assert code == 0 and "cg" in out.split()
    code, out, _ = kafka(f"kafka-consumer-groups.sh {bs} --describe --group cg --offsets")
    assert code == 0 and "gt" in out and "│" not in out  # plain text when piped
    code, out, _ = kafka(f"kafka-consumer-groups.sh {bs} --describe --group cg --output json")
    doc = json.loads(out)
    rows = [r for t in doc["tables"] for r in t["rows"]]
    assert {(r["TOPIC"], r["LAG"]) for r in rows if "LAG" in r} == {("gt", 0)}
    assert any("cg" in m for m in doc["messages"])
    code, out, _ = kafka(
        f"kafka-consumer-groups.sh {bs} --reset-offsets --group cg --topic gt --to-earliest "
        "--execute"
    )
    assert code == 0, out
    code, out, _ = kafka(
        f"kafka-console-consumer.sh {bs} --topic gt --group cg --max-messages 3 --timeout-ms 5000"
    )
    assert out.splitlines() == ["v0", "v1", "v2"], out  # read again from the reset offsets
