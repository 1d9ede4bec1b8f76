"""The walk of a produce request from the socket to the segment's pwrite (docs/produce-walk.md): at most 10
calls, each with every parameter and its return annotated.

The walk is the call stack the bytes arrive on (the connection's buffer_updated / data_received) joined to
the stack of the request loop task at the write (from Connection._process down to LogSegment.append_stamped).
"""

from __future__ import annotations

import importlib
import inspect
import sys
import threading
import types
from collections.abc import Iterator
from typing import Any

import pytest

from kafkalite.client.producer import KafkaProducer
from kafkalite.protocol.server_connection import ServerConnection
from kafkalite.storage import segment
from kafkalite.testing import Broker

MAX_CALLS = 10
DATA_ENTRIES = ("Connection.buffer_updated", "Connection.data_received")
TASK_ROOT = "Connection._process"

Frame = tuple[str, str]  # (module, qualified name)


def _kafkalite_frames(frame: types.FrameType | None) -> list[Frame]:
    """The kafkalite frames of a stack, outermost first."""
    out: list[Frame] = []
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if module.startswith("kafkalite."):
            out.append((module, frame.f_code.co_qualname))
        frame = frame.f_back
    return out[::-1]


def _from(frames: list[Frame], names: tuple[str, ...]) -> list[Frame]:
    """`frames` from the first one named in `names` on."""
    for i, (_, qualname) in enumerate(frames):
        if qualname in names:
            return frames[i:]
    raise AssertionError(f"none of {names} on the stack: {frames}")


def _function(module: str, qualname: str) -> Any:
    obj: Any = importlib.import_module(module)
    for part in qualname.split("."):
        assert part != "<locals>", f"{module}.{qualname}: a nested function on the produce walk"
        obj = getattr(obj, part)
    return inspect.unwrap(obj)


def _unannotated(fn: Any) -> list[str]:
    sig = inspect.signature(fn)
    missing = [
        name
        for i, (name, p) in enumerate(sig.parameters.items())
        if p.annotation is inspect.Parameter.empty and not (i == 0 and name in ("self", "cls"))
    ]
    if sig.return_annotation is inspect.Signature.empty:
        missing.append("return")
    return missing


@pytest.fixture
def walk(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> Iterator[list[Frame]]:
    """Produce one record to an embedded broker; the kafkalite calls from the socket to its write."""
    received: list[list[Frame]] = []
    written: list[list[Frame]] = []
    receive_frames = ServerConnection.receive_frames
    pwrite = segment._pwrite

    def spy_receive(self: Any, data: Any) -> Any:
        if threading.current_thread() is not threading.main_thread():
            received.append(_kafkalite_frames(sys._getframe(1)))
        return receive_frames(self, data)

    def spy_pwrite(fd: int, data: Any, pos: int) -> int:
        if threading.current_thread() is not threading.main_thread():
            stack = _kafkalite_frames(sys._getframe(1))
            if any(m == "kafkalite.broker.apis.data.produce" for m, _ in stack):
                written.append(stack)
        return pwrite(fd, data, pos)

    with Broker(tmp_path) as broker:
        broker.create_topic("walk", 1)
        monkeypatch.setattr(ServerConnection, "receive_frames", spy_receive)
        monkeypatch.setattr(segment, "_pwrite", spy_pwrite)
        with KafkaProducer(bootstrap_servers=broker.bootstrap_servers, linger_ms=0) as producer:
            producer.send("walk", b"one record").get(10)
        monkeypatch.undo()
    assert written, "the produce request was not written with the segment's pwrite"
    assert received
    yield _from(received[-1], DATA_ENTRIES) + _from(written[0], (TASK_ROOT,))


def test_produce_walk_is_short_and_typed(walk: list[Frame]) -> None:
    names = [f"{m}.{q}" for m, q in walk]
    assert names[-1] == "kafkalite.storage.segment.LogSegment.append_stamped", names
    assert len(walk) + 1 <= MAX_CALLS, "\n".join(names)  # + 1: the pwrite itself
    untyped = {f"{m}.{q}": missing for m, q in walk if (missing := _unannotated(_function(m, q)))}
    assert not untyped, untyped
