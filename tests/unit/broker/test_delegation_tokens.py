"""The delegation-token APIs' refusal, as a Kafka broker with tokens disabled decides it per connection."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from kafkalite.broker.apis.admin._delegation_tokens import token_refusal
from kafkalite.protocol.errors import ErrorCode
from kafkalite.security.principal import ANONYMOUS, KafkaPrincipal

ALICE = KafkaPrincipal.user("alice")


@pytest.mark.parametrize(
    ("protocol", "principal", "code"),
    [
        ("PLAINTEXT", ANONYMOUS, ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED),
        ("SSL", ANONYMOUS, ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED),  # one-way TLS
        ("SSL", ALICE, ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED),  # a client certificate
        ("SASL_PLAINTEXT", ALICE, ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED),
        ("SASL_SSL", ALICE, ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED),
    ],
)
def test_refusal_by_connection(protocol: str, principal: KafkaPrincipal, code: ErrorCode) -> None:
    conn = SimpleNamespace(security_protocol=protocol, principal=principal)
    ctx: Any = SimpleNamespace(connection=conn, principal=principal)
    assert token_refusal(ctx) == code
