"""Every listing takes `--output json`: ACLs, SCRAM users, client quotas and transactions as one JSON
document on stdout, against an embedded broker with an authorizer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kafkalite.cli.main import main
from kafkalite.testing import Broker


def test_listings_as_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = {
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:ANONYMOUS",
    }
    with Broker(tmp_path, config=config) as b:
        bs = ["--bootstrap-server", b.bootstrap_servers]

        def listed(*argv: str) -> object:
            capsys.readouterr()
            assert main([*argv[:2], *bs, *argv[2:], "--output", "json"]) == 0
            return json.loads(capsys.readouterr().out)

        assert main(["acls", "add", *bs, "--allow-principal", "User:alice", "--operation",
                     "Read", "--topic", "orders"]) == 0  # fmt: skip
        acls = listed("acls", "list")
        assert acls == [
            {
                "resource_type": "TOPIC",
                "resource_name": "orders",
                "pattern_type": "LITERAL",
                "principal": "User:alice",
                "host": "*",
                "operation": "READ",
                "permission_type": "ALLOW",
            }
        ]
        assert main(["users", "add", *bs, "carol", "--password", "pw-123456",
                     "--mechanism", "SCRAM-SHA-512"]) == 0  # fmt: skip
        users = listed("users", "list")
        assert users == [
            {"user": "carol", "mechanisms": [{"mechanism": "SCRAM-SHA-512", "iterations": 4096}]}
        ]
        assert main(["quotas", "set", *bs, "--user", "alice", "producer_byte_rate=1024"]) == 0
        quotas = listed("quotas", "list")
        assert quotas == [
            {
                "entity": [{"type": "user", "name": "alice"}],
                "quotas": {"producer_byte_rate": 1024.0},
            }
        ]
        assert listed("transactions", "list") == []
