"""`kafkalite acls add|list|remove` against an embedded broker with an authorizer."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkalite.cli.main import main
from kafkalite.testing import Broker


def test_add_list_remove(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = {
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:ANONYMOUS",
    }
    with Broker(tmp_path, config=config) as b:
        bs = ["--bootstrap-server", b.bootstrap_servers]
        assert (
            main(
                [
                    *("acls", "add", *bs, "--allow-principal", "User:alice"),
                    *("--operation", "Read", "--operation", "IdempotentWrite"),
                    *("--topic", "orders", "--resource-pattern-type", "prefixed"),
                ]
            )
            == 0
        )
        assert (
            main(
                [
                    "acls",
                    "add",
                    *bs,
                    "--deny-principal",
                    "User:bob",
                    "--operation",
                    "All",
                    "--cluster",
                ]
            )
            == 0
        )
        capsys.readouterr()
        assert main(["acls", "list", *bs]) == 0
        out = capsys.readouterr().out
        assert "resourceType=TOPIC, name=orders, patternType=PREFIXED" in out
        assert (
            "(principal=User:alice, host=*, operation=IDEMPOTENT_WRITE, permissionType=ALLOW)"
            in out
        )
        assert "resourceType=CLUSTER, name=kafka-cluster" in out
        assert main(["acls", "remove", *bs, "--topic", "orders"]) == 0
        assert out.count("Removed") == 0 and "Removed" in capsys.readouterr().out
        assert main(["acls", "list", *bs, "--topic", "orders"]) == 0
        assert "orders" not in capsys.readouterr().out
        assert len(b.server.authorizer.index) == 1
    # without an authorizer the broker says so
    with Broker(tmp_path / "plain") as b:
        assert main(["acls", "list", "--bootstrap-server", b.bootstrap_servers]) == 2
        assert "SECURITY_DISABLED" in capsys.readouterr().err
