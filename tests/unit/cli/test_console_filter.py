"""`kafkalite consume --filter` (issue 35): only matching records, and one clear error for a bad one."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from kafkalite.cli.main import main
from kafkalite.client import KafkaProducer
from kafkalite.testing import Broker


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    with Broker(tmp_path_factory.mktemp("console-filter")) as b:
        yield b


def test_consume_filter(broker: Broker, capsys: pytest.CaptureFixture[str]) -> None:
    bs = broker.bootstrap_servers
    broker.create_topic("cf", 1)
    with KafkaProducer(bootstrap_servers=bs) as p:
        for i in range(50):
            p.send("cf", b"v%d" % i, key=b"k%d" % (i % 5), headers=[("n", b"%d" % i)])
        p.flush(20)
    capsys.readouterr()
    argv = ["consume", "--bootstrap-server", bs, "--topic", "cf", "--from-beginning"]
    expr = "key = 'k2' AND headers.n < 30"
    assert main([*argv, "--output", "json", "--filter", expr, "--max-messages", "6"]) == 0
    got = [json.loads(line)["offset"] for line in capsys.readouterr().out.splitlines()]
    assert got == [2, 7, 12, 17, 22, 27]
    assert main([*argv, "--filter", "key = ", "--max-messages", "1"]) != 0
    err = capsys.readouterr().err
    assert "invalid --filter" in err and "expected a literal" in err and "Traceback" not in err
