"""A checked filter tree compiled once into a Python function over (offset, timestamp, key, headers), and
the whole-batch judgement from a batch header's offset range and max timestamp (ALL / NONE / SOME).

SQL's three-valued logic without a third value at run time: each node compiles to the test "is TRUE" or
the test "is FALSE" (NOT swaps them), so a missing header or null key makes a comparison neither.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kafkalite.filters.grammar import (
    And,
    Between,
    Compare,
    Field,
    In,
    IsNull,
    Literal,
    Node,
    Not,
    Or,
    Prefix,
    parse,
)

Header = tuple[str, bytes | None]
# match(offset, timestamp, key, headers) -> whether the record is selected
Predicate = Callable[[int, int, bytes | None, Sequence[Header]], bool]

ALL = 1  # every record of the batch matches: send it as it is
NONE = 0  # no record matches: leave it out
SOME = -1  # decode and test each record

_NEG_INF = -math.inf


def _num(v: bytes | None) -> int | float | None:
    """A header value read as a number (decimal text), or None when it is absent or not a number."""
    if v is None:
        return None
    try:
        return int(v)
    except ValueError:
        try:
            return float(v)
        except ValueError:
            return None


class _Gen:
    """Writes the Python source of the TRUE / FALSE tests; literals go in as named constants."""

    def __init__(self) -> None:
        self.consts: dict[str, object] = {"_num": _num}
        self.uses_headers = False

    def const(self, value: object) -> str:
        name = f"c{len(self.consts)}"
        self.consts[name] = value
        return name

    def operand(self, field: Field, numeric: bool) -> tuple[str, bool]:
        """(expression, may be None) for a field's value."""
        if field.kind == "offset":
            return "o", False
        if field.kind == "timestamp":
            return "t", False
        if field.kind == "key":
            return "k", True
        self.uses_headers = True
        get = f"d.get({self.const(field.name)})"
        return (f"_num({get})" if numeric else get), True

    def value(self, v: Literal) -> str:
        return self.const(v.encode() if isinstance(v, str) else v)

    def gen(self, node: Node, want: bool) -> str:
        """Source of "node is TRUE" (want) or "node is FALSE" (not want)."""
        if isinstance(node, Not):
            return self.gen(node.operand, not want)
        if isinstance(node, And):
            a, b = self.gen(node.left, want), self.gen(node.right, want)
            return f"({a} {'and' if want else 'or'} {b})"
        if isinstance(node, Or):
            a, b = self.gen(node.left, want), self.gen(node.right, want)
            return f"({a} {'or' if want else 'and'} {b})"
        if isinstance(node, IsNull):
            x, nullable = self.operand(node.field, False)
            if not nullable:
                return "False" if want != node.negated else "True"
            return f"({x} is None)" if want != node.negated else f"({x} is not None)"
        if isinstance(node, Compare):
            op = node.op if want else _INVERSE[node.op]
            x, nullable = self.operand(node.field, not isinstance(node.value, str))
            py = "!=" if op == "<>" else "==" if op == "=" else op
            c = self.value(node.value)
            return self._guarded(x, nullable, f"_v {py} {c}")
        if isinstance(node, In):
            x, nullable = self.operand(node.field, not isinstance(node.values[0], str))
            c = self.const(frozenset(self.consts_of(node.values)))
            inside = want != node.negated
            return self._guarded(x, nullable, f"_v {'in' if inside else 'not in'} {c}")
        if isinstance(node, Between):
            x, nullable = self.operand(node.field, True)
            lo, hi = self.const(node.low), self.const(node.high)
            inside = want != node.negated
            test = f"{lo} <= _v <= {hi}" if inside else f"not ({lo} <= _v <= {hi})"
            return self._guarded(x, nullable, test)
        if isinstance(node, Prefix):
            x, nullable = self.operand(node.field, False)
            c = self.const(node.prefix.encode())
            starts = want != node.negated
            return self._guarded(x, nullable, f"{'' if starts else 'not '}_v.startswith({c})")
        raise AssertionError(f"unknown node {node!r}")

    @staticmethod
    def consts_of(values: Sequence[Literal]) -> list[object]:
        return [v.encode() if isinstance(v, str) else v for v in values]

    @staticmethod
    def _guarded(x: str, nullable: bool, test: str) -> str:
        """`test` on the value `_v`, false when the value is null (SQL: the comparison is unknown)."""
        if not nullable:
            return "(" + test.replace("_v", x) + ")"
        return f"((_v := {x}) is not None and {test})"


_INVERSE = {"=": "<>", "<>": "=", "<": ">=", ">=": "<", ">": "<=", "<=": ">"}


# -- whole-batch judgement ------------------------------------------------------------------------


