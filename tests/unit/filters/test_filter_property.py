"""Property: the broker's filtered answer equals filtering the unfiltered answer locally, over random
batches (compressed, LogAppendTime, transactional with commit and abort markers, compacted with offset
gaps and empty batches) and random expressions, read_committed and not. Every rewritten batch passes
CRC-32C, keeps its header fields, decodes in kafka-python's record parser, and the consumer's next fetch
offset is the unfiltered one."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record import MemoryRecords

from kafkalite.client.fetcher import next_offset_of
from kafkalite.filters import compile_filter, filter_records, select_records
from kafkalite.filters.grammar import And, Between, Compare, In, IsNull, Node, Not, Or, Prefix
from kafkalite.records import Record, build_end_txn_marker_batch, iter_batches
from kafkalite.records.batch import LOG_APPEND_TIME, RecordBatchBuilder

KEYS = [None, b"a", b"ab", b"user-1", b"user-2", b"user-10"]
HVALS = [None, b"1", b"2", b"10", b"x", b"2.5"]

record_st = st.tuples(
    st.sampled_from(KEYS),
    st.binary(max_size=6),
    st.lists(st.tuples(st.sampled_from(["h", "g"]), st.sampled_from(HVALS)), max_size=2),
    st.integers(0, 12),
    st.integers(0, 2),  # offset gap before the record (compaction)
)
batch_st = st.fixed_dictionaries(
    {
        "records": st.lists(record_st, min_size=0, max_size=6),
        "codec": st.sampled_from([0, 0, 1, 2, 3, 4]),
        "log_append": st.booleans(),
        "tail_gap": st.integers(0, 2),  # compacted tail: last offset delta past the last record
        "txn": st.sampled_from([None, None, "commit", "abort", "open"]),
        "pid": st.integers(1, 3),
    }
)


def build_blob(specs: list[dict[str, Any]]) -> tuple[bytes, list[tuple[int, int]]]:
    """Batches at increasing offsets; transactions end with their marker. Returns (blob, aborted)."""
    out: list[bytes] = []
    aborted: list[tuple[int, int]] = []
    nxt = 0
    open_pids: dict[int, int] = {}
    for spec in specs:
        txn, pid = spec["txn"], spec["pid"]
        transactional = txn is not None
        if transactional and pid not in open_pids:
            open_pids[pid] = nxt
        b = RecordBatchBuilder(
            compression=spec["codec"],
            base_offset=nxt,
            timestamp_type=LOG_APPEND_TIME if spec["log_append"] else 0,
            producer_id=pid if transactional else -1,
            producer_epoch=0 if transactional else -1,
            base_sequence=0 if transactional else -1,
            is_transactional=transactional,
        )
        off = nxt
        for key, value, headers, ts, gap in spec["records"]:
            off += gap
            b.append_with_offset(off, key, value, headers, ts)
            off += 1
        if not spec["records"]:
            b._base_ts = b._max_ts = 5  # an empty batch left by compaction keeps its timestamps
        last_delta = max(off - nxt - 1, 0) + spec["tail_gap"]
        out.append(b.build(last_offset_delta=last_delta))
        nxt += last_delta + 1
        if txn in ("commit", "abort"):
            if txn == "abort":
                aborted.append((pid, open_pids[pid]))
            del open_pids[pid]
            out.append(build_end_txn_marker_batch(txn == "commit", pid, 0, 0, base_offset=nxt))
            nxt += 1
    return b"".join(out), aborted


def consume(blob: bytes, aborted: Sequence[tuple[int, int]] | None) -> list[Record]:
    """What a consumer hands out: control batches skipped, aborted transactions dropped (read_committed)."""
    pending = sorted(((f, p) for p, f in aborted or ()), reverse=True)
    pids: set[int] = set()
    out: list[Record] = []
    for batch in iter_batches(blob, verify_crc=True):
        while pending and pending[-1][0] <= batch.last_offset:
            pids.add(pending.pop()[1])
        if batch.is_control:
            if batch.producer_id in pids and batch.records[0].key == b"\x00\x00\x00\x00":
                pids.discard(batch.producer_id)  # an ABORT marker's key: version 0, type 0
            continue
        if batch.is_transactional and batch.producer_id in pids:
            continue
        out.extend(batch.records)
    return out


# -- random expressions and a plain reading of them (SQL three-valued logic, None for unknown)

NUM_FIELDS = ["offset", "timestamp", "headers.h"]
num_st = st.integers(-1, 40)


@st.composite
def atom_st(draw: st.DrawFn) -> str:
    kind = draw(st.integers(0, 9))
    nf = draw(st.sampled_from(NUM_FIELDS))
    sf = draw(st.sampled_from(["key", "headers.h", "headers.g"]))
    op = draw(st.sampled_from(["=", "<>", "<", "<=", ">", ">="]))
    n = draw(num_st)
    s = draw(st.sampled_from(["a", "user-1", "1", "x", "2"]))
    not_ = draw(st.sampled_from(["", "NOT "]))
    if kind == 0:
        return f"{nf} {op} {n}"
    if kind == 1:
        return f"{sf} {draw(st.sampled_from(['=', '<>']))} '{s}'"
    if kind == 2:
        return f"{nf} {not_}BETWEEN {n} AND {n + draw(st.integers(-2, 30))}"
    if kind == 3:
        vals = draw(st.lists(num_st, min_size=1, max_size=3))
        return f"{nf} {not_}IN ({', '.join(map(str, vals))})"
    if kind == 4:
        vals = draw(st.lists(st.sampled_from(["a", "ab", "user-1", "1", "x"]), min_size=1))
        return f"{sf} {not_}IN ({', '.join(repr(v) for v in vals)})"
    if kind == 5:
        return f"{sf} {not_}LIKE '{draw(st.sampled_from(['us', 'user-1', 'a', '']))}%'"
    if kind == 6:
        return f"{sf} {not_}STARTSWITH '{draw(st.sampled_from(['us', 'a', '1']))}'"
    if kind == 7:
        return f"{sf} IS {draw(st.sampled_from(['', 'NOT ']))}NULL"
    if kind == 8:
        return f"timestamp {op} {draw(st.integers(-1, 13))}"
    return f"offset {op} {n}"


expr_st = st.recursive(
    atom_st(),
    lambda inner: st.one_of(
        st.tuples(inner, inner).map(lambda t: f"({t[0]} AND {t[1]})"),
        st.tuples(inner, inner).map(lambda t: f"({t[0]} OR {t[1]})"),
        inner.map(lambda e: f"NOT ({e})"),
    ),
    max_leaves=6,
)


def _value(node: Any, r: Record, numeric: bool) -> Any:
    f = node.field
    if f.kind == "offset":
        return r.offset
    if f.kind == "timestamp":
        return r.timestamp
    v = r.key if f.kind == "key" else dict(r.headers).get(f.name)
    if v is None or not numeric:
        return v
    try:
        return float(v)
    except ValueError:
        return None


def reference(node: Node, r: Record) -> bool | None:
    if isinstance(node, Not):
        v = reference(node.operand, r)
        return None if v is None else not v
    if isinstance(node, And):
        a, b = reference(node.left, r), reference(node.right, r)
        return False if False in (a, b) else None if None in (a, b) else True
    if isinstance(node, Or):
        a, b = reference(node.left, r), reference(node.right, r)
        return True if True in (a, b) else None if None in (a, b) else False
    if isinstance(node, IsNull):
        return (_value(node, r, False) is None) != node.negated
    if isinstance(node, Compare):
        c = node.value
        x = _value(node, r, not isinstance(c, str))
        if x is None:
            return None
        if isinstance(c, str):
            c = c.encode()
        return {
            "=": x == c, "<>": x != c, "<": x < c, "<=": x <= c, ">": x > c, ">=": x >= c
        }[node.op]  # fmt: skip
    if isinstance(node, In):
        x = _value(node, r, not isinstance(node.values[0], str))
        if x is None:
            return None
        vals = [v.encode() if isinstance(v, str) else v for v in node.values]
        return (x in vals) != node.negated
    if isinstance(node, Between):
        x = _value(node, r, True)
        return None if x is None else (node.low <= x <= node.high) != node.negated
    if isinstance(node, Prefix):
        x = _value(node, r, False)
        return None if x is None else x.startswith(node.prefix.encode()) != node.negated
    raise AssertionError(node)


def _rows(records: list[Record]) -> list[tuple[Any, ...]]:
    return [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in records]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(batch_st, min_size=1, max_size=6), expr_st, st.booleans())
def test_broker_filtered_equals_local_filter(
    specs: list[dict[str, Any]], expr: str, read_committed: bool
) -> None:
    blob, aborted_all = build_blob(specs)
    aborted = aborted_all if read_committed else None
    flt = compile_filter(expr)
    out = filter_records(blob, flt, aborted)

    visible = consume(blob, aborted)
    want = [r for r in visible if reference(flt.tree, r) is True]
    assert _rows(consume(out, aborted)) == _rows(want), flt.source
    assert _rows(select_records(flt, visible)) == _rows(want)  # the client's local fallback
    # the consumer moves exactly as far as without the filter
    assert next_offset_of(out)[0] == next_offset_of(blob)[0]

    originals = {b.base_offset: b for b in iter_batches(blob)}
    theirs = MemoryRecords(out)
    for ours in iter_batches(out, verify_crc=True):
        src = originals[ours.base_offset]
        for name in (
            "last_offset_delta", "producer_id", "producer_epoch", "base_sequence",
            "base_timestamp", "max_timestamp", "partition_leader_epoch",
        ):  # fmt: skip
            assert getattr(ours, name) == getattr(src, name), name
        assert ours.attributes & ~7 == src.attributes & ~7
        if ours.records_count < src.records_count:
            assert ours.compression in (0, src.compression)
        # kafka-python's parser reads the same batch, CRC and records
        kb = theirs.next_batch()
        assert kb is not None and kb.validate_crc()
        assert kb.base_offset == ours.base_offset and kb.is_transactional == ours.is_transactional
        assert kb.is_control_batch == ours.is_control
        if not ours.is_control:
            got = [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in kb]
            assert got == _rows(ours.records)
    assert theirs.next_batch() is None
