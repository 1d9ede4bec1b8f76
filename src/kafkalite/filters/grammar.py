"""The fetch-filter language (a RocketMQ SQL92 subset): tokenizer, recursive-descent parser and type check.

Turns an expression string into a checked tree of `Node`s, or raises `FilterError` naming the position and
what was expected. The grammar is written down in docs/fetch-filter.md and in `kafkalite.filters`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_EXPRESSION_LENGTH = 4096  # characters
MAX_DEPTH = 64  # nesting of parentheses / NOT / AND / OR
MAX_IN_LIST = 1024

Literal = str | int | float

NUMBER_FIELDS = frozenset({"timestamp", "offset"})
FIELDS_HELP = "key, timestamp, offset, headers.<name> or headers['<name>']"
_KEYWORDS = frozenset(
    {"AND", "OR", "NOT", "IN", "BETWEEN", "IS", "NULL", "LIKE", "STARTSWITH", "TRUE", "FALSE"}
)


class FilterError(ValueError):
    """An expression that cannot be used: unparsable, type-wrong, too long, or naming no field."""

    def __init__(self, message: str, position: int | None = None) -> None:
        self.position = position
        super().__init__(message if position is None else f"{message} (at character {position})")


# -- the tree --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Field:
    """`key`, `timestamp`, `offset`, or a header (`name` set)."""

    kind: str  # "key" | "timestamp" | "offset" | "header"
    name: str = ""

    @property
    def numeric(self) -> bool:
        return self.kind in NUMBER_FIELDS

    def __str__(self) -> str:
        return f"headers[{self.name!r}]" if self.kind == "header" else self.kind


@dataclass(frozen=True, slots=True)
class Compare:
    field: Field
    op: str  # = <> < <= > >=
    value: Literal


@dataclass(frozen=True, slots=True)
class In:
    field: Field
    values: tuple[Literal, ...]
    negated: bool = False


@dataclass(frozen=True, slots=True)
class Between:
    field: Field
    low: int | float
    high: int | float
    negated: bool = False


@dataclass(frozen=True, slots=True)
class IsNull:
    field: Field
    negated: bool = False


@dataclass(frozen=True, slots=True)
class Prefix:
    """`f LIKE 'abc%'` or `f STARTSWITH 'abc'`."""

    field: Field
    prefix: str
    negated: bool = False


@dataclass(frozen=True, slots=True)
class And:
    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class Or:
    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class Not:
    operand: Node


Node = Compare | In | Between | IsNull | Prefix | And | Or | Not


# -- tokens ----------------------------------------------------------------------------------------

_TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<number>\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)
  | (?P<string>'(?:[^']|'')*')
  | (?P<ident>[A-Za-z_][A-Za-z0-9_\-]*)
  | (?P<op><>|!=|<=|>=|=|<|>)
  | (?P<punct>[(),.\[\]-])
    """,
    re.VERBOSE,
)


@dataclass(frozen=True, slots=True)
class Token:
    kind: str  # number | string | ident | keyword | op | punct | end
    text: str
    pos: int

    def describe(self) -> str:
        return "the end of the expression" if self.kind == "end" else repr(self.text)


def tokenize(text: str) -> list[Token]:
    out: list[Token] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            if text[pos] == "'":
                raise FilterError("unterminated string literal", pos)
            raise FilterError(f"unexpected character {text[pos]!r}", pos)
        kind = m.lastgroup or ""
        if kind != "ws":
            tok = m.group()
            if kind == "ident" and tok.upper() in _KEYWORDS:
                out.append(Token("keyword", tok.upper(), pos))
            else:
                out.append(Token(kind, tok, pos))
        pos = m.end()
    out.append(Token("end", "", len(text)))
    return out


