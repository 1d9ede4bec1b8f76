"""REST v3 on a broker with SASL users: HTTP Basic with a PLAIN (JAAS) or SCRAM user, 401 with
WWW-Authenticate otherwise, and the broker's ACLs applied to User:<name> (403 with the Kafka error).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from rest_http import call, www_authenticate

from kafkalite.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    ResourcePattern,
    ResourceType,
)
from kafkalite.security.scram import make_credential
from kafkalite.testing import Broker

JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-pw" user_admin="admin-pw" user_alice="alice-pw";'
)
ADMIN = ("admin", "admin-pw")
ALICE = ("alice", "alice-pw")
BOB = ("bob", "bob-pw")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    cfg = {
        "http.listeners": "http://127.0.0.1:0",
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin",
    }
    with Broker(tmp_path_factory.mktemp("rest-auth"), config=cfg) as b:
        b.call(
            b.server.scram_credentials.alter,
            "bob",
            {"SCRAM-SHA-256": make_credential("SCRAM-SHA-256", BOB[1])},
            [],
        )
        yield b


def v3(b: Broker, *parts: object) -> str:
    return f"{b.http_url}/v3/clusters/{b.cluster_id}" + "".join(f"/{p}" for p in parts)


def allow(b: Broker, user: str, op: AclOperation, topic: str) -> None:
    binding = AclBinding(
        ResourcePattern(ResourceType.TOPIC, topic),
        AccessControlEntry(f"User:{user}", "*", op, AclPermissionType.ALLOW),
    )
    b.call(b.server.authorizer.create, [binding])


def test_credentials_are_required(broker: Broker) -> None:
    status, err = call("GET", f"{broker.http_url}/v3/clusters")
    assert status == 401 and err["error_code"] == 401
    assert www_authenticate(f"{broker.http_url}/v3/clusters") == 'Basic realm="kafkalite"'
    assert call("GET", f"{broker.http_url}/v3/clusters", auth=("alice", "wrong"))[0] == 401
    assert call("GET", f"{broker.http_url}/v3/clusters", auth=("nobody", "x"))[0] == 401
    assert call("GET", f"{broker.http_url}/v3/clusters", auth=("bob", "wrong"))[0] == 401


def test_plain_and_scram_users_log_in(broker: Broker) -> None:
    for who in (ADMIN, ALICE, BOB, BOB):  # BOB twice: the remembered verification
        status, body = call("GET", f"{broker.http_url}/v3/clusters", auth=who)
        assert status == 200 and body["data"][0]["cluster_id"] == broker.cluster_id


def test_acls_apply_to_the_basic_user(broker: Broker) -> None:
    status, t = call(
        "POST", v3(broker, "topics"), {"topic_name": "secure", "partitions_count": 1}, auth=ADMIN
    )
    assert status == 201, t
    status, err = call("POST", v3(broker, "topics"), {"topic_name": "other"}, auth=ALICE)
    assert status == 403 and err["error_code"] == 403
    assert err["message"].startswith("TOPIC_AUTHORIZATION_FAILED")
    status, err = call("GET", v3(broker, "topics", "secure"), auth=ALICE)
    assert status == 403 and err["message"].startswith("TOPIC_AUTHORIZATION_FAILED")
    listed = call("GET", v3(broker, "topics"), auth=ALICE)[1]
    assert "secure" not in [x["topic_name"] for x in listed["data"]]
    allow(broker, "alice", AclOperation.DESCRIBE, "secure")
    assert call("GET", v3(broker, "topics", "secure"), auth=ALICE)[0] == 200
    record = {"value": {"type": "STRING", "data": "hi"}}
    status, err = call("POST", v3(broker, "topics", "secure", "records"), record, auth=ALICE)
    assert status == 403 and err["message"].startswith("TOPIC_AUTHORIZATION_FAILED")
    status, err = call(
        "GET", v3(broker, "topics", "secure", "partitions", 0, "records"), auth=ALICE
    )
    assert status == 403
    allow(broker, "alice", AclOperation.WRITE, "secure")
    status, r = call("POST", v3(broker, "topics", "secure", "records"), record, auth=ALICE)
    assert status == 200 and r["offset"] == 0
    status, err = call("DELETE", v3(broker, "topics", "secure"), auth=BOB)
    assert status == 403
    assert call("DELETE", v3(broker, "topics", "secure"), auth=ADMIN)[0] == 204
