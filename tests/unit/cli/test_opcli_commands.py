"""`kafkalite reassign`, `brokers` and `log-dirs describe` against one embedded broker: their output, and
bad input (missing or malformed files, unknown brokers, topics, partitions) as one error line, no traceback.
"""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkalite.cli import reassign
from kafkalite.cli import reassign_plan as plan
from kafkalite.cli.main import main
from kafkalite.cli.wire import CliError
from kafkalite.testing import Broker

TOPIC = "ops"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    with Broker(tmp_path_factory.mktemp("opcli")) as b:
        assert main(["topics", "create", TOPIC, "--partitions", "3", "--bootstrap-server",
                     b.bootstrap_servers]) == 0  # fmt: skip
        yield b


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def one_error(capsys: pytest.CaptureFixture[str], code: int, *argv: str) -> str:
    got, out, err = run(capsys, *argv)
    assert got == code, (argv, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def test_generate_prints_current_and_proposed_in_kafkas_json(
    broker: Broker, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "topics.json"
    f.write_text(json.dumps({"topics": [{"topic": TOPIC}], "version": 1}))
    code, out, _ = run(capsys, "reassign", "--bootstrap-server", broker.bootstrap_servers,
                       "--generate", "--topics-to-move-json-file", str(f), "--broker-list", "0")  # fmt: skip
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "Current partition replica assignment"
    assert lines[3] == "Proposed partition reassignment configuration"
    current, proposed = json.loads(lines[1]), json.loads(lines[4])
    assert (
        current
        == proposed
        == {
            "version": 1,
            "partitions": [
                {"topic": TOPIC, "partition": p, "replicas": [0], "log_dirs": ["any"]}
                for p in range(3)
            ],
        }
    )


def test_reassign_bad_input_is_one_line_and_exit_2(
    broker: Broker, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bs = broker.bootstrap_servers
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"topics": [{"topic": TOPIC}], "version": 1}))
    gen = ["reassign", "generate", "--bootstrap-server", bs, "--topics-to-move-json-file"]
    assert "cannot read" in one_error(capsys, 2, *gen, str(tmp_path / "nope.json"),
                                      "--broker-list", "0")  # fmt: skip
    assert "unknown broker id(s) 7" in one_error(
        capsys, 2, *gen, str(topics), "--broker-list", "0,7"
    )
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert "not valid JSON" in one_error(capsys, 2, *gen, str(bad), "--broker-list", "0")
    ghost = tmp_path / "ghost.json"
    ghost.write_text(json.dumps({"topics": [{"topic": "ghost"}], "version": 1}))
    assert "topic ghost does not exist" in one_error(
        capsys, 2, *gen, str(ghost), "--broker-list", "0"
    )

    def plan_file(name: str, parts: list[dict[str, Any]]) -> str:
        p = tmp_path / name
        p.write_text(json.dumps({"version": 1, "partitions": parts}))
        return str(p)

    exe = ["reassign", "execute", "--bootstrap-server", bs, "--reassignment-json-file"]
    no_part = plan_file("p1.json", [{"topic": TOPIC, "partition": 9, "replicas": [0]}])
    assert "UNKNOWN_TOPIC_OR_PARTITION" in one_error(capsys, 2, *exe, no_part)
    no_broker = plan_file("p2.json", [{"topic": TOPIC, "partition": 0, "replicas": [0, 5]}])
    assert "unknown broker id(s) 5" in one_error(capsys, 2, *exe, no_broker)
    dup = plan_file("p3.json", [{"topic": TOPIC, "partition": 0, "replicas": [0, 0]}])
    assert "duplicates" in one_error(capsys, 2, *exe, dup)
    assert "duplicates" in one_error(capsys, 2, "reassign", "verify", "--bootstrap-server",
                                     "127.0.0.1:1", "--reassignment-json-file", dup)  # fmt: skip
    fine = plan_file("p4.json", [{"topic": TOPIC, "partition": 0, "replicas": [0]}])
    # one broker serves KIP-455 as a one-broker Kafka does: the replica set it has moves nothing
    said = {}
    for action in ("execute", "verify", "cancel"):
        code, out, err = run(capsys, "reassign", action, "--bootstrap-server", bs,
                             "--reassignment-json-file", fine)  # fmt: skip
        said[action] = (code, out, err)
    assert said["execute"][0] == 0 and "Successfully started" in said["execute"][1], said
    assert said["verify"][0] == 0 and "complete" in said["verify"][1], said
    assert said["cancel"][0] == 0 and "are active" in said["cancel"][1], said