# -- the parser ------------------------------------------------------------------------------------


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = tokenize(text)
        self.i = 0
        self.depth = 0

    @property
    def tok(self) -> Token:
        return self.tokens[self.i]

    def take(self) -> Token:
        t = self.tokens[self.i]
        self.i += 1
        return t

    def accept(self, kind: str, text: str | None = None) -> Token | None:
        t = self.tok
        if t.kind == kind and (text is None or t.text == text):
            self.i += 1
            return t
        return None

    def expect(self, kind: str, text: str, what: str) -> Token:
        t = self.accept(kind, text)
        if t is None:
            raise FilterError(f"expected {what}, found {self.tok.describe()}", self.tok.pos)
        return t

    def enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise FilterError(f"expression nested deeper than {MAX_DEPTH} levels", self.tok.pos)

    def parse(self) -> Node:
        if self.tok.kind == "end":
            raise FilterError("empty filter expression", 0)
        node = self.or_expr()
        if self.tok.kind != "end":
            raise FilterError(
                f"expected AND, OR or the end of the expression, found {self.tok.describe()}",
                self.tok.pos,
            )
        return node

    def or_expr(self) -> Node:
        self.enter()
        node = self.and_expr()
        while self.accept("keyword", "OR"):
            node = Or(node, self.and_expr())
        self.depth -= 1
        return node

    def and_expr(self) -> Node:
        node = self.not_expr()
        while self.accept("keyword", "AND"):
            node = And(node, self.not_expr())
        return node

    def not_expr(self) -> Node:
        if self.accept("keyword", "NOT"):
            self.enter()
            node = Not(self.not_expr())
            self.depth -= 1
            return node
        return self.predicate()

    def predicate(self) -> Node:
        if self.accept("punct", "("):
            node = self.or_expr()
            self.expect("punct", ")", "')'")
            return node
        start = self.tok
        if start.kind in ("number", "string") or (start.kind == "punct" and start.text == "-"):
            # literal op field: turned around so the field comes first
            value = self.literal()
            op_tok = self.tok
            if op_tok.kind != "op":
                raise FilterError(
                    f"expected a comparison operator after a literal, found {op_tok.describe()}",
                    op_tok.pos,
                )
            self.take()
            field = self.field()
            return _check_compare(field, _FLIP[_op(op_tok.text)], value, start.pos)
        field = self.field()
        return self.rest(field, start.pos)

    def field(self) -> Field:
        t = self.tok
        if t.kind != "ident":
            raise FilterError(f"expected a field ({FIELDS_HELP}), found {t.describe()}", t.pos)
        self.take()
        name = t.text.lower()
        if name in ("key", "timestamp", "offset"):
            return Field(name)
        if name == "headers":
            if self.accept("punct", "."):
                h = self.tok
                if h.kind not in ("ident", "keyword"):
                    raise FilterError(f"expected a header name, found {h.describe()}", h.pos)
                self.take()
                return Field("header", h.text)
            if self.accept("punct", "["):
                h = self.tok
                if h.kind != "string":
                    raise FilterError(f"expected a quoted header name, found {h.describe()}", h.pos)
                self.take()
                self.expect("punct", "]", "']'")
                return Field("header", _unquote(h.text))
            raise FilterError(
                f"expected '.' or '[' after headers, found {self.tok.describe()}", self.tok.pos
            )
        raise FilterError(f"unknown field {t.text!r}: the fields are {FIELDS_HELP}", t.pos)

    def literal(self) -> Literal:
        t = self.tok
        negative = False
        if t.kind == "punct" and t.text == "-":
            self.take()
            negative = True
            t = self.tok
            if t.kind != "number":
                raise FilterError(f"expected a number after '-', found {t.describe()}", t.pos)
        if t.kind == "number":
            self.take()
            num: int | float = float(t.text) if any(c in t.text for c in ".eE") else int(t.text)
            return -num if negative else num
        if t.kind == "string":
            self.take()
            return _unquote(t.text)
        raise FilterError(
            f"expected a literal (a number or a 'quoted string'), found {t.describe()}", t.pos
        )

    def number(self, field: Field, where: str) -> int | float:
        pos = self.tok.pos
        value = self.literal()
        if isinstance(value, str):
            raise FilterError(f"{where} needs numbers, found the string {value!r}", pos)
        return value

    def rest(self, field: Field, pos: int) -> Node:
        t = self.tok
        if t.kind == "op":
            self.take()
            return _check_compare(field, _op(t.text), self.literal(), pos)
        negated = False
        if t.kind == "keyword" and t.text == "NOT":
            self.take()
            negated = True
            t = self.tok
            if not (t.kind == "keyword" and t.text in ("IN", "BETWEEN", "LIKE", "STARTSWITH")):
                raise FilterError(
                    f"expected IN, BETWEEN, LIKE or STARTSWITH after NOT, found {t.describe()}",
                    t.pos,
                )
        if self.accept("keyword", "IS"):
            negated = bool(self.accept("keyword", "NOT"))
            self.expect("keyword", "NULL", "NULL")
            return IsNull(field, negated)
        if self.accept("keyword", "IN"):
            self.expect("punct", "(", "'(' after IN")
            values = [self.literal()]
            while self.accept("punct", ","):
                values.append(self.literal())
                if len(values) > MAX_IN_LIST:
                    raise FilterError(f"IN lists hold at most {MAX_IN_LIST} values", t.pos)
            self.expect("punct", ")", "',' or ')'")
            return _check_in(field, tuple(values), negated, pos)
        if self.accept("keyword", "BETWEEN"):
            if field.kind == "key":
                raise FilterError("BETWEEN needs a numeric field; key is a string", pos)
            low = self.number(field, "BETWEEN")
            self.expect("keyword", "AND", "AND in BETWEEN ... AND ...")
            high = self.number(field, "BETWEEN")
            return Between(field, low, high, negated)
        if t.kind == "keyword" and t.text in ("LIKE", "STARTSWITH"):
            self.take()
            p = self.tok
            if p.kind != "string":
                raise FilterError(f"{t.text} needs a quoted string, found {p.describe()}", p.pos)
            self.take()
            if field.numeric:
                raise FilterError(f"{t.text} needs a string field; {field} is a number", pos)
            pattern = _unquote(p.text)
            if t.text == "STARTSWITH":
                return Prefix(field, pattern, negated)
            body = pattern[:-1] if pattern.endswith("%") else pattern
            if "%" in body or "_" in body:
                raise FilterError(
                    "LIKE supports only a prefix pattern such as 'user-%' (no '_' and no inner "
                    "'%'); use STARTSWITH 'text_with_underscores'",
                    p.pos,
                )
            if pattern.endswith("%"):
                return Prefix(field, body, negated)
            node: Node = Compare(field, "=", body)
            return Not(node) if negated else node
        raise FilterError(
            "expected a comparison (=, <>, <, <=, >, >=), IN, BETWEEN, IS [NOT] NULL, LIKE or "
            f"STARTSWITH after {field}, found {t.describe()}",
            t.pos,
        )


