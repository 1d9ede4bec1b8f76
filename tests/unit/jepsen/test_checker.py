"""The checker on hand-built histories: each anomaly planted is found (so the checker can fail), clean
histories (hand-built and generated) show none; liveness after heals; the printed table."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.jepsen.checker import ANOMALIES, check, liveness, render
from kafkalite.jepsen.history import History, Op


class Builder:
    """Short-hand for histories: each call records an invoke and its completion."""

    def __init__(self) -> None:
        self.h = History()

    def send(self, p: int, key: str, v: int, off: int | None, type: Any = "ok") -> None:
        inv = self.h.invoke(p, "send", [("send", key, v, None)])
        self.h.complete(inv, type, [("send", key, v, off)])

    def poll(self, p: int, key: str, recs: list[tuple[int, int]], **extra: Any) -> None:
        inv = self.h.invoke(p, "poll", [("poll", key, [])], **extra)
        self.h.complete(inv, "ok", [("poll", key, recs)])

    def final(self, key: str, recs: list[tuple[int, int]]) -> None:
        self.poll(-1, key, recs, final=True, isolation="read_committed")

    def txn(
        self, p: int, mops: list[Any], outcome: str = "commit", type: Any = "ok", **x: Any
    ) -> int:
        invoked = [(m[0], m[1], m[2], None) if m[0] == "send" else ("poll", m[1], []) for m in mops]
        inv = self.h.invoke(p, "txn", invoked, txn=outcome, **x)
        return self.h.complete(inv, type, mops).index

    def counts(self, **kw: Any) -> dict[str, int]:
        return check(self.h.ops(), **kw).counts


def only(counts: dict[str, int], **expected: int) -> None:
    assert counts == {**dict.fromkeys(ANOMALIES, 0), **expected}


def clean_queue() -> Builder:
    b = Builder()
    b.send(1, "q-0", 10, 0)
    b.send(2, "q-1", 20, 0)
    b.send(1, "q-0", 11, 1)
    b.send(2, "q-1", 21, 1)
    b.poll(3, "q-0", [(0, 10)], epoch=1)
    b.poll(3, "q-0", [(1, 11)], epoch=1)
    b.poll(3, "q-1", [(0, 20), (1, 21)], epoch=1)
    b.poll(3, "q-0", [(0, 10), (1, 11)], epoch=2)  # re-read after a rebalance: a new epoch
    b.final("q-0", [(0, 10), (1, 11)])
    b.final("q-1", [(0, 20), (1, 21)])
    return b


def test_a_clean_queue_history_has_no_anomaly() -> None:
    report = check(clean_queue().h.ops())
    assert report.valid and report.unread == 0
    assert report.op_counts[("send", "ok")] == 4 and report.op_counts[("poll", "ok")] == 6


def test_lost_write_needs_a_read_that_could_have_seen_it() -> None:
    b = Builder()
    b.send(1, "q-0", 10, 0)
    b.send(1, "q-0", 11, 1)
    b.send(1, "q-0", 12, 2, type="info")  # unknown: never lost
    b.send(1, "q-0", 13, None, type="fail")
    only(b.counts())
    assert check(b.h.ops()).unread == 2
    b.poll(2, "q-0", [(1, 11)])  # a read past offset 0 without 10
    only(b.counts(), **{"lost-write": 1})
    b.final("q-0", [(1, 11)])
    only(b.counts(), **{"lost-write": 1})
    b.send(1, "q-1", 30, 0)
    b.final("q-1", [])  # the final read of q-1 does not have 30
    only(b.counts(), **{"lost-write": 2})


def test_duplicate_unexpected_and_inconsistent_offset() -> None:
    b = clean_queue()
    b.final("q-0", [(0, 10), (1, 11), (2, 10)])
    only(b.counts(), duplicate=1)
    b = clean_queue()
    b.poll(4, "q-1", [(2, 99)])
    only(b.counts(), **{"unexpected-value": 1})
    b = clean_queue()
    b.send(1, "q-0", 12, 1)  # acknowledged at an offset that holds 11
    only(b.counts(), **{"inconsistent-offset": 1, "nonmonotonic-send": 1, "lost-write": 1})


def test_nonmonotonic_sends_and_polls() -> None:
    b = Builder()
    b.send(1, "q-0", 10, 5)
    b.send(1, "q-0", 11, 3)
    b.send(2, "q-0", 12, 4)  # another process: no order between them
    only(b.counts(), **{"nonmonotonic-send": 1})
    b = Builder()
    for v, off in ((10, 0), (11, 1), (12, 2)):
        b.send(1, "q-0", v, off)
    b.poll(3, "q-0", [(1, 11), (2, 12)], epoch=1)
    b.poll(3, "q-0", [(0, 10)], epoch=1)
    only(b.counts(), **{"nonmonotonic-poll": 1})
    b.poll(3, "q-0", [(0, 10), (1, 11)], epoch=2)
    only(b.counts(), **{"nonmonotonic-poll": 1})
    b.poll(4, "q-0", [(2, 12), (1, 11)])  # backwards inside one poll
    only(b.counts(), **{"nonmonotonic-poll": 2})


def test_aborted_read_only_counts_read_committed() -> None:
    b = Builder()
    b.txn(1, [("send", "t-0", 7, 0)], outcome="abort")
    b.txn(1, [("send", "t-0", 8, 2)])
    b.txn(1, [("send", "t-0", 9, None)], type="fail")
    b.poll(2, "t-0", [(0, 7), (2, 8)], isolation="read_uncommitted")
    only(b.counts())
    b.poll(3, "t-0", [(0, 7), (2, 8)], isolation="read_committed")
    only(b.counts(), **{"aborted-read": 1})
    b.final("t-0", [(2, 8), (4, 9)])  # the failed transaction's value, read committed
    only(b.counts(), **{"aborted-read": 2})


def test_a_record_consumed_by_two_committed_transactions_of_one_group() -> None:
    b = Builder()
    b.txn(1, [("send", "in", 1, 0)])
    g = {"group": "rpw", "isolation": "read_committed"}
    b.txn(2, [("poll", "in", [(0, 1)]), ("send", "out", 2, 0)], **g)
    b.txn(3, [("poll", "in", [(0, 1)]), ("send", "out", 3, 1)], outcome="abort", **g)
    b.txn(4, [("poll", "in", [(0, 1)]), ("send", "out", 4, None)], type="fail", **g)
    only(b.counts())  # the retries after an abort or a failure do not count
    b.txn(5, [("poll", "in", [(0, 1)]), ("send", "out", 5, 3)], group="other")
    only(b.counts())  # another group may read it too
    b.txn(6, [("poll", "in", [(0, 1)]), ("send", "out", 6, 4)], **g)
    only(b.counts(), **{"double-processing": 1})


def test_g0_write_cycle() -> None:
    b = Builder()
    b.txn(1, [("send", "x", 1, 0), ("send", "y", 2, 1)])
    b.txn(2, [("send", "x", 3, 1), ("send", "y", 4, 0)])
    report = check(b.h.ops())
    only(report.counts, G0=1)
    assert "ww" in report.examples["G0"][0]


def test_concurrent_transactions_interleaving_their_writes_are_no_cycle() -> None:
    """Two producers' transactions interleave in the partitions they share: Kafka has no write
    isolation, so offsets order nothing between transactions that overlapped in time."""
    h = History()
    t1 = h.invoke(1, "txn", [("send", "x", 1, None), ("send", "y", 2, None)], txn="commit")
    t2 = h.invoke(2, "txn", [("send", "x", 3, None), ("send", "y", 4, None)], txn="commit")
    h.complete(t1, "ok", [("send", "x", 1, 0), ("send", "y", 2, 1)])
    h.complete(t2, "ok", [("send", "x", 3, 1), ("send", "y", 4, 0)])
    only(check(h.ops()).counts)
    t3 = h.invoke(3, "txn", [("send", "x", 5, None)], txn="commit")
    h.complete(t3, "ok", [("send", "x", 5, 2)])  # after both: ordered after them
    t4 = h.invoke(4, "txn", [("send", "y", 6, None)], txn="commit")
    h.complete(t4, "ok", [("send", "y", 6, 2)])
    only(check(h.ops()).counts)


def test_an_open_transaction_reading_what_a_concurrent_one_committed_is_no_g1c() -> None:
    """T1 appends to x, T2 appends after it to x and y and commits, T1 then reads T2's y: legal in
    Kafka (offsets order nothing between the two), a G1c if the offsets were taken as a write order."""
    h = History()
    t1 = h.invoke(1, "txn", [("send", "x", 1, None), ("poll", "y", [])], txn="commit")
    t2 = h.invoke(2, "txn", [("send", "x", 2, None), ("send", "y", 3, None)], txn="commit")
    h.complete(t2, "ok", [("send", "x", 2, 1), ("send", "y", 3, 0)])
    h.complete(t1, "ok", [("send", "x", 1, 0), ("poll", "y", [(0, 3)])])
    only(check(h.ops()).counts)


def test_g1c_circular_information_flow() -> None:
    b = Builder()
    b.txn(1, [("send", "x", 1, 0), ("poll", "y", [(0, 2)])])
    b.txn(2, [("send", "y", 2, 0), ("poll", "x", [(0, 1)])])
    only(b.counts(), G1c=1)


def g_single(ends: dict[str, int] | None) -> Builder:
    b = Builder()
    b.txn(1, [("send", "x", 1, 0)])
    b.txn(2, [("send", "x", 2, 1), ("send", "y", 3, 0)])
    # a read of x up to the end (offset 0, next offset 1) that sees y from the transaction after it
    extra = {"ends": ends} if ends else {}
    b.txn(3, [("poll", "x", [(0, 1)]), ("poll", "y", [(0, 3)])], **extra)
    return b


def test_g_single_needs_a_read_that_reached_the_end() -> None:
    only(g_single({"x": 1, "y": 1}).counts(), **{"G-single": 1})
    only(g_single(None).counts())  # not known to have read to the end: no rw edge
    only(g_single(None).counts(rw_from_every_poll=True), **{"G-single": 1})
    only(g_single({"x": 5}).counts())  # the end was further: the poll just stopped early


def test_two_anti_dependencies_are_g2_not_g_single() -> None:
    b = Builder()
    b.txn(1, [("send", "x", 1, 0), ("send", "y", 2, 0)])
    ends = {"x": 1, "y": 1}
    b.txn(2, [("poll", "x", [(0, 1)]), ("send", "y", 3, 1)], ends=ends)
    b.txn(3, [("poll", "y", [(0, 2)]), ("send", "x", 4, 1)], ends=ends)
    report = check(b.h.ops())
    only(report.counts)  # Kafka's polls are not snapshots: shown apart, not an anomaly
    assert report.allowed["G2"] == 1 and "(G2, allowed)                      1" in render(report)


def test_an_aborted_transaction_takes_no_part_in_cycles() -> None:
    b = Builder()
    b.txn(1, [("send", "x", 1, 0), ("send", "y", 2, 1)])
    b.txn(2, [("send", "x", 3, 1), ("send", "y", 4, 0)], outcome="abort")
    only(b.counts())


def test_render_prints_every_row_and_the_operation_counts() -> None:
    b = clean_queue()
    b.txn(5, [("send", "t-0", 50, 0)], type="info")
    text = render(check(b.h.ops()), liveness(b.h.ops(), heals=[0.0]))
    for name in ANOMALIES:
        assert f"\n{name} " in text and text.split(f"\n{name} ")[1].split("\n")[0].strip() == "0"
    assert "send" in text and "poll" in text and "txn" in text
    assert "heal at" in text


def op(i: int, t: float, process: Any, type: Any, f: str, value: Any) -> Op:
    return Op(i, t, process, type, f, value)


def test_liveness_is_the_longest_gap_between_acks_after_each_heal() -> None:
    s = [("send", "k-0", 0, None)]
    ops = [
        op(0, 0.0, "nemesis", "info", "start", {"fault": "kill"}),
        op(1, 1.0, "nemesis", "info", "stop", {"fault": "kill"}),
        op(2, 1.5, 1, "invoke", "send", s),
        op(3, 6.0, 1, "ok", "send", [("send", "k-0", 0, 0)]),  # 5 s after the heal
        op(4, 6.5, 1, "invoke", "send", [("send", "k-0", 1, None)]),
        op(5, 7.0, 1, "ok", "send", [("send", "k-0", 1, 1)]),
        op(6, 8.0, 1, "invoke", "send", [("send", "k-1", 2, None)]),
        op(7, 9.0, 1, "fail", "send", [("send", "k-1", 2, None)]),
        op(8, 10.0, "nemesis", "info", "start", {"fault": "pause"}),
        op(9, 20.0, "nemesis", "info", "stop", {"fault": "pause"}),
        op(10, 21.0, 1, "invoke", "send", [("send", "k-0", 3, None)]),
        op(11, 22.0, 1, "ok", "send", [("send", "k-0", 3, 2)]),
    ]
    rows = liveness(ops)
    assert [h for h, _ in rows] == [1.0, 20.0]
    assert rows[0][1] == {"k-0": 5.0, "k-1": 9.0}  # k-1 never acked until the next fault (10 s)
    assert rows[1][1] == {"k-0": 2.0, "k-1": 2.0}


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 2), st.integers(1, 3)), min_size=1, max_size=30),
    st.data(),
)
def test_generated_serial_histories_are_clean_and_a_dropped_record_is_lost(
    sends: list[tuple[int, int]], data: st.DataObject
) -> None:
    """Serial histories of a correct log (offsets in order, polls of contiguous ranges) are clean;
    removing one acknowledged record from the final read makes exactly one lost write."""
    b = Builder()
    logs: dict[str, list[tuple[int, int]]] = {}
    position: dict[int, tuple[int, int]] = {}  # partition -> (epoch, last offset polled)
    for value, (part, process) in enumerate(sends):
        key = f"g-{part}"
        log = logs.setdefault(key, [])
        b.send(process, key, value, len(log))
        log.append((len(log), value))
        lo = data.draw(st.integers(0, len(log) - 1))
        epoch, last = position.get(part, (0, -1))
        epoch += lo <= last  # a seek back is a new assignment: a new epoch
        b.poll(10 + part, key, log[lo:], epoch=epoch)
        position[part] = (epoch, len(log) - 1)
    for key, log in sorted(logs.items()):
        b.final(key, log)
    report = check(b.h.ops())
    assert report.valid, report.examples
    key = data.draw(st.sampled_from(sorted(logs)))
    drop = data.draw(st.integers(0, len(logs[key]) - 1))
    changed: list[Op] = []
    for o in b.h.ops():  # the same history but its final read of `key` misses one record
        if o.extra.get("final") and o.type == "ok" and o.value[0][1] == key:
            recs = [r for r in o.value[0][2] if r != logs[key][drop]]
            o = Op(o.index, o.time, o.process, o.type, o.f, [("poll", key, recs)], o.extra)
        changed.append(o)
    dropped = check(changed)
    # still read by the polls, so only lost if no poll saw it
    polled = any(
        logs[key][drop] in o.value[0][2]
        for o in b.h.ops()
        if o.type == "ok" and o.f == "poll" and not o.extra.get("final")
    )
    assert dropped.counts["lost-write"] == (0 if polled else 1)
