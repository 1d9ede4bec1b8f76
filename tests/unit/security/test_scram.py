"""SCRAM: RFC 5802 (SHA-1) and RFC 7677 (SHA-256) test vectors, Kafka's credential string, failures."""

from __future__ import annotations

import base64
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.security.principal import KafkaPrincipal
from kafkalite.security.sasl import IllegalSaslStateError, SaslAuthenticationError
from kafkalite.security.scram import (
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    ScramClient,
    ScramCredential,
    ScramMechanism,
    ScramServer,
    make_credential,
)

# RFC 5802 section 5 uses SCRAM-SHA-1, which Kafka does not offer; it still checks the arithmetic.
SCRAM_SHA_1 = ScramMechanism("SCRAM-SHA-1", "sha1")

VECTORS = [
    (
        SCRAM_SHA_1,
        "fyko+d2lbbFgONRv9qkxdawL",
        "3rfcNHYJY1ZVvWVs7j",
        "QSXCR+Q6sek8bf92",
        "p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=",
        "v=rmF9pqV8S7suAoZWja4dJRkFsKQ=",
    ),
    (
        SCRAM_SHA_256,
        "rOprNGfwEbeRWgbNEkqO",
        "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
        "W22ZaJ0SNY7soEsUEjb6gQ==",
        "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
        "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",
    ),
]


@pytest.mark.parametrize(
    ("mech", "cnonce", "snonce", "salt", "proof", "verifier"), VECTORS, ids=["rfc5802", "rfc7677"]
)
def test_rfc_vectors(
    mech: ScramMechanism, cnonce: str, snonce: str, salt: str, proof: str, verifier: str
) -> None:
    cred = make_credential(mech, "pencil", 4096, base64.b64decode(salt))
    server = ScramServer(mech, {"user": cred}.get, server_nonce=lambda: snonce)
    client = ScramClient(mech, "user", "pencil", nonce=cnonce)
    first = client.first_message()
    assert first == f"n,,n=user,r={cnonce}".encode()
    server_first = server.evaluate(first)
    assert server_first == f"r={cnonce}{snonce},s={salt},i=4096".encode()
    client_final = client.final_message(server_first)
    assert client_final == f"c=biws,r={cnonce}{snonce},{proof}".encode()
    assert not server.complete
    server_final = server.evaluate(client_final)
    assert server_final == verifier.encode()
    assert server.complete and server.principal == KafkaPrincipal("User", "user")
    client.verify(server_final)
    assert client.complete


def test_credential_string_round_trip() -> None:
    cred = make_credential("SCRAM-SHA-256", "pencil", salt=b"0123456789abcdef")
    text = cred.to_config_string()
    assert text.startswith("salt=MDEyMzQ1Njc4OWFiY2RlZg==,stored_key=")
    assert text.endswith(",iterations=4096")
    assert ScramCredential.from_config_string(text) == cred
    assert "stored_key" not in repr(cred)


@pytest.mark.parametrize(
    "text",
    [
        "salt=AAAA,stored_key=AAAA,server_key=AAAA",
        "salt=AAAA,stored_key=AAAA,server_key=AAAA,iterations=many",
        "salt=!!!!,stored_key=AAAA,server_key=AAAA,iterations=4096",
        "garbage",
    ],
)
def test_credential_string_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="Invalid SCRAM credential"):
        ScramCredential.from_config_string(text)


def test_min_iterations_and_unknown_mechanism() -> None:
    with pytest.raises(ValueError, match="less than the minimum 4096"):
        make_credential("SCRAM-SHA-512", "p", iterations=1000)
    with pytest.raises(ValueError, match="Unsupported SCRAM mechanism"):
        make_credential("SCRAM-MD5", "p")


@settings(max_examples=10, deadline=None)
@given(
    mech=st.sampled_from([SCRAM_SHA_256, SCRAM_SHA_512]),
    user=st.text(st.characters(codec="utf-8", exclude_characters="\0"), min_size=1, max_size=12),
    password=st.text(min_size=1, max_size=12),
)
def test_client_server_agree(mech: ScramMechanism, user: str, password: str) -> None:
    server = ScramServer(mech, {user: make_credential(mech, password)}.get)
    client = ScramClient(mech, user, password)
    client.verify(server.evaluate(client.final_message(server.evaluate(client.first_message()))))
    assert client.complete and server.principal == KafkaPrincipal("User", user)


