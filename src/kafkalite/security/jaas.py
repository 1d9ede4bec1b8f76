"""Kafka's JAAS configuration strings (`sasl.jaas.config`, `listener.name.*.<mech>.sasl.jaas.config`).

Parses `<LoginModule class> <flag> key=value ... ;` into entries; error messages name keys, never values.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


class JaasConfigError(ValueError):
    """A JAAS config string that Kafka would reject; the message never contains option values."""


class ControlFlag(enum.Enum):
    REQUIRED = "required"
    REQUISITE = "requisite"
    SUFFICIENT = "sufficient"
    OPTIONAL = "optional"


@dataclass(frozen=True, slots=True)
class AppConfigurationEntry:
    """One login module: its class, control flag and options (all values are strings)."""

    login_module: str
    control_flag: ControlFlag
    options: dict[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:  # options hold passwords: show their keys only
        return (
            f"AppConfigurationEntry({self.login_module!r}, {self.control_flag.name}, "
            f"options={sorted(self.options)})"
        )


# Characters of an unquoted word, as Kafka configures its tokenizer (letters, digits, `.-_$`).
# Kafka's tokenizer reads a bare number as a number and then rejects it as a value; here a bare
# number is simply a word, which is the only place this parser is more lenient.
def _is_word_char(c: str) -> bool:
    return c.isalnum() or c in "._-$" or ord(c) >= 0xA0


_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


class _Tokenizer:
    """Words, quoted strings (`"` or `'` with Java-style escapes), punctuation; skips comments."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def _skip_space_and_comments(self) -> None:
        text = self.text
        while self.pos < len(text):
            c = text[self.pos]
            if c.isspace():
                self.pos += 1
            elif text.startswith("//", self.pos):
                end = text.find("\n", self.pos)
                self.pos = len(text) if end < 0 else end + 1
            elif text.startswith("/*", self.pos):
                end = text.find("*/", self.pos + 2)
                if end < 0:
                    raise JaasConfigError("Unterminated /* comment in JAAS config")
                self.pos = end + 2
            else:
                return

    def next(self) -> tuple[str, str] | None:
        """("word", w) | ("quoted", s) | ("punct", c) | None at the end."""
        self._skip_space_and_comments()
        text = self.text
        if self.pos >= len(text):
            return None
        c = text[self.pos]
        if c in "\"'":
            return ("quoted", self._quoted(c))
        if _is_word_char(c):
            start = self.pos
            while self.pos < len(text) and _is_word_char(text[self.pos]):
                self.pos += 1
            return ("word", text[start : self.pos])
        self.pos += 1
        return ("punct", c)

    def _quoted(self, quote: str) -> str:
        text = self.text
        self.pos += 1
        out: list[str] = []
        while self.pos < len(text):
            c = text[self.pos]
            self.pos += 1
            if c == quote:
                return "".join(out)
            if c == "\n":
                break
            if c != "\\" or self.pos >= len(text):
                out.append(c)
                continue
            e = text[self.pos]
            self.pos += 1
            if e in _ESCAPES:
                out.append(_ESCAPES[e])
            elif "0" <= e <= "7":  # octal, up to three digits (max \377)
                digits = e
                limit = 3 if e <= "3" else 2
                while len(digits) < limit and self.pos < len(text) and "0" <= text[self.pos] <= "7":
                    digits += text[self.pos]
                    self.pos += 1
                out.append(chr(int(digits, 8)))
            else:
                out.append(e)
        raise JaasConfigError("Unterminated quoted string")


def parse_jaas_config(text: str) -> list[AppConfigurationEntry]:
    """Every login module entry in a JAAS config string, in order."""
    tokens = _Tokenizer(text)
    entries: list[AppConfigurationEntry] = []
    while (tok := tokens.next()) is not None:
        kind, module = tok
        if kind != "word":
            found = f"'{module}'" if kind == "punct" else "a quoted string"
            raise JaasConfigError(
                f"Invalid JAAS config: expected a login module class name, found {found}"
            )
        flag_tok = tokens.next()
        if flag_tok is None or flag_tok[0] != "word":
            raise JaasConfigError(
                f"Login module control flag not specified in JAAS config for {module}"
            )
        try:
            flag = ControlFlag(flag_tok[1].lower())
        except ValueError:
            raise JaasConfigError(
                f"Invalid login module control flag '{flag_tok[1]}' in JAAS config for {module}"
            ) from None
        options: dict[str, str] = {}
        while True:
            key_tok = tokens.next()
            if key_tok is None:
                raise JaasConfigError(
                    f"JAAS config entry for {module} not terminated by semi-colon"
                )
            if key_tok == ("punct", ";"):
                break
            if key_tok[0] != "word":
                raise JaasConfigError(f"Invalid JAAS config for {module}: expected an option name")
            key = key_tok[1]
            if tokens.next() != ("punct", "="):
                raise JaasConfigError(f"Value not specified for key '{key}' in JAAS config")
            try:
                value_tok = tokens.next()
            except JaasConfigError as e:
                raise JaasConfigError(f"{e} for key '{key}' in JAAS config") from None
            if value_tok is None or value_tok[0] == "punct":
                raise JaasConfigError(f"Value not specified for key '{key}' in JAAS config")
            options[key] = value_tok[1]
        entries.append(AppConfigurationEntry(module, flag, options))
    if not entries:
        raise JaasConfigError("Login module not specified in JAAS config")
    return entries


def parse_sasl_jaas_config(text: str) -> AppConfigurationEntry:
    """`sasl.jaas.config` holds exactly one login module, as Kafka requires."""
    entries = parse_jaas_config(text)
    if len(entries) != 1:
        raise JaasConfigError(
            f"JAAS config property contains {len(entries)} login modules, should be 1 module"
        )
    return entries[0]


def plain_users(entry: AppConfigurationEntry) -> dict[str, str]:
    """The broker's PLAIN users: each `user_<name>="<password>"` option of PlainLoginModule."""
    return {k[len("user_") :]: v for k, v in entry.options.items() if k.startswith("user_")}
