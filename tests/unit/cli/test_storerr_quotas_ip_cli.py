"""`kafkalite quotas --ip / --ip-default` (KIP-612's ip entity, connection_creation_rate) against an
embedded broker: set, list, remove, and the combinations the broker refuses, refused with one line.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kafkalite.cli.main import main
from kafkalite.security.quota import QuotaEntity
from kafkalite.testing import Broker


def test_ip_set_list_remove(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with Broker(tmp_path) as b:
        bs = ["--bootstrap-server", b.bootstrap_servers]
        assert main(["quotas", "set", *bs, "--ip", "10.0.0.7", "connection_creation_rate=5"]) == 0
        assert "ip=10.0.0.7: done" in capsys.readouterr().out
        # Kafka's spelling of the default as an alias; IPv6 is kept in canonical form
        assert main(["quotas", "set", *bs, "--ip-defaults", "connection_creation_rate=100"]) == 0
        assert main(["quotas", "set", *bs, "--ip", "0:0::1", "connection_creation_rate=0"]) == 0
        assert main(["quotas", "set", *bs, "--user", "alice", "producer_byte_rate=1024"]) == 0
        known = b.server.client_quotas.entities()
        assert known[QuotaEntity(ip="10.0.0.7")] == {"connection_creation_rate": 5.0}
        assert known[QuotaEntity(ip="::1")] == {"connection_creation_rate": 0.0}
        capsys.readouterr()
        assert main(["quotas", "list", *bs, "--ip", "*"]) == 0
        out = capsys.readouterr().out.strip().splitlines()
        assert out == [
            "ip=10.0.0.7: connection_creation_rate=5",
            "ip=::1: connection_creation_rate=0",
        ]
        assert main(["quotas", "list", *bs, "--ip-default", "--output", "json"]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert doc == [
            {
                "entity": [{"type": "ip", "name": None}],
                "quotas": {"connection_creation_rate": 100.0},
            }
        ]
        assert main(["quotas", "list", *bs, "--ip", "::1"]) == 0
        assert capsys.readouterr().out.strip() == "ip=::1: connection_creation_rate=0"
        assert main(["quotas", "remove", *bs, "--ip", "10.0.0.7", "connection_creation_rate"]) == 0
        assert main(["quotas", "remove", *bs, "--ip-default", "connection_creation_rate"]) == 0
        capsys.readouterr()
        assert main(["quotas", "list", *bs, "--ip", "10.0.0.7"]) == 0
        assert capsys.readouterr().out.strip() == "no client quotas"
        assert QuotaEntity(ip="10.0.0.7") not in b.server.client_quotas.entities()


def test_ip_refusals_are_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with Broker(tmp_path) as b:
        bs = ["--bootstrap-server", b.bootstrap_servers]
        # an ip never stands beside a user or client id (Kafka: "IP entity should not be used ...")
        for extra in (["--user", "u"], ["--client-default"], ["--user-default"]):
            for verb in (["set"], ["list"]):
                args = ["quotas", *verb, *bs, "--ip", "10.0.0.1", *extra]
                if verb == ["set"]:
                    args.append("connection_creation_rate=1")
                assert main(args) != 0
                assert "cannot be combined" in capsys.readouterr().err
        assert main(["quotas", "list", *bs, "--ip-default", "--client-id", "c"]) != 0
        assert "cannot be combined" in capsys.readouterr().err
        # host names are not ip entities here
        assert main(["quotas", "set", *bs, "--ip", "db.example", "connection_creation_rate=1"]) != 0
        assert "not a valid IP address" in capsys.readouterr().err
        # the broker refuses client keys on an ip and the ip key on a user: its reason is shown
        assert main(["quotas", "set", *bs, "--ip", "10.0.0.1", "producer_byte_rate=1024"]) != 0
        err = capsys.readouterr().err
        assert "INVALID_REQUEST" in err and "connection_creation_rate" in err
        assert main(["quotas", "set", *bs, "--user", "u", "connection_creation_rate=1"]) != 0
        assert "quota of ip entities" in capsys.readouterr().err
        assert main(["quotas", "set", *bs, "--ip", "10.0.0.1", "connection_creation_rate=1.5"]) != 0
        assert "INT" in capsys.readouterr().err
        # --ip and --ip-default name one entity
        with pytest.raises(SystemExit):
            main(["quotas", "list", *bs, "--ip", "10.0.0.1", "--ip-default"])
        capsys.readouterr()
        assert b.server.client_quotas.entities() == {}
