"""`kafkalite leaders elect` (and Kafka's spelling `leader-election`) without a broker: the JSON file of
kafka-leader-election, the request it builds, and bad invocations as one-line errors with exit code 2.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkalite.cli.leaders import _request, read_election_json
from kafkalite.cli.main import main
from kafkalite.cli.wire import CliError


def test_reads_kafka_leader_election_json(tmp_path: Path) -> None:
    f = tmp_path / "p.json"
    f.write_text('{"partitions": [{"topic": "a", "partition": 1}, {"topic": "b", "partition": 0}]}')
    assert read_election_json(str(f)) == [("a", 1), ("b", 0)]


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("not json", "is not JSON"),
        ('{"partitions": {}}', "expected"),
        ('{"partitions": [{"topic": "a"}]}', "string topic and an int partition"),
        ('{"partitions": [{"topic": "a", "partition": true}]}', "string topic and an int"),
        (
            '{"partitions": [{"topic": "a", "partition": 1}, {"topic": "a", "partition": 1}]}',
            "duplicate partitions: a-1",
        ),
    ],
)
def test_refuses_bad_json(tmp_path: Path, text: str, why: str) -> None:
    f = tmp_path / "p.json"
    f.write_text(text)
    with pytest.raises(CliError, match=why):
        read_election_json(str(f))


def test_request_groups_partitions_by_topic_and_null_means_all() -> None:
    req = _request(1, [("a", 0), ("b", 2), ("a", 3)], 5000)
    assert req.election_type == 1 and req.timeout_ms == 5000
    assert [(t.topic, t.partitions) for t in req.topic_partitions] == [("a", [0, 3]), ("b", [2])]
    assert _request(0, None, 1).topic_partitions is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--topic", "a", "--all-topic-partitions"], "exactly one of"),
        ([], "exactly one of"),
        (["--partition", "1"], "--partition needs --topic"),
    ],
)
def test_bad_invocations(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    for command in (["leaders", "elect"], ["leader-election"]):
        argv = [*command, "--bootstrap-server", "127.0.0.1:1", "--election-type", "PREFERRED"]
        assert main([*argv, *args]) == 2
        assert message in capsys.readouterr().err


def test_an_unknown_election_type_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["leaders", "elect", "--election-type", "random", "--all-topic-partitions"])
    assert exc.value.code == 2
    assert "invalid choice" in capsys.readouterr().err
