"""Choosing a SASL server exchange from the enabled mechanisms."""

from __future__ import annotations

import pytest

from kafkalite.protocol.errors import ErrorCode
from kafkalite.security.mechanisms import (
    SUPPORTED_MECHANISMS,
    UnsupportedSaslMechanismError,
    create_sasl_server,
)
from kafkalite.security.sasl import PlainServer, plain_client_token
from kafkalite.security.scram import ScramClient, ScramServer, make_credential

CRED = make_credential("SCRAM-SHA-512", "pw")


def test_supported() -> None:
    assert SUPPORTED_MECHANISMS == ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def test_creates_each_mechanism() -> None:
    plain = create_sasl_server("PLAIN", ["PLAIN"], lookup_password={"u": "pw"}.get)
    assert isinstance(plain, PlainServer)
    plain.evaluate(plain_client_token("u", "pw"))
    assert plain.complete
    scram = create_sasl_server(
        "SCRAM-SHA-512", SUPPORTED_MECHANISMS, lookup_credential={"u": CRED}.get
    )
    assert isinstance(scram, ScramServer) and scram.mechanism == "SCRAM-SHA-512"
    client = ScramClient("SCRAM-SHA-512", "u", "pw")
    client.verify(scram.evaluate(client.final_message(scram.evaluate(client.first_message()))))
    assert scram.complete


@pytest.mark.parametrize(
    ("mechanism", "enabled", "message"),
    [
        ("GSSAPI", ["GSSAPI"], "supported: \\['PLAIN'"),
        ("SCRAM-SHA-256", ["PLAIN"], "Unsupported SASL mechanism SCRAM-SHA-256"),
        ("PLAIN", ["PLAIN"], "Unsupported SASL mechanism PLAIN"),  # no password source
    ],
)
def test_unsupported(mechanism: str, enabled: list[str], message: str) -> None:
    with pytest.raises(UnsupportedSaslMechanismError, match=message) as info:
        create_sasl_server(mechanism, enabled, lookup_credential={"u": CRED}.get)
    assert info.value.error_code is ErrorCode.UNSUPPORTED_SASL_MECHANISM
