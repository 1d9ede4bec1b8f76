"""The authorizer is on only for Kafka's authorizer class names; super.users and
allow.everyone.if.no.acl.found are read as Kafka reads them."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkalite.broker.config.broker_config import BrokerConfig, ConfigError
from kafkalite.broker.security.authorizer import (
    AUTHORIZER_CLASS_NAMES,
    Authorizer,
    parse_super_users,
)
from kafkalite.cluster.metadata import LocalMetadataStore
from kafkalite.security.acl import AclOperation, ResourceType
from kafkalite.security.principal import ANONYMOUS, KafkaPrincipal


def _config(tmp_path: Path, **props: str) -> BrokerConfig:
    return BrokerConfig({"log.dirs": str(tmp_path), **props})


def test_off_by_default(tmp_path: Path) -> None:
    assert Authorizer.from_config(_config(tmp_path), LocalMetadataStore(tmp_path)) is None


@pytest.mark.parametrize("name", sorted(AUTHORIZER_CLASS_NAMES))
def test_kafkas_names_turn_it_on(tmp_path: Path, name: str) -> None:
    cfg = _config(
        tmp_path,
        **{
            "authorizer.class.name": name,
            "super.users": "User:admin; User:CN=broker,O=x",
            "allow.everyone.if.no.acl.found": "true",
        },
    )
    a = Authorizer.from_config(cfg, LocalMetadataStore(tmp_path))
    assert a is not None
    assert a.super_users == {KafkaPrincipal.user("admin"), KafkaPrincipal.user("CN=broker,O=x")}
    assert a.allow_everyone_if_no_acl_found
    # no ACL at all: allow.everyone decides; a super user may do anything
    assert a.authorize(ANONYMOUS, "1.2.3.4", AclOperation.WRITE, ResourceType.TOPIC, "t")
    assert a.authorize_any(ANONYMOUS, "1.2.3.4", AclOperation.WRITE, ResourceType.TOPIC)


def test_other_names_fail(tmp_path: Path) -> None:
    cfg = _config(tmp_path, **{"authorizer.class.name": "org.example.MyAuthorizer"})
    with pytest.raises(ConfigError, match=r"org\.example\.MyAuthorizer"):
        Authorizer.from_config(cfg, LocalMetadataStore(tmp_path))


def test_bad_super_user_fails() -> None:
    with pytest.raises(ConfigError, match=r"super\.users"):
        parse_super_users("User:a;admin")