_FLIP = {"=": "=", "<>": "<>", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


def _op(text: str) -> str:
    return "<>" if text == "!=" else text


def _unquote(text: str) -> str:
    return text[1:-1].replace("''", "'")


def _check_compare(field: Field, op: str, value: Literal, pos: int) -> Compare:
    """Type check: numbers against numeric fields; strings only with = and <>."""
    if field.numeric and isinstance(value, str):
        raise FilterError(
            f"{field} is a number; it cannot be compared with the string {value!r}", pos
        )
    if field.kind == "key" and not isinstance(value, str):
        raise FilterError(
            f"key is a string; compare it with a quoted string such as '{value}'", pos
        )
    if isinstance(value, str) and op not in ("=", "<>"):
        raise FilterError(
            f"strings support only =, <>, IN, LIKE 'prefix%' and STARTSWITH, not {op}", pos
        )
    return Compare(field, op, value)


def _check_in(field: Field, values: tuple[Literal, ...], negated: bool, pos: int) -> In:
    strings = [v for v in values if isinstance(v, str)]
    if strings and len(strings) != len(values):
        raise FilterError("an IN list mixes strings and numbers", pos)
    if field.numeric and strings:
        raise FilterError(f"{field} is a number; its IN list holds strings", pos)
    if field.kind == "key" and not strings:
        raise FilterError("key is a string; its IN list holds numbers", pos)
    return In(field, values, negated)


def parse(text: str) -> Node:
    """Parse and type-check an expression; FilterError names the fault and where."""
    if not isinstance(text, str):
        raise FilterError("a filter expression is a string")
    if len(text) > MAX_EXPRESSION_LENGTH:
        raise FilterError(
            f"filter expression of {len(text)} characters is longer than the "
            f"{MAX_EXPRESSION_LENGTH} allowed"
        )
    return _Parser(text).parse()
