"""KafkaPrincipal and ssl.principal.mapping.rules (KIP-371), with the examples from Kafka's docs."""

from __future__ import annotations

import pytest

from kafkalite.security.principal import (
    ANONYMOUS,
    KafkaPrincipal,
    NoMatchingRule,
    SslPrincipalMapper,
    parse_rules,
)


def test_principal_str_and_parse() -> None:
    alice = KafkaPrincipal("User", "alice")
    assert str(alice) == "User:alice"
    assert KafkaPrincipal.parse("User:alice") == alice
    assert KafkaPrincipal.parse("User:CN=a:b") == KafkaPrincipal("User", "CN=a:b")
    assert str(ANONYMOUS) == "User:ANONYMOUS"
    assert KafkaPrincipal.parse("User:*").is_wildcard


@pytest.mark.parametrize("bad", ["alice", ":alice", "User:", ""])
def test_principal_parse_rejects(bad: str) -> None:
    with pytest.raises(ValueError, match="principalType:principalName"):
        KafkaPrincipal.parse(bad)


DOCS_RULES = (
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,"
    "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,"
    "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,"
    "DEFAULT"
)


@pytest.mark.parametrize(
    ("dn", "name"),
    [
        ("CN=serviceuser,OU=ServiceUsers,O=Unknown,L=Unknown,ST=Unknown,C=Unknown", "serviceuser"),
        ("CN=adminUser,OU=Admin,O=Unknown,L=Unknown,ST=Unknown,C=Unknown", "adminuser@admin"),
        ("CN=kafka1.example.com,O=Example", "kafka1.example.com"),
        ("OU=JustAnOU", "OU=JustAnOU"),
    ],
)
def test_docs_examples(dn: str, name: str) -> None:
    assert SslPrincipalMapper(DOCS_RULES).name(dn) == name


def test_newline_separated_and_upper_case() -> None:
    mapper = SslPrincipalMapper("RULE:^CN=(.*?),OU=.*$/$1/U\n  DEFAULT")
    assert mapper.name("CN=alice,OU=Eng") == "ALICE"
    assert mapper.principal("O=Org") == KafkaPrincipal("User", "O=Org")


def test_default_is_whole_dn() -> None:
    assert SslPrincipalMapper().name("CN=a,O=b") == "CN=a,O=b"


def test_no_matching_rule() -> None:
    with pytest.raises(NoMatchingRule, match="No rules apply to OU=x"):
        SslPrincipalMapper("RULE:^CN=(.*)$/$1/").name("OU=x")


def test_escaped_slash_and_literal_dollar() -> None:
    mapper = SslPrincipalMapper(r"RULE:^CN=(.*?)\/(.*?),.*$/$1\/$2 \$3/")
    assert mapper.name("CN=a/b,O=c") == "a/b $3"


def test_back_reference_beyond_groups_truncates_like_kafka() -> None:
    # one group: $12 is group 1 followed by a literal 2; $4 stays literal
    assert SslPrincipalMapper("RULE:^CN=(.*?),.*$/$12-$4/").name("CN=x,O=y") == "x2-$4"


@pytest.mark.parametrize(
    "rules",
    ["RULE:^CN=(.*)$", "DEFAULTS", "RULE:^CN=(.*)$/$1/L, FOO", "RULE:(/$1/"],
)
def test_malformed_rules(rules: str) -> None:
    with pytest.raises(ValueError, match="Invalid rule"):
        parse_rules(rules)


def test_empty_entries_ignored() -> None:
    assert [str(r) for r in parse_rules("DEFAULT, ,")] == ["DEFAULT"]
    assert str(parse_rules("RULE:^CN=(.*)$/$1/L")[0]) == "RULE:^CN=(.*)$/$1/L"
