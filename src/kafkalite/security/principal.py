"""Kafka principals (`User:alice`) and the SSL principal mapping rules of KIP-371.

`SslPrincipalMapper` turns an X.500 distinguished name (RFC 2253 string) into a principal name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

USER_TYPE = "User"
WILDCARD_NAME = "*"


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    """Who a connection is: a type (nearly always `User`) and a name; `str()` gives `User:alice`."""

    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def user(cls, name: str) -> KafkaPrincipal:
        return cls(USER_TYPE, name)

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """`User:alice` -> KafkaPrincipal("User", "alice"); the name may itself hold colons."""
        principal_type, sep, name = text.partition(":")
        if not sep or not principal_type or not name:
            raise ValueError(
                f"expected a string in format principalType:principalName but got {text!r}"
            )
        return cls(principal_type, name)

    @property
    def is_wildcard(self) -> bool:
        """`User:*`, which in an ACL matches every user."""
        return self.name == WILDCARD_NAME


ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")
WILDCARD_PRINCIPAL = KafkaPrincipal(USER_TYPE, WILDCARD_NAME)

# One rule: DEFAULT, RULE:pattern/replacement/[LU] (backslash escapes a `/`), or anything else,
# which the full-length check below turns into an error naming the unmatched part.
_RULE = r"(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_RULE_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(?:[,\n]\s*|$)")
_RULE_PARSER = re.compile(_RULE)
_BACK_REFERENCE = re.compile(r"\$(\d+)|\$\{([A-Za-z][A-Za-z0-9]*)\}|\\(.)|\$", re.DOTALL)


class NoMatchingRule(ValueError):
    """No mapping rule applies to a distinguished name (Kafka then fails the SSL handshake)."""


@dataclass(frozen=True, slots=True)
class SslPrincipalMappingRule:
    """One parsed rule; `pattern is None` means DEFAULT (the whole DN)."""

    pattern: re.Pattern[str] | None
    replacement: str = ""
    to_lower_case: bool = False
    to_upper_case: bool = False

    @property
    def is_default(self) -> bool:
        return self.pattern is None

    def apply(self, distinguished_name: str) -> str | None:
        """The mapped name, or None if this rule's pattern does not match the whole DN."""
        if self.pattern is None:
            return distinguished_name
        if self.pattern.fullmatch(distinguished_name) is None:
            return None
        pattern = self.pattern
        result = pattern.sub(lambda m: _expand(m, self.replacement), distinguished_name)
        if self.to_lower_case:
            return result.lower()
        if self.to_upper_case:
            return result.upper()
        return result

    def __str__(self) -> str:
        if self.pattern is None:
            return "DEFAULT"
        flag = "/L" if self.to_lower_case else "/U" if self.to_upper_case else ""
        return f"RULE:{self.pattern.pattern}/{self.replacement}{flag}"


def _expand(match: re.Match[str], replacement: str) -> str:
    """Java `Matcher.replaceAll` replacement syntax: `$n`, `${name}`, `\\c` for a literal c.

    As Kafka does, a back reference to a group that does not exist drops trailing digits until
    it does (`$12` with one group is `$1` then `2`), and stays literal if even one digit is too many.
    """
    groups = match.re.groups
    out: list[str] = []
    pos = 0
    for ref in _BACK_REFERENCE.finditer(replacement):
        out.append(replacement[pos : ref.start()])
        pos = ref.end()
        digits, name, escaped = ref.group(1), ref.group(2), ref.group(3)
        if escaped is not None:
            out.append(escaped)
        elif name is not None:
            out.append(match.group(name) or "")
        elif digits is not None:
            used = 1
            if int(digits[0]) > groups:
                out.append(ref.group(0))
                continue
            while used < len(digits) and int(digits[: used + 1]) <= groups:
                used += 1
            out.append(match.group(int(digits[:used])) or "")
            out.append(digits[used:])
        else:
            out.append("$")
    out.append(replacement[pos:])
    return "".join(out)


def parse_rules(rules: str) -> list[SslPrincipalMappingRule]:
    """Parse `ssl.principal.mapping.rules`: comma- or newline-separated DEFAULT / RULE:... entries."""
    parsed: list[SslPrincipalMappingRule] = []
    for split in _RULE_SPLITTER.finditer(rules.strip()):
        rule = split.group(1)
        m = _RULE_PARSER.match(rule)
        if m is None or m.end() != len(rule):
            rest = rule[m.end() :] if m is not None else rule
            raise ValueError(f"Invalid rule: `{rule}`, unmatched substring: `{rest}`")
        if m.group(1) is not None:
            parsed.append(SslPrincipalMappingRule(None))
        elif m.group(2) is not None:
            try:
                pattern = re.compile(m.group(2))
            except re.error as e:
                raise ValueError(f"Invalid rule: `{rule}`, bad regular expression: {e}") from e
            parsed.append(
                SslPrincipalMappingRule(pattern, m.group(3), m.group(4) == "L", m.group(4) == "U")
            )
        # an empty entry (e.g. a trailing comma) is ignored, as in Kafka
        if split.end() == len(rules.strip()):
            break
    return parsed


class SslPrincipalMapper:
    """The rules of `ssl.principal.mapping.rules`, applied in order; the first that matches wins."""

    def __init__(self, rules: str = "DEFAULT") -> None:
        self.rules = parse_rules(rules)

    def name(self, distinguished_name: str) -> str:
        for rule in self.rules:
            mapped = rule.apply(distinguished_name)
            if mapped is not None:
                return mapped
        raise NoMatchingRule(
            f"No rules apply to {distinguished_name}, rules [{', '.join(map(str, self.rules))}]"
        )

    def principal(self, distinguished_name: str) -> KafkaPrincipal:
        """The principal of a TLS client with this certificate subject (`User:<mapped name>`)."""
        return KafkaPrincipal.user(self.name(distinguished_name))

    def __repr__(self) -> str:
        return f"SslPrincipalMapper(rules = [{', '.join(map(str, self.rules))}])"
