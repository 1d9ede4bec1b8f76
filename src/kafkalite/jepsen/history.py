"""The history of a fault bench: every operation's invoke and its ok / fail / info, Jepsen-style.

Owns `Op` and the thread-safe `History` that workloads and the nemesis write and the checker reads; JSON lines.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

OpType = Literal["invoke", "ok", "fail", "info"]  # info = outcome unknown (timeout, crash)
OP_TYPES: frozenset[str] = frozenset(("invoke", "ok", "fail", "info"))

# A client op's value is a list of micro-ops:
#   ("send", key, value, offset_or_None)       key = "topic-partition", e.g. "jepsen-3"
#   ("poll", key, [(offset, value), ...])      value = int, unique per run
SendMop = tuple[str, str, int, "int | None"]
PollMop = tuple[str, str, list[tuple[int, int]]]


@dataclass(frozen=True)
class Op:
    """One line of a history: an invocation, or the completion of one."""

    index: int  # position in the history
    time: float  # seconds since the history started (time.monotonic based)
    process: int | str  # a client worker id, or "nemesis"
    type: OpType
    f: str  # "send" | "poll" | "txn"; for the nemesis: "start" / "stop"
    value: Any  # list of micro-ops for clients; a description dict for the nemesis
    extra: dict[str, Any] = field(default_factory=dict)  # e.g. {"txn": "commit" | "abort"}

    def to_json(self) -> str:
        return json.dumps(
            {
                "index": self.index,
                "time": self.time,
                "process": self.process,
                "type": self.type,
                "f": self.f,
                "value": self.value,
                "extra": self.extra,
            },
            default=str,
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, line: str) -> Op:
        d = json.loads(line)
        if d["type"] not in OP_TYPES:
            raise ValueError(f"history line {d.get('index')}: unknown op type {d['type']!r}")
        value = d["value"]
        if d["process"] != "nemesis" and isinstance(value, list):
            value = [_mop_from_json(m) for m in value]
        return cls(
            index=int(d["index"]),
            time=float(d["time"]),
            process=d["process"],
            type=cast(OpType, d["type"]),
            f=d["f"],
            value=value,
            extra=dict(d.get("extra") or {}),
        )


def _mop_from_json(m: list[Any]) -> tuple[Any, ...]:
    """JSON turns tuples into lists; give micro-ops back their tuple shape."""
    if m and m[0] == "poll":
        return ("poll", m[1], [(int(o), int(v)) for o, v in m[2]])
    return tuple(m)


class History:
    """An append-only, thread-safe list of `Op`s; times are seconds since it was made."""

    def __init__(self, ops: list[Op] | None = None) -> None:
        self._lock = threading.Lock()
        self._ops: list[Op] = list(ops or [])
        last = self._ops[-1].time if self._ops else 0.0
        self._start = time.monotonic() - last

    def _append(
        self, process: int | str, type: OpType, f: str, value: Any, extra: dict[str, Any]
    ) -> Op:
        with self._lock:
            op = Op(len(self._ops), time.monotonic() - self._start, process, type, f, value, extra)
            self._ops.append(op)
            return op

    def invoke(self, process: int | str, f: str, value: Any, **extra: Any) -> Op:
        """Record that `process` begins operation `f` on `value`; keep the Op to complete it."""
        return self._append(process, "invoke", f, value, extra)

    def complete(self, invoked: Op, type: OpType, value: Any = None, **extra: Any) -> Op:
        """Record the outcome of `invoked`; value None means the invoke's value; extra adds to its."""
        if type == "invoke":
            raise ValueError("a completion is ok, fail or info, not invoke")
        return self._append(
            invoked.process,
            type,
            invoked.f,
            invoked.value if value is None else value,
            {**invoked.extra, **extra},
        )

    def nemesis(self, f: str, value: dict[str, Any]) -> Op:
        """Record the start or stop of a fault (an info op of process "nemesis")."""
        return self._append("nemesis", "info", f, value, {})

    def ops(self) -> list[Op]:
        with self._lock:
            return list(self._ops)

    def __len__(self) -> int:
        with self._lock:
            return len(self._ops)

    def save(self, path: str | Path) -> None:
        """Write the history as JSON lines, one op a line."""
        text = "".join(op.to_json() + "\n" for op in self.ops())
        Path(path).write_text(text)

    @classmethod
    def load(cls, path: str | Path) -> History:
        lines = Path(path).read_text().splitlines()
        return cls([Op.from_json(line) for line in lines if line.strip()])