def _server(password: str = "pencil") -> ScramServer:
    return ScramServer(SCRAM_SHA_256, {"user": make_credential(SCRAM_SHA_256, password)}.get)


INVALID = "invalid credentials with SASL mechanism SCRAM-SHA-256"


@pytest.mark.parametrize(
    ("first", "message"),
    [
        (b"n,,n=nobody,r=abc", INVALID),
        (b"p=tls-unique,,n=user,r=abc", "channel binding is not supported"),
        (b"n,,n=user,r=abc,tokenauth=true", "delegation token authentication is not supported"),
        (b"n,a=admin,n=user,r=abc", "authorization id that is different from username"),
        (b"n,,m=ext,n=user,r=abc", "mandatory SCRAM extension"),
        (b"n,,r=abc,n=user", "client first message format"),
        (b"x,,n=user,r=abc", "client first message format"),
        (b"n,,n=us=er,r=abc", "bad '=' escape"),
        (b"n,,n=user,r=a,b", "client first message format"),
        (b"garbage", "client first message format"),
    ],
)
def test_client_first_failures(first: bytes, message: str) -> None:
    server = _server()
    with pytest.raises(SaslAuthenticationError, match=message):
        server.evaluate(first)
    with pytest.raises(IllegalSaslStateError):
        server.evaluate(first)


def test_authzid_equal_to_user_and_unknown_extension_accepted() -> None:
    server = _server()
    server.evaluate(b"n,a=user,n=user,r=abc,foo=bar")
    assert not server.complete


def _final_with(mutate: Callable[[str], str], password: str = "pencil") -> None:
    server = _server()
    client = ScramClient(SCRAM_SHA_256, "user", password)
    server_first = server.evaluate(client.first_message())
    final = client.final_message(server_first).decode()
    server.evaluate(mutate(final).encode())


def test_wrong_password_is_invalid_credentials() -> None:
    with pytest.raises(SaslAuthenticationError, match=INVALID) as info:
        _final_with(lambda f: f, password="wrong")
    assert "pencil" not in str(info.value) and "wrong" not in str(info.value)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda f: f.replace("c=biws", "c=eSws"), "channel binding"),
        (lambda f: f.replace(",p=", "x,p="), "Invalid client nonce"),
        (lambda f: f[: f.index(",p=")] + ",p=AAAA", INVALID),
        (lambda f: f[: f.index(",p=")] + ",p=@@", "proof encoding"),
        (lambda f: f[: f.index(",p=")], "client final message format"),
    ],
)
def test_client_final_failures(mutate: Callable[[str], str], message: str) -> None:
    with pytest.raises(SaslAuthenticationError, match=message):
        _final_with(mutate)


def test_server_below_min_iterations_refused() -> None:
    weak = ScramCredential(b"s", b"k" * 32, b"k" * 32, 1000)
    with pytest.raises(SaslAuthenticationError, match=INVALID):
        ScramServer("SCRAM-SHA-256", {"user": weak}.get).evaluate(b"n,,n=user,r=abc")


def test_client_rejects_bad_server_messages() -> None:
    client = ScramClient(SCRAM_SHA_256, "user", "pencil", nonce="abc")
    with pytest.raises(SaslAuthenticationError, match="server final message before"):
        client.verify(b"v=AAAA")
    with pytest.raises(SaslAuthenticationError, match="does not start with client nonce"):
        client.final_message(b"r=zzz,s=QUFB,i=4096")
    with pytest.raises(SaslAuthenticationError, match="less than the minimum"):
        client.final_message(b"r=abcdef,s=QUFB,i=10")
    with pytest.raises(SaslAuthenticationError, match="server error: other-error"):
        client.final_message(b"e=other-error")
    client.final_message(b"r=abcdef,s=QUFB,i=4096")
    with pytest.raises(SaslAuthenticationError, match="Invalid SCRAM server signature"):
        client.verify(b"v=AAAA")


def test_username_escaping() -> None:
    server = ScramServer(SCRAM_SHA_256, {"a,b=c": make_credential(SCRAM_SHA_256, "p")}.get)
    client = ScramClient(SCRAM_SHA_256, "a,b=c", "p")
    assert b"n=a=2Cb=3Dc," in client.first_message()
    client.verify(server.evaluate(client.final_message(server.evaluate(client.first_message()))))
    assert server.principal == KafkaPrincipal("User", "a,b=c")