def test_brokers_list_and_describe(broker: Broker, capsys: pytest.CaptureFixture[str]) -> None:
    bs = broker.bootstrap_servers
    code, out, _ = run(capsys, "brokers", "list", "--bootstrap-server", bs, "--output", "json")
    (b,) = json.loads(out)
    assert code == 0 and b["id"] == 0 and b["controller"] and b["alive"]
    assert f"{b['host']}:{b['port']}" == bs
    assert b["leaders"] == b["replicas"] >= 3 and b["underReplicated"] == 0
    code, out, _ = run(capsys, "brokers", "list", "--bootstrap-server", bs)
    header, row = out.splitlines()[:2]
    assert header.split("\t") == [
        "ID", "ADDRESS", "RACK", "CONTROLLER", "LEADERS", "REPLICAS", "UNDER-REPLICATED"
    ]  # fmt: skip
    assert row.split("\t")[:4] == ["0", bs, "-", "*"]
    code, out, _ = run(capsys, "brokers", "describe", "--bootstrap-server", bs, "--broker", "0")
    assert code == 0 and out.startswith(f"Broker 0 (controller)\tAddress: {bs}\tRack: -")
    assert f"\tTopic: {TOPIC}\tleader: 0-2" in out.splitlines()
    code, out, _ = run(capsys, "brokers", "describe", "--bootstrap-server", bs, "--output", "json")
    parts = [p for p in json.loads(out)[0]["partitions"] if p["topic"] == TOPIC]
    assert [(p["partition"], p["leader"], p["inIsr"]) for p in parts] == [
        (i, True, True) for i in range(3)
    ]
    assert "broker 4 is not in the cluster" in one_error(
        capsys, 2, "brokers", "describe", "--bootstrap-server", bs, "--broker", "4"
    )


