"""Spark filter pushdown for the batch reader (issue 35): `pushFilters` filters on topic, partition, offset,
timestamp and key become partition pruning, offset-range cuts, ListOffsets-by-time cuts and a fetch filter.

Pure translation (`push_filters`) plus the planning step (`Pushdown.cut`) and the executors' local fallback
(`filter_answer`) for a broker that did not apply the fetch filter.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringStartsWith,
)

from kafkalite.filters import CompiledFilter, FilterError, NotFilterable, compile_filter
from kafkalite.filters import filter_records as _filter_records
from kafkalite.spark.offsets import TopicPartitionKey

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_CMP = {GreaterThan: ">", GreaterThanOrEqual: ">=", LessThan: "<", LessThanOrEqual: "<="}


class FetchFilterError(RuntimeError):
    """The fetch filter could not be applied (refused by the broker, or a legacy message set that the
    local fallback cannot filter)."""


def filter_answer(
    blob: bytes, flt: CompiledFilter, aborted: Sequence[tuple[int, int]] | None
) -> bytes:
    """The local fallback: `blob` with only the records `flt` selects, as the broker would have sent
    it. `aborted` is the fetch answer's (first offset, producer id) list (read_committed) or None."""
    pairs = [(pid, first) for first, pid in aborted] if aborted else None
    try:
        return _filter_records(blob, flt, pairs)
    except NotFilterable as exc:
        raise FetchFilterError(
            f"the broker did not apply the fetch filter and the answer holds a legacy (magic 0/1) "
            f"message set that cannot be filtered here: {exc}"
        ) from None