def _judge_range(node: Node, lo: float, hi: float, field: str) -> int:
    """Whether a numeric atom over `field` holds for ALL, NONE or SOME values in [lo, hi]."""
    if isinstance(node, IsNull):
        return ALL if node.negated else NONE  # offset and timestamp are never null
    if isinstance(node, Compare):
        c = node.value
        assert not isinstance(c, str)
        op = node.op
        if op == "=":
            r = ALL if lo == hi == c else NONE if c < lo or c > hi else SOME
        elif op == "<>":
            r = NONE if lo == hi == c else ALL if c < lo or c > hi else SOME
        elif op == "<":
            r = ALL if hi < c else NONE if lo >= c else SOME
        elif op == "<=":
            r = ALL if hi <= c else NONE if lo > c else SOME
        elif op == ">":
            r = ALL if lo > c else NONE if hi <= c else SOME
        else:  # >=
            r = ALL if lo >= c else NONE if hi < c else SOME
        return r
    if isinstance(node, Between):
        r = (
            ALL
            if node.low <= lo and hi <= node.high
            else NONE
            if hi < node.low or lo > node.high or node.low > node.high
            else SOME
        )
        return _flip(r) if node.negated else r
    if isinstance(node, In):
        nums = [v for v in node.values if not isinstance(v, str)]
        if lo == hi:
            r = ALL if lo in nums else NONE
        else:
            r = NONE if all(v < lo or v > hi for v in nums) else SOME
        return _flip(r) if node.negated else r
    return SOME


def _flip(r: int) -> int:
    return SOME if r == SOME else ALL if r == NONE else NONE


def judge(node: Node, first_offset: int, last_offset: int, ts_low: float, ts_high: float) -> int:
    """ALL / NONE / SOME for a batch whose records lie in [first_offset, last_offset] and whose
    timestamps lie in [ts_low, ts_high]; key and header atoms are SOME (only records can tell)."""
    if isinstance(node, Not):
        return _flip(judge(node.operand, first_offset, last_offset, ts_low, ts_high))
    if isinstance(node, (And, Or)):
        a = judge(node.left, first_offset, last_offset, ts_low, ts_high)
        stop = NONE if isinstance(node, And) else ALL
        if a == stop:
            return a
        b = judge(node.right, first_offset, last_offset, ts_low, ts_high)
        if b == stop:
            return b
        return SOME if SOME in (a, b) else a
    field = node.field
    if field.kind == "offset":
        return _judge_range(node, first_offset, last_offset, "offset")
    if field.kind == "timestamp":
        return _judge_range(node, ts_low, ts_high, "timestamp")
    return SOME


@dataclass(frozen=True, slots=True)
class CompiledFilter:
    """An expression parsed, checked and compiled: `match` per record, `judge_batch` per header."""

    expression: str
    tree: Node
    match: Predicate
    source: str
    uses_time: bool
    uses_offset: bool

    def judge_batch(
        self, base_offset: int, last_offset_delta: int, max_timestamp: int, log_append_time: bool
    ) -> int:
        """ALL / NONE / SOME from a v2 batch header. CreateTime batches bound timestamps from above
        by the header's max timestamp (trusted as Kafka's time index trusts it) and not from below
        (the base timestamp is the first record's, not the least); LogAppendTime stamps them all."""
        if not (self.uses_time or self.uses_offset):
            return SOME
        low = max_timestamp if log_append_time else _NEG_INF
        return judge(self.tree, base_offset, base_offset + last_offset_delta, low, max_timestamp)


def _fields(node: Node) -> set[str]:
    if isinstance(node, Not):
        return _fields(node.operand)
    if isinstance(node, (And, Or)):
        return _fields(node.left) | _fields(node.right)
    return {node.field.kind}


def compile_tree(expression: str, tree: Node) -> CompiledFilter:
    g = _Gen()
    body = g.gen(tree, True)
    prelude = "    d = dict(h)\n" if g.uses_headers else ""
    source = f"def match(o, t, k, h):\n{prelude}    return bool({body})\n"
    namespace: dict[str, object] = dict(g.consts)
    # the source is ours: literals reach it only as named constants, never as text
    exec(compile(source, "<fetch filter>", "exec"), namespace)
    fn = namespace["match"]
    fields = _fields(tree)
    return CompiledFilter(
        expression,
        tree,
        fn,  # type: ignore[arg-type]
        source,
        "timestamp" in fields,
        "offset" in fields,
    )


@functools.lru_cache(maxsize=256)
def compile_filter(expression: str) -> CompiledFilter:
    """Parse, type-check and compile once; cached by the expression string (a fetch session sends the
    same string every time). Raises FilterError."""
    return compile_tree(expression, parse(expression))
