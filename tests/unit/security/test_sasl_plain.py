"""SASL/PLAIN (RFC 4616) server exchange and client token, with Kafka's failure messages."""

from __future__ import annotations

import pytest

from kafkalite.protocol.errors import ErrorCode
from kafkalite.security.principal import KafkaPrincipal
from kafkalite.security.sasl import (
    IllegalSaslStateError,
    PlainServer,
    SaslAuthenticationError,
    plain_client_token,
)

USERS = {"alice": "alice-secret", "admin": "admin-secret"}


def server() -> PlainServer:
    return PlainServer(USERS.get)


def test_success_without_and_with_authzid() -> None:
    for authzid in ("", "alice"):
        s = server()
        assert not s.complete and s.principal is None
        assert s.evaluate(plain_client_token("alice", "alice-secret", authzid)) == b""
        assert s.complete
        assert s.principal == KafkaPrincipal("User", "alice")
        assert s.mechanism == "PLAIN"


@pytest.mark.parametrize(
    ("token", "message"),
    [
        (b"\0alice\0wrong", "Invalid username or password"),
        (b"\0mallory\0alice-secret", "Invalid username or password"),
        (b"admin\0alice\0alice-secret", "authorization id that is different from username"),
        (b"\0\0alice-secret", "username not specified"),
        (b"\0alice\0", "password not specified"),
        (b"alice\0alice-secret", "expected 3 tokens, got 2"),
        (b"\0a\0b\0c", "expected 3 tokens, got 4"),
        (b"\xff\0alice\0x", "not UTF-8"),
    ],
)
def test_failures(token: bytes, message: str) -> None:
    s = server()
    with pytest.raises(SaslAuthenticationError, match=message) as info:
        s.evaluate(token)
    assert "secret" not in str(info.value)
    assert info.value.error_code is ErrorCode.SASL_AUTHENTICATION_FAILED
    assert not s.complete and s.principal is None
    with pytest.raises(IllegalSaslStateError):
        s.evaluate(plain_client_token("alice", "alice-secret"))


def test_token_after_completion_is_illegal_state() -> None:
    s = server()
    s.evaluate(plain_client_token("alice", "alice-secret"))
    with pytest.raises(IllegalSaslStateError) as info:
        s.evaluate(b"again")
    assert info.value.error_code is ErrorCode.ILLEGAL_SASL_STATE


def test_client_token() -> None:
    assert plain_client_token("u", "p") == b"\0u\0p"
    assert plain_client_token("u", "p", "u") == b"u\0u\0p"
    with pytest.raises(ValueError, match="password must not contain NUL"):
        plain_client_token("u", "p\0")