def _string(value: Any) -> str | None:
    """A key or topic literal as filter-language text, or None when it cannot be expressed."""
    if isinstance(value, (bytes, bytearray)):
        try:
            value = bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return None
    if not isinstance(value, str):
        return None
    return "'" + value.replace("'", "''") + "'"


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _micros(value: Any) -> int | None:
    """A Spark TimestampType value as microseconds since the epoch. PySpark hands pushed timestamps over
    as zone-aware datetimes; a naive one (TIMESTAMP_NTZ) has no instant, so it is not pushed (None)."""
    if not isinstance(value, dt.datetime) or value.tzinfo is None:
        return None
    delta: dt.timedelta = value - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _ms_bound(op: str, us: int) -> tuple[str, int] | None:
    """`timestamp op us` over millisecond timestamps t (compared as t*1000 op us) as `t op' ms`."""
    floor = us // 1000
    ceil = -((-us) // 1000)
    if op == ">":
        return ">", floor
    if op == ">=":
        return ">=", ceil
    if op == "<":
        return "<", ceil
    if op == "<=":
        return "<=", floor
    if op == "=":
        return ("=", floor) if us % 1000 == 0 else None
    return None


def _matches(op: str, have: Any, values: tuple[Any, ...]) -> bool:
    if op == "in":
        return have in values
    if op == "not in":
        return have not in values
    v = values[0]
    if op == "prefix":
        return isinstance(have, str) and have.startswith(v)
    return bool(
        {
            "=": have == v,
            ">": have > v,
            ">=": have >= v,
            "<": have < v,
            "<=": have <= v,
        }[op]
    )


@dataclass
class Pushdown:
    """What the pushed filters ask for. Picklable (it travels with the reader to the executors)."""

    tp_terms: list[tuple[str, str, tuple[Any, ...]]] = field(default_factory=list)
    offset_low: int = 0
    offset_high: int | None = None  # exclusive
    ts_low: int | None = None  # ms: only records with timestamp >= ts_low
    broker_terms: list[str] = field(default_factory=list)
    pushed: list[str] = field(default_factory=list)  # a readable account, for logs and tests

    def keeps(self, tp: TopicPartitionKey) -> bool:
        for column, op, values in self.tp_terms:
            have = tp[0] if column == "topic" else tp[1]
            if not _matches(op, have, values):
                return False
        return True

    def fetch_filter(self, base: str | None) -> str | None:
        """`base` (the kafkalite.filter option) AND every broker term, or None."""
        parts = ([base] if base else []) + self.broker_terms
        if not parts:
            return None
        if len(parts) == 1:
            return parts[0]
        return " AND ".join(f"({p})" for p in parts)

    def cut(
        self,
        start: Mapping[TopicPartitionKey, int],
        end: Mapping[TopicPartitionKey, int],
        for_times: Callable[
            [Mapping[TopicPartitionKey, int]], Mapping[TopicPartitionKey, int | None]
        ],
    ) -> tuple[dict[TopicPartitionKey, int], dict[TopicPartitionKey, int]]:
        """The planned [start, end) offsets of the partitions kept, cut by the offset bounds and by the
        first offset at or after ts_low (ListOffsets by timestamp through `for_times`)."""
        tps = [tp for tp in end if tp in start and self.keeps(tp)]
        new_start = {tp: max(start[tp], self.offset_low) for tp in tps}
        new_end = {
            tp: end[tp] if self.offset_high is None else min(end[tp], self.offset_high)
            for tp in tps
        }
        live = [tp for tp in tps if new_end[tp] > new_start[tp]]
        if self.ts_low is not None and live:
            found = for_times({tp: self.ts_low for tp in live})
            for tp in live:
                off = found.get(tp)
                # no record at or after ts_low: nothing of this partition matches
                new_start[tp] = new_end[tp] if off is None else max(new_start[tp], off)
        for tp in tps:
            new_start[tp] = min(new_start[tp], new_end[tp])
        return new_start, new_end

    # -- translation of one filter; True when it is fully handled (Spark need not apply it)
    def add(self, f: Filter) -> bool:
        negated = isinstance(f, Not)
        inner = f.child if isinstance(f, Not) else f
        attr = getattr(inner, "attribute", None)
        if not isinstance(attr, tuple) or len(attr) != 1:
            return False
        column = attr[0]
        if column in ("topic", "partition"):
            return self._add_tp(column, inner, negated)
        if column == "offset":
            return self._add_offset(inner, negated)
        if column == "timestamp":
            self._add_timestamp(inner, negated)
            return False  # partially pushed: ranges and batches cut, Spark checks the rows again
        if column == "key":
            return self._add_key(inner, negated)
        return False

    def _term(self, text: str) -> bool:
        try:
            compile_filter(text)
        except FilterError:
            return False
        self.broker_terms.append(text)
        self.pushed.append(text)
        return True

    def _add_tp(self, column: str, f: Filter, negated: bool) -> bool:
        conv: Callable[[Any], Any] = (
            (lambda v: v if isinstance(v, str) else None) if column == "topic" else _int
        )
        if isinstance(f, IsNotNull) and not negated:
            return True  # never null
        if isinstance(f, (EqualTo, EqualNullSafe)):
            v = conv(f.value)
            if v is None:
                return False
            term = (column, "not in" if negated else "in", (v,))
        elif isinstance(f, In):
            vals = tuple(conv(v) for v in f.value)
            if any(v is None for v in vals):
                return False
            term = (column, "not in" if negated else "in", vals)
        elif type(f) in _CMP and not negated:
            v = conv(getattr(f, "value", None))
            if v is None:
                return False
            term = (column, _CMP[type(f)], (v,))
        elif isinstance(f, StringStartsWith) and column == "topic" and not negated:
            term = (column, "prefix", (f.value,))
        else:
            return False
        self.tp_terms.append(term)
        self.pushed.append(f"{column} {term[1]} {term[2]!r}")
        return True

    def _add_offset(self, f: Filter, negated: bool) -> bool:
        if isinstance(f, IsNotNull) and not negated:
            return True
        if isinstance(f, In):
            vals = [_int(v) for v in f.value]
            if not vals or any(v is None for v in vals):
                return False
            ints = sorted(v for v in vals if v is not None)
            text = f"offset {'NOT ' if negated else ''}IN ({', '.join(map(str, ints))})"
            if not negated:
                self.offset_low = max(self.offset_low, ints[0])
                self._high(ints[-1] + 1)
            return self._term(text)
        if not isinstance(f, (EqualTo, EqualNullSafe)) and type(f) not in _CMP:
            return False
        v = _int(getattr(f, "value", None))
        if v is None:
            return False
        op = "=" if isinstance(f, (EqualTo, EqualNullSafe)) else _CMP[type(f)]
        if negated:
            return self._term(f"NOT offset {op} {v}")
        if op in ("=", ">=", ">"):
            self.offset_low = max(self.offset_low, v + 1 if op == ">" else v)
        if op in ("=", "<", "<="):
            self._high(v if op == "<" else v + 1)
        self.pushed.append(f"offset {op} {v}")
        return True

    def _high(self, high: int) -> None:
        self.offset_high = high if self.offset_high is None else min(self.offset_high, high)

    def _add_timestamp(self, f: Filter, negated: bool) -> None:
        if negated or not (isinstance(f, EqualTo) or type(f) in _CMP):
            return
        us = _micros(getattr(f, "value", None))
        if us is None:
            return
        bound = _ms_bound("=" if isinstance(f, EqualTo) else _CMP[type(f)], us)
        if bound is None:
            return
        op, ms = bound
        if op in (">", ">=", "="):
            low = ms + 1 if op == ">" else ms
            self.ts_low = low if self.ts_low is None else max(self.ts_low, low)
        self._term(f"timestamp {op} {ms}")

    def _add_key(self, f: Filter, negated: bool) -> bool:
        no = "NOT " if negated else ""
        if isinstance(f, IsNull):
            return self._term(f"key IS {no}NULL")
        if isinstance(f, IsNotNull):
            return self._term(f"key IS {'' if negated else 'NOT '}NULL")
        if isinstance(f, (EqualTo, EqualNullSafe)):
            lit = _string(f.value)
            return lit is not None and self._term(f"{no}key = {lit}")
        if isinstance(f, In):
            lits = [_string(v) for v in f.value]
            if not lits or any(v is None for v in lits):
                return False
            return self._term(f"key {no}IN ({', '.join(str(v) for v in lits)})")
        if isinstance(f, StringStartsWith):
            lit = _string(f.value)
            return lit is not None and self._term(f"{no}key STARTSWITH {lit}")
        return False


def push_filters(filters: Iterable[Filter]) -> tuple[Pushdown, list[Filter]]:
    """(what to push, the filters Spark must still apply: unsupported and partially pushed ones)."""
    pd = Pushdown()
    rest = [f for f in filters if not pd.add(f)]
    return pd, rest


PUSHDOWN_OPTION = "kafkalite.pushdown"


def pushdown_enabled(options: Mapping[str, str]) -> bool:
    """The `kafkalite.pushdown` option (default false). PySpark fails a read whose reader implements
    pushFilters unless spark.sql.python.filterPushdown.enabled is true (false by default), so the
    pushdown reader is chosen only when asked for."""
    for k, v in options.items():
        if str(k).lower() == PUSHDOWN_OPTION:
            text = str(v).strip().lower()
            if text not in ("true", "false"):
                raise ValueError(f"Option '{PUSHDOWN_OPTION}' must be true or false, got {v!r}")
            return text == "true"
    return False
