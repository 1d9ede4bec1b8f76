"""The fetch-filter language: what parses, what each fault says (position, what was expected), the type
check, the limits, and the compiled function against a plain three-valued reading of the tree."""

from __future__ import annotations

import pytest

from kafkalite.filters import FilterError, compile_filter, parse
from kafkalite.filters.compiler import ALL, NONE, SOME

H = [("region", b"eu"), ("n", b"42"), ("x y", b"7.5"), ("empty", None)]


def m(expr: str, offset: int = 10, ts: int = 1000, key: bytes | None = b"user-42") -> bool:
    return compile_filter(expr).match(offset, ts, key, H)


@pytest.mark.parametrize(
    ("expr", "want"),
    [
        ("key = 'user-42'", True),
        ("KEY = 'user-42' and Timestamp > 999", True),
        ("key <> 'user-42'", False),
        ("key != 'user-1'", True),
        ("key IN ('a', 'user-42')", True),
        ("key NOT IN ('a', 'user-42')", False),
        ("key LIKE 'user-%'", True),
        ("key LIKE 'user-42'", True),
        ("key NOT LIKE 'user-%'", False),
        ("key STARTSWITH 'user'", True),
        ("offset BETWEEN 10 AND 20", True),
        ("offset NOT BETWEEN 10 AND 20", False),
        ("10 <= offset", True),
        ("timestamp >= 1000.5", False),
        ("offset > -1", True),
        ("headers.region = 'eu'", True),
        ("headers.n = 42 AND headers.n > 41.5", True),
        ("headers['x y'] BETWEEN 7 AND 8", True),
        ("headers.region > 3", False),  # not a number: unknown, so not selected
        ("NOT headers.region > 3", False),  # and NOT of unknown is unknown
        ("headers.missing = 'a'", False),
        ("NOT headers.missing = 'a'", False),
        ("headers.missing IS NULL", True),
        ("headers.empty IS NULL", True),
        ("headers.region IS NOT NULL", True),
        ("headers.missing = 'a' OR offset = 10", True),
        ("NOT (headers.missing = 'a' AND offset = 11)", True),  # unknown AND false = false
        ("key = 'it''s'", False),
        ("(key = 'a' OR key = 'user-42') AND NOT offset IN (1, 2, 3)", True),
    ],
)
def test_matches(expr: str, want: bool) -> None:
    assert m(expr) is want


def test_null_key() -> None:
    assert m("key IS NULL", key=None)
    assert not m("key = 'a'", key=None)
    assert not m("NOT key = 'a'", key=None)
    assert not m("key NOT LIKE 'a%'", key=None)


@pytest.mark.parametrize(
    ("expr", "fault"),
    [
        ("", "empty filter expression"),
        (
            "key =",
            "expected a literal (a number or a 'quoted string'), found the end of the expression (at character 5)",
        ),
        (
            "key = 'a' b",
            "expected AND, OR or the end of the expression, found 'b' (at character 10)",
        ),
        ("(key = 'a'", "expected ')'"),
        ("region = 'eu'", "unknown field 'region'"),
        ("headers.", "expected a header name"),
        ("key > 5", "key is a string"),
        ("key > 'a'", "strings support only =, <>"),
        ("timestamp = 'x'", "timestamp is a number"),
        ("offset IN (1, 'a')", "mixes strings and numbers"),
        ("offset IN ('a')", "its IN list holds strings"),
        ("key BETWEEN 1 AND 2", "BETWEEN needs a numeric field"),
        ("offset BETWEEN 'a' AND 2", "BETWEEN needs numbers"),
        ("offset LIKE 'a%'", "LIKE needs a string field"),
        ("key LIKE 'a_b%'", "LIKE supports only a prefix pattern"),
        ("key LIKE '%a'", "LIKE supports only a prefix pattern"),
        ("key = 'abc", "unterminated string literal (at character 6)"),
        ("key = #", "unexpected character '#'"),
        ("key NOT = 'a'", "expected IN, BETWEEN, LIKE or STARTSWITH after NOT"),
        ("offset IS 5", "expected NULL"),
        ("key = 'a' AND", "expected a field"),
        ("x" * 4097, "longer than the 4096 allowed"),
        ("(" * 70 + "offset = 1" + ")" * 70, "nested deeper than 64 levels"),
        ("NOT " * 70 + "offset = 1", "nested deeper than 64 levels"),
    ],
)
def test_faults_name_what_and_where(expr: str, fault: str) -> None:
    with pytest.raises(FilterError) as info:
        compile_filter(expr)
    assert fault in str(info.value)


