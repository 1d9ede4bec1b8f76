"""The history format: invoke / complete / nemesis ops, thread safety, and the JSON-lines round trip."""

from __future__ import annotations

import itertools
import threading
from pathlib import Path

import pytest

from kafkalite.jepsen.history import History, Op


def test_invoke_complete_and_nemesis_are_recorded_in_order() -> None:
    h = History()
    inv = h.invoke(1, "send", [("send", "jepsen-0", 7, None)], txn="commit")
    n = h.nemesis("start", {"fault": "partition", "nodes": ["b1"]})
    ok = h.complete(inv, "ok", [("send", "jepsen-0", 7, 42)], took=0.1)
    assert [o.index for o in h.ops()] == [0, 1, 2]
    assert (inv.type, n.type, ok.type) == ("invoke", "info", "ok")
    assert n.process == "nemesis" and n.f == "start"
    assert ok.process == 1 and ok.f == "send"
    assert ok.extra == {"txn": "commit", "took": 0.1}
    assert ok.time >= inv.time >= 0
    # value None keeps the invoke's value
    assert h.complete(inv, "info").value == inv.value
    with pytest.raises(ValueError):
        h.complete(inv, "invoke")


def test_save_and_load_give_back_the_same_ops(tmp_path: Path) -> None:
    h = History()
    a = h.invoke(0, "poll", [("poll", "jepsen-1", [])])
    h.complete(a, "ok", [("poll", "jepsen-1", [(0, 5), (1, 9)])])
    b = h.invoke("w2", "txn", [("send", "jepsen-1", 11, None), ("poll", "jepsen-2", [])])
    h.complete(b, "fail", error="INVALID_TXN_STATE")
    h.nemesis("stop", {"fault": "kill", "broker": 2})
    path = tmp_path / "history.jsonl"
    h.save(path)
    loaded = History.load(path)
    assert loaded.ops() == h.ops()
    # appending after a load continues the indexes and the clock
    c = loaded.invoke(0, "send", [])
    assert c.index == 5 and c.time >= h.ops()[-1].time


def test_unknown_op_type_is_refused() -> None:
    line = Op(0, 0.0, 1, "ok", "send", []).to_json().replace('"ok"', '"maybe"')
    with pytest.raises(ValueError, match="unknown op type"):
        Op.from_json(line)


def test_threads_get_distinct_consecutive_indexes() -> None:
    h = History()

    def work(p: int) -> None:
        for i in range(200):
            h.complete(h.invoke(p, "send", [("send", "k-0", p * 1000 + i, None)]), "ok")

    threads = [threading.Thread(target=work, args=(p,)) for p in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ops = h.ops()
    assert [o.index for o in ops] == list(range(1600))
    assert all(a.time <= b.time for a, b in itertools.pairwise(ops))
