"""The Schema Registry on a broker with SASL users and an authorizer: HTTP Basic (401 otherwise), and
subjects checked as the topics their names say (403 with Confluent's 40301), global settings as CLUSTER.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from rest_http import call

from kafkalite.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    ResourcePattern,
    ResourceType,
)
from kafkalite.testing import Broker

pytest.importorskip("fastavro")

JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-pw" user_admin="admin-pw" user_alice="alice-pw";'
)
ADMIN = ("admin", "admin-pw")
ALICE = ("alice", "alice-pw")
SCHEMA = {"schema": json.dumps({"type": "record", "name": "O", "fields": [{"name": "a", "type": "int"}]})}  # fmt: skip


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    cfg = {
        "http.listeners": "http://127.0.0.1:0",
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin",
    }
    with Broker(tmp_path_factory.mktemp("registry-auth"), config=cfg) as b:
        yield b


def allow(b: Broker, user: str, op: AclOperation, topic: str) -> None:
    binding = AclBinding(
        ResourcePattern(ResourceType.TOPIC, topic),
        AccessControlEntry(f"User:{user}", "*", op, AclPermissionType.ALLOW),
    )
    b.call(b.server.authorizer.create, [binding])


def test_basic_credentials_are_required(broker: Broker) -> None:
    status, err = call("GET", f"{broker.http_url}/subjects")
    assert status == 401 and err["error_code"] == 401
    assert call("GET", f"{broker.http_url}/subjects", auth=("alice", "wrong"))[0] == 401
    assert call("GET", f"{broker.http_url}/subjects", auth=ADMIN) == (200, [])


def test_subjects_follow_their_topics_acls(broker: Broker) -> None:
    url = broker.http_url
    status, body = call("POST", f"{url}/subjects/orders-value/versions", SCHEMA, auth=ALICE)
    assert status == 403 and body["error_code"] == 40301
    allow(broker, "alice", AclOperation.WRITE, "orders")
    status, body = call("POST", f"{url}/subjects/orders-value/versions", SCHEMA, auth=ALICE)
    assert status == 200, body
    schema_id = body["id"]
    assert call("POST", f"{url}/subjects/secret-value/versions", SCHEMA, auth=ADMIN)[0] == 200
    # alice sees her subject only; reads are allowed by WRITE (it implies DESCRIBE)
    assert call("GET", f"{url}/subjects", auth=ALICE) == (200, ["orders-value"])
    assert call("GET", f"{url}/subjects/orders-value/versions", auth=ALICE) == (200, [1])
    assert call("GET", f"{url}/schemas/ids/{schema_id}", auth=ALICE)[0] == 200
    status, body = call("GET", f"{url}/subjects/secret-value/versions", auth=ALICE)
    assert status == 403 and body["error_code"] == 40301
    # deleting needs DELETE; global settings need the CLUSTER resource
    assert call("DELETE", f"{url}/subjects/orders-value", auth=ALICE)[0] == 403
    status, body = call("PUT", f"{url}/config", {"compatibility": "NONE"}, auth=ALICE)
    assert status == 403 and body["error_code"] == 40301
    assert call("PUT", f"{url}/config", {"compatibility": "NONE"}, auth=ADMIN)[0] == 200
