"""Every `kafkalite` subcommand's error path against one embedded broker: a bad number, a missing topic, an
unknown group each give exactly one `error:` line on stderr and exit status 2 (the rule the README states).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkalite.cli.main import main
from kafkalite.testing import Broker

B = "{bs}"  # replaced by the broker's bootstrap servers
D = "{dir}"  # replaced by a scratch directory

# (subcommand, argv, a fragment of the one stderr line)
CASES: list[tuple[str, list[str], str]] = [
    ("serve", ["serve", "--log-level", "LOUD"], "--log-level LOUD"),
    ("serve", ["serve", "--listen", "127.0.0.1:notaport"], "notaport"),
    ("topics", ["topics", "--bootstrap-server", B, "--create", "--topic", "t", "--partitions", "x"], "invalid int value: 'x'"),
    ("topics", ["topics", "--bootstrap-server", B, "--describe", "--topic", "nosuch"], "nosuch"),
    ("topics", ["topics", "--bootstrap-server", B, "--delete", "--topic", "nosuch"], "nosuch"),
    ("cluster", ["cluster", "up", "--brokers", "three"], "invalid int value: 'three'"),
    ("cluster", ["cluster", "up", "--brokers", "1", "--override", "novalue"], "key=value"),
    ("produce", ["produce", "--bootstrap-server", B, "--topic", "t", "--partition", "x"], "invalid int value: 'x'"),
    ("produce", ["produce", "--bootstrap-server", B, "--topic", "exit-codes", "--file", f"{D}/lines.txt"], "lines.txt"),
    ("consume", ["consume", "--bootstrap-server", B, "--topic", "t", "--max-messages", "x"], "invalid int value: 'x'"),
    ("consume", ["consume", "--bootstrap-server", B, "--topic", "nosuch", "--timeout-ms", "500"], "nosuch"),
    ("groups", ["groups", "--bootstrap-server", B, "--describe", "--group", "nosuch"], "consumer group 'nosuch' does not exist"),
    ("groups", ["groups", "--bootstrap-server", B, "--delete", "--group", "nosuch"], "nosuch"),
    ("groups", ["groups", "--bootstrap-server", B, "--reset-offsets", "--group", "g", "--topic", "nosuch", "--to-earliest"], "nosuch"),
    ("groups", ["groups", "--bootstrap-server", B, "--reset-offsets", "--group", "g", "--all-topics", "--to-offset", "x"], "invalid int value: 'x'"),
    ("transactions", ["transactions", "--bootstrap-server", B, "describe", "--transactional-id", "nosuch"], "nosuch"),
    ("transactions", ["transactions", "--bootstrap-server", B, "abort", "--topic", "nosuch", "--partition", "x", "--start-offset", "0"], "invalid int value: 'x'"),
    ("pipeline", ["pipeline", "--events", "many"], "invalid int value: 'many'"),
    ("acls", ["acls", "list", "--bootstrap-server", B], "SECURITY_DISABLED"),
    ("users", ["users", "list", "--bootstrap-server", "localhost"], "host:port"),
    ("quotas", ["quotas", "set", "--bootstrap-server", B, "--user", "alice", "producer_byte_rate=fast"], "fast"),
    ("configs", ["configs", "--bootstrap-server", B, "--entity-type", "topics", "--entity-name", "nosuch", "--describe"], "nosuch"),
    ("configs", ["configs", "--bootstrap-server", B, "--entity-type", "groups", "--entity-name", "nosuch", "--alter", "--add-config", "consumer.session.timeout.ms=x"], "consumer.session.timeout.ms"),
    ("leaders", ["leaders", "elect", "--bootstrap-server", B, "--election-type", "preferred", "--topic", "nosuch", "--partition", "x"], "invalid int value: 'x'"),
    ("leaders", ["leaders", "elect", "--bootstrap-server", B, "--election-type", "preferred", "--path-to-json-file", f"{D}/missing.json"], "missing.json"),
    ("get-offsets", ["get-offsets", "--bootstrap-server", B, "--topic", "nosuch"], "nosuch"),
    ("get-offsets", ["get-offsets", "--bootstrap-server", B, "--topic", "exit-codes", "--time", "yesterday"], "yesterday"),
    ("delete-records", ["delete-records", "--bootstrap-server", B, "--offset-json-file", f"{D}/missing.json"], "missing.json"),
    ("log-dirs", ["log-dirs", "--bootstrap-server", B, "--describe", "--broker-list", "x"], "x"),
    ("reassign", ["reassign", "verify", "--bootstrap-server", B, "--reassignment-json-file", f"{D}/missing.json"], "missing.json"),
    ("brokers", ["brokers", "describe", "--bootstrap-server", B, "--broker", "x"], "invalid int value: 'x'"),
    ("brokers", ["brokers", "describe", "--bootstrap-server", B, "--broker", "7"], "7"),
    ("dump-log", ["dump-log", "--files", f"{D}/00000000000000000000.log"], "00000000000000000000.log"),
    ("perf", ["perf", "produce", "--bootstrap-server", B, "--topic", "t", "--num-records", "x", "--record-size", "10", "--throughput", "-1"], "invalid int value: 'x'"),
    ("schemas", ["schemas", "list", "--registry-url", "http://127.0.0.1:1"], "cannot reach the registry"),
    ("schemas", ["schemas", "register", "s", "--registry-url", "http://127.0.0.1:1"], "exactly one of --schema"),
    ("perf", ["perf", "consume", "--bootstrap-server", B, "--topic", "nosuch", "--messages", "1", "--timeout", "500"], "no record for 500 ms"),
]  # fmt: skip


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    with Broker(tmp_path_factory.mktemp("exit-codes"), group_initial_rebalance_delay_ms=0) as b:
        b.create_topic("exit-codes", 1)
        yield b


def test_every_subcommand_has_an_error_case() -> None:
    from kafkalite.cli.main import build_parser

    parser = build_parser()
    (sub,) = [a for a in parser._actions if a.dest == "command"]
    named = set(sub.choices) - {"leader-election"}  # an alias of `leaders elect`
    assert named <= {name for name, _, _ in CASES}


@pytest.mark.parametrize(
    ("command", "argv", "said"), CASES, ids=[" ".join(c[1][:2]) for c in CASES]
)
def test_an_error_is_one_line_and_exit_code_2(
    broker: Broker,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    command: str,
    argv: list[str],
    said: str,
) -> None:
    args = [a.replace(B, broker.bootstrap_servers).replace(D, str(tmp_path)) for a in argv]
    try:
        code = main(args)
    except SystemExit as exc:  # argparse's usage errors
        code = exc.code if isinstance(exc.code, int) else 2
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith("Processed a total")]
    assert code == 2, (args, code, err)
    assert len(lines) == 1, err
    assert lines[0].startswith(("error: ", "kafkalite: ")) and said in lines[0], err
    assert "Traceback" not in err