def test_log_dirs_describe_as_a_table_and_as_json(
    broker: Broker, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    bs = broker.bootstrap_servers
    monkeypatch.setattr(sys, "stdin", io.StringIO("a\nb\nc\n"))
    assert main(["produce", "--bootstrap-server", bs, "--topic", TOPIC, "--partition", "1"]) == 0
    code, out, _ = run(
        capsys, "log-dirs", "describe", "--bootstrap-server", bs, "--topic-list", TOPIC
    )
    lines = [ln.split("\t") for ln in out.splitlines()]
    assert code == 0 and lines[0] == [
        "BROKER", "LOG-DIR", "ERROR", "PARTITION", "SIZE", "OFFSET-LAG", "FUTURE"
    ]  # fmt: skip
    rows = {r[3]: r for r in lines[1:]}
    assert sorted(rows) == [f"{TOPIC}-{p}" for p in range(3)]
    assert int(rows[f"{TOPIC}-1"][4]) > 0 and rows[f"{TOPIC}-0"][4] == "0"
    assert rows[f"{TOPIC}-1"][0] == "0" and rows[f"{TOPIC}-1"][2] == "-"
    code, out, _ = run(capsys, "log-dirs", "describe", "--bootstrap-server", bs, "--json",
                       "--broker-list", "0", "--topic-list", TOPIC)  # fmt: skip
    doc = json.loads(out)
    assert doc["version"] == 1 and [b["broker"] for b in doc["brokers"]] == [0]
    (d,) = doc["brokers"][0]["logDirs"]
    assert d["error"] is None and len(d["partitions"]) == 3
    ld = ["log-dirs", "describe", "--bootstrap-server", bs]
    assert "no broker 3" in one_error(capsys, 2, *ld, "--broker-list", "3")
    assert "ghost" in one_error(capsys, 2, *ld, "--topic-list", "ghost")
    assert "needs describe" in one_error(capsys, 2, "log-dirs", "--bootstrap-server", bs)


def test_watch_shows_each_adding_replica_until_no_move_is_left(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    rounds = [
        plan.progress_rows(
            {("t", 0): [4]},
            {("t", 0): 1},
            {("t", 0): [1]},
            {(1, ("t", 0)): 2048, (4, ("t", 0)): 512},
        ),
        plan.progress_rows(
            {("t", 0): [4]},
            {("t", 0): 1},
            {("t", 0): [1, 4]},
            {(1, ("t", 0)): 2048, (4, ("t", 0)): 2048},
        ),
        [],  # still listed, only removing replicas
        None,
    ]
    seen: list[set[Any] | None] = []

    def fake_snapshot(cluster: Any, only: set[Any] | None) -> list[plan.ReplicaProgress] | None:
        seen.append(only)
        return rounds.pop(0)

    monkeypatch.setattr(reassign, "snapshot", fake_snapshot)
    reassign.watch(object(), {("t", 0): [2, 4]}, 0.0, None)  # type: ignore[arg-type]
    out = capsys.readouterr().out.splitlines()
    assert seen == [{("t", 0)}] * 4
    assert [ln for ln in out if ln.startswith("  ")] == [
        "  t-0 replica 4 (leader 1): copied 512 B of 2.0 KiB (25%), lag 1.5 KiB, in ISR: no",
        "  t-0 replica 4 (leader 1): copied 2.0 KiB of 2.0 KiB (100%), lag 0 B, in ISR: yes",
        "  (moves in flight remove replicas only)",
    ]
    assert out[-1].startswith("No reassignment of these partitions in progress after")
    rounds[:] = [plan.progress_rows({("t", 0): [4]}, {("t", 0): 1}, {}, {})] * 5
    with pytest.raises(CliError, match="still in progress after 0 s"):
        reassign.watch(object(), {("t", 0): [4]}, 0.0, 0.0)  # type: ignore[arg-type]


class _Obj:
    def __init__(self, **kw: Any) -> None:
        self.__dict__.update(kw)


class _FakeClient:
    """Answers IncrementalAlterConfigs with NO_ERROR (or `refuse`) and DescribeConfigs with `dynamic`."""

    def __init__(self, name: str, log: list[Any], dynamic: dict[str, int], refuse: bool = False):
        self.name, self.log, self.dynamic, self.refuse = name, log, dynamic, refuse

    def send(self, req: Any) -> Any:
        if req.API_KEY == 44:
            (res,) = req.resources
            ops = [(c.name, c.config_operation, c.value) for c in res.configs]
            self.log.append((self.name, res.resource_type, res.resource_name, ops))
            code = 40 if self.refuse else 0
            return _Obj(responses=[_Obj(error_code=code, error_message="nope" if code else None)])
        assert req.API_KEY == 32
        (res,) = req.resources
        configs = [_Obj(name=n, config_source=s) for n, s in self.dynamic.items()]
        return _Obj(results=[_Obj(error_code=0, configs=configs)])


class _FakeCluster:
    def __init__(self, log: list[Any], dynamic: dict[str, int], refuse: bool = False) -> None:
        self.bootstrap = _FakeClient("bootstrap", log, dynamic, refuse)
        self.clients = {b: _FakeClient(f"broker{b}", log, dynamic, refuse) for b in (1, 2, 3, 4)}

    def nodes(self) -> dict[int, tuple[str, int]]:
        return {b: ("h", b) for b in self.clients}

    def node(self, b: int) -> _FakeClient:
        return self.clients[b]


def test_throttles_are_set_where_kafka_sets_them_and_cleared_only_where_set(
    capsys: pytest.CaptureFixture[str],
) -> None:
    log: list[Any] = []
    current = {("t", 0): [1, 2], ("t", 1): [2, 3]}
    target = {("t", 0): [2, 4], ("t", 1): [2, 3]}
    reassign.set_throttles(_FakeCluster(log, {}), current, target, 5000)  # type: ignore[arg-type]
    assert log == [
        ("bootstrap", 2, "t", [(plan.LEADER_REPLICAS, 0, "0:1,0:2"), (plan.FOLLOWER_REPLICAS, 0, "0:4")]),
        *[
            (f"broker{b}", 4, str(b), [(plan.LEADER_RATE, 0, "5000"), (plan.FOLLOWER_RATE, 0, "5000")])
            for b in (1, 2, 4)
        ],
    ]  # fmt: skip
    assert "The inter-broker throttle limit was set to 5000 B/s" in capsys.readouterr().out

    log.clear()  # a rate set on each broker (source 2) and the replicas on the topic (source 1)
    dynamic = {plan.LEADER_RATE: 2, plan.FOLLOWER_RATE: 3, plan.LEADER_REPLICAS: 1}
    reassign.clear_throttles(_FakeCluster(log, dynamic), ["t"])  # type: ignore[arg-type]
    assert log == [
        *[(f"broker{b}", 4, str(b), [(plan.LEADER_RATE, 1, None)]) for b in (1, 2, 3, 4)],
        ("bootstrap", 2, "t", [(plan.LEADER_REPLICAS, 1, None)]),
    ]
    assert capsys.readouterr().out.splitlines() == [
        "Clearing broker-level throttles on brokers 1,2,3,4",
        "Clearing topic-level throttles on topic t",
    ]
    log.clear()
    reassign.clear_throttles(_FakeCluster(log, {"retention.ms": 1}), ["t"])  # type: ignore[arg-type]
    assert log == [] and capsys.readouterr().out == ""
    with pytest.raises(CliError, match=r"configs of topic t: INVALID_CONFIG \(nope\)"):
        reassign.set_throttles(_FakeCluster(log, {}, refuse=True), current, target, 1)  # type: ignore[arg-type]


def test_the_terminal_view_is_a_rich_table_of_the_adding_replicas() -> None:
    from rich.console import Console

    rows = plan.progress_rows(
        {("t", 0): [4, 5]},
        {("t", 0): 1},
        {("t", 0): [1, 5]},
        {(1, ("t", 0)): 4 << 20, (4, ("t", 0)): 1 << 20, (5, ("t", 0)): 4 << 20},
    )
    console = Console(file=io.StringIO(), width=160, color_system=None)
    console.print(reassign._rich_view(rows, 3.0))
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert "Partition reassignment in progress (3 s)" in text
    lines = [ln for ln in text.splitlines() if "t-0" in ln]
    assert len(lines) == 2
    assert "1.0 MiB" in lines[0] and "3.0 MiB" in lines[0] and lines[0].rstrip(" │").endswith("no")
    assert lines[1].rstrip(" │").endswith("yes")
