"""`kafkalite quotas set|remove|list` against an embedded broker, and its refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkalite.cli.main import main
from kafkalite.testing import Broker


def test_set_list_remove(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with Broker(tmp_path) as b:
        bs = ["--bootstrap-server", b.bootstrap_servers]
        assert main(["quotas", "set", *bs, "--user", "alice", "producer_byte_rate=1048576"]) == 0
        assert (
            main(
                [
                    *("quotas", "set", *bs, "--user-default", "--client-id", "etl"),
                    *("consumer_byte_rate=2000000", "request_percentage=25.5"),
                ]
            )
            == 0
        )
        assert main(["quotas", "set", *bs, "--client-default", "request_percentage=50"]) == 0
        capsys.readouterr()
        assert main(["quotas", "list", *bs]) == 0
        out = capsys.readouterr().out
        assert "user=alice: producer_byte_rate=1.04858e+06" in out
        assert (
            "user=<default>, client-id=etl: consumer_byte_rate=2e+06, request_percentage=25.5"
            in out
        )
        assert "client-id=<default>: request_percentage=50" in out
        assert main(["quotas", "list", *bs, "--user", "*", "--strict"]) == 0
        assert capsys.readouterr().out.strip() == "user=alice: producer_byte_rate=1.04858e+06"
        assert main(["quotas", "remove", *bs, "--user", "alice", "producer_byte_rate"]) == 0
        capsys.readouterr()
        assert main(["quotas", "list", *bs, "--user", "alice"]) == 0
        assert capsys.readouterr().out.strip() == "no client quotas"
        assert b.server.client_quotas.produce.enabled is False


def test_refusals_are_one_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with Broker(tmp_path) as b:
        bs = ["--bootstrap-server", b.bootstrap_servers]
        assert main(["quotas", "set", *bs, "--user", "x", "producer_byte_rate=1.5"]) != 0
        assert "INVALID_REQUEST" in capsys.readouterr().err
        assert main(["quotas", "set", *bs, "--user", "x", "producer_byte_rate"]) != 0
        assert "KEY=NUMBER" in capsys.readouterr().err
        assert main(["quotas", "set", *bs, "producer_byte_rate=5"]) != 0
        assert "name a user" in capsys.readouterr().err