def test_parse_is_cached_by_text() -> None:
    assert compile_filter("offset = 3") is compile_filter("offset = 3")
    assert parse("offset = 3") == compile_filter("offset = 3").tree


@pytest.mark.parametrize(
    ("expr", "base", "delta", "max_ts", "log_append", "want"),
    [
        ("offset >= 100", 100, 9, 0, False, ALL),
        ("offset >= 100", 90, 9, 0, False, NONE),
        ("offset >= 100", 95, 9, 0, False, SOME),
        ("offset IN (3, 50)", 10, 9, 0, False, NONE),
        ("offset = 10", 10, 0, 0, False, ALL),
        ("timestamp > 500", 0, 9, 500, False, NONE),  # max timestamp bounds from above
        ("timestamp > 500", 0, 9, 501, False, SOME),
        ("timestamp < 500", 0, 9, 400, False, ALL),
        ("timestamp >= 500", 0, 9, 600, True, ALL),  # LogAppendTime: every record has it
        ("NOT timestamp > 500", 0, 9, 500, False, ALL),
        ("key = 'a' AND offset < 5", 10, 9, 0, False, NONE),
        ("key = 'a' OR offset < 5", 0, 3, 0, False, ALL),
        ("key = 'a' OR offset < 5", 10, 3, 0, False, SOME),
        ("key = 'a'", 0, 3, 0, False, SOME),
        ("offset IS NULL", 0, 3, 0, False, NONE),
    ],
)
def test_batch_judgement(
    expr: str, base: int, delta: int, max_ts: int, log_append: bool, want: int
) -> None:
    assert compile_filter(expr).judge_batch(base, delta, max_ts, log_append) == want


def test_batch_judgement_is_sound_exhaustively() -> None:
    """ALL only when every offset / timestamp the header allows matches, NONE only when none does,
    for every operator near every boundary (CreateTime: no lower bound, LogAppendTime: one value)."""
    templates = [f"{{f}} {op} {{c}}" for op in ("=", "<>", "<", "<=", ">", ">=")] + [
        "{f} BETWEEN {c} AND 3",
        "{f} NOT BETWEEN {c} AND 3",
        "{f} IN ({c}, 2)",
        "{f} NOT IN ({c}, 2)",
        "NOT {f} > {c}",
        "{f} >= {c} AND {f} < 3",
        "{f} < {c} OR {f} > 3",
    ]
    checked = {ALL: 0, NONE: 0}
    for template in templates:
        for c in range(-1, 6):
            for lo in range(0, 5):
                for hi in range(lo, 5):
                    f_off = compile_filter(template.format(f="offset", c=c))
                    verdict = f_off.judge_batch(lo, hi - lo, 0, False)
                    got = {f_off.match(o, 0, None, []) for o in range(lo, hi + 1)}
                    if verdict in checked:
                        checked[verdict] += 1
                        assert got == {verdict == ALL}, (template, c, lo, hi)
                f_ts = compile_filter(template.format(f="timestamp", c=c))
                for log_append in (False, True):
                    verdict = f_ts.judge_batch(0, 0, lo, log_append)
                    stamps = [lo] if log_append else range(-3, lo + 1)
                    got = {f_ts.match(0, t, None, []) for t in stamps}
                    if verdict in checked:
                        checked[verdict] += 1
                        assert got == {verdict == ALL}, (template, c, lo, log_append)
    assert checked[ALL] > 50 and checked[NONE] > 50
