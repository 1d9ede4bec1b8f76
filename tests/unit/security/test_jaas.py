"""JAAS config strings as users write them in sasl.jaas.config, and the errors Kafka gives."""

from __future__ import annotations

import pytest

from kafkalite.security.jaas import (
    PLAIN_LOGIN_MODULE,
    SCRAM_LOGIN_MODULE,
    ControlFlag,
    JaasConfigError,
    parse_jaas_config,
    parse_sasl_jaas_config,
    plain_users,
)


def test_plain_broker_config() -> None:
    entry = parse_sasl_jaas_config(
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="admin" password="admin-secret" '
        'user_admin="admin-secret" user_alice="alice-secret";'
    )
    assert entry.login_module == PLAIN_LOGIN_MODULE
    assert entry.control_flag is ControlFlag.REQUIRED
    assert entry.options == {
        "username": "admin",
        "password": "admin-secret",
        "user_admin": "admin-secret",
        "user_alice": "alice-secret",
    }
    assert plain_users(entry) == {"admin": "admin-secret", "alice": "alice-secret"}
    assert "secret" not in repr(entry)


def test_scram_config_multiline_with_comments() -> None:
    entry = parse_sasl_jaas_config(
        f"""{SCRAM_LOGIN_MODULE} REQUIRED // the broker's own login
            username="admin" /* inline */
            password="x";
        """
    )
    assert entry.control_flag is ControlFlag.REQUIRED
    assert entry.options == {"username": "admin", "password": "x"}


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        (r'"a\"b"', 'a"b'),
        (r'"back\\slash"', "back\\slash"),
        (r'"tab\there"', "tab\there"),
        (r'"new\nline"', "new\nline"),
        (r'"oct\101"', "octA"),
        (r'"unknown\qescape"', "unknownqescape"),
        (r"'single \"quoted\" '", 'single "quoted" '),
        ('"with;semicolon=and spaces"', "with;semicolon=and spaces"),
        ('""', ""),
        ("true", "true"),
        ("some-word_with.$chars", "some-word_with.$chars"),
        ("4096", "4096"),
        ('"ünïcode"', "ünïcode"),
    ],
)
def test_values(value: str, parsed: str) -> None:
    entry = parse_sasl_jaas_config(f"a.b.C optional key={value};")
    assert entry.control_flag is ControlFlag.OPTIONAL
    assert entry.options == {"key": parsed}


def test_several_modules_and_flags() -> None:
    entries = parse_jaas_config("a.A sufficient; b.B Requisite k=v;")
    assert [(e.login_module, e.control_flag) for e in entries] == [
        ("a.A", ControlFlag.SUFFICIENT),
        ("b.B", ControlFlag.REQUISITE),
    ]
    with pytest.raises(JaasConfigError, match="contains 2 login modules, should be 1"):
        parse_sasl_jaas_config("a.A sufficient; b.B Requisite k=v;")
    with pytest.raises(JaasConfigError, match="Login module not specified"):
        parse_sasl_jaas_config("  // nothing\n")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('a.A required password="s3cr3t"', "not terminated by semi-colon"),
        ('a.A mandatory password="s3cr3t";', "Invalid login module control flag 'mandatory'"),
        ("a.A", "control flag not specified"),
        ("; a.A required;", "found ';'"),
        ("a.A required password=;", "Value not specified for key 'password'"),
        ("a.A required password;", "Value not specified for key 'password'"),
        ('a.A required password="s3cr3t', "Unterminated quoted string for key 'password'"),
        ('a.A required password="s3cr3t\n";', "Unterminated quoted string for key 'password'"),
        ('a.A required "s3cr3t"="x";', "expected an option name"),
        ('"s3cr3t" required;', "expected a login module class"),
        ("a.A required /* s3cr3t", "Unterminated /\\* comment"),
    ],
)
def test_errors_name_the_problem_not_the_secret(text: str, message: str) -> None:
    with pytest.raises(JaasConfigError, match=message) as info:
        parse_jaas_config(text)
    assert "s3cr3t" not in str(info.value)
