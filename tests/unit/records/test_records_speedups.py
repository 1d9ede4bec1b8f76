"""The optional C accelerator and its pure-Python twins: RecordBuffer output byte for byte the same (and the
same as RecordBatchBuilder's records), KAFKALITE_NO_SPEEDUPS, and the package importing without the build."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalite.records.batch import RecordBatchBuilder
from kafkalite.records.builder import PyRecordBuffer, encode_record_body, py_now_ms, zigzag_bytes
from kafkalite.records.header import HEADER_SIZE

try:
    from kafkalite.records import _speedups as c_speedups
except ImportError:  # the extension was not built: only the comparisons skip
    c_speedups = None

needs_c = pytest.mark.skipif(c_speedups is None, reason="C accelerator not built")
SRC = Path(__file__).resolve().parents[3] / "src"

fields = st.one_of(
    st.none(),
    st.binary(max_size=40),
    st.integers(8180, 8200).map(lambda n: b"q" * n),  # around the 2-byte varint boundary
    st.sampled_from([b"", b"x" * 63, b"x" * 64, b"y" * 8191, b"z" * 20_000]),
)
headers = st.one_of(
    st.none(),
    st.lists(
        st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=20))), max_size=3
    ),
)
timestamps = st.one_of(
    st.integers(0, 1 << 42),
    st.sampled_from([0, 1000, 1000 + 8191, 1000 + 8192, -1, 999]),
    st.integers(-(1 << 40), 1 << 40),
)
ops = st.lists(
    st.one_of(
        st.tuples(st.just("append"), fields, fields, timestamps, headers),
        st.tuples(st.just("try"), fields, fields, timestamps, st.integers(-5, 60_000)),
    ),
    max_size=25,
)


def _run(cls: Any, program: list[tuple[Any, ...]]) -> tuple[Any, ...]:
    buf = cls(4096)
    results = []
    for op, key, value, ts, extra in program:
        if op == "append":
            results.append(buf.append(key, value, ts, extra))
        else:
            results.append(buf.try_append(key, value, ts, extra))
    return (
        results,
        buf.count,
        buf.size,
        buf.base_timestamp,
        buf.max_timestamp,
        buf.getvalue(),
        bytes(buf.view()),
    )


@given(ops)
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_python_buffer_matches_the_batch_builder(program: list[tuple[Any, ...]]) -> None:
    results, count, size, base, top, data, viewed = _run(PyRecordBuffer, program)
    ref = RecordBatchBuilder()
    used = HEADER_SIZE
    stamps: list[int] = []
    for (op, k, v, ts, extra), r in zip(program, results, strict=True):
        hs = (extra or ()) if op == "append" else ()
        body = encode_record_body(ts - stamps[0] if stamps else 0, len(stamps), k, v, hs)
        need = len(zigzag_bytes(len(body))) + len(body)
        if op == "try":  # refused exactly when the record would overflow the limit
            assert (r >= 0) == (used + need <= extra)
        if r >= 0:
            assert r == len(stamps)
            ref.append(k, v, hs, ts)
            stamps.append(ts)
            used += need
    assert data == viewed == bytes(HEADER_SIZE) + bytes(ref._buf)
    assert count == len(stamps) and size == len(data) == used
    assert base == (stamps[0] if stamps else -1)
    assert top == max([-1, *stamps])


@needs_c
@given(ops)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_c_buffer_is_byte_identical(program: list[tuple[Any, ...]]) -> None:
    assert _run(c_speedups.RecordBuffer, program) == _run(PyRecordBuffer, program)


@needs_c
@given(st.binary(max_size=300))
def test_c_murmur2_matches_python(data: bytes) -> None:
    from kafkalite.client.partitioner import py_murmur2

    assert c_speedups.murmur2(data) == py_murmur2(data)
    assert c_speedups.murmur2(bytearray(data)) == py_murmur2(data)


@needs_c
def test_c_clock_matches_python() -> None:
    a = py_now_ms()
    b = c_speedups.now_ms()
    c = py_now_ms()
    assert a <= b <= c and abs(b - time.time() * 1000) < 1000


@pytest.mark.parametrize(
    "cls", [PyRecordBuffer, pytest.param(getattr(c_speedups, "RecordBuffer", None), marks=needs_c)]
)
def test_buffer_rules(cls: Any) -> None:
    buf = cls()
    assert (buf.count, buf.size, buf.base_timestamp, buf.max_timestamp) == (0, HEADER_SIZE, -1, -1)
    assert (
        buf.try_append(None, b"v" * 10, 5, HEADER_SIZE + 5) == -1
    )  # does not fit: nothing written
    assert buf.size == HEADER_SIZE and buf.count == 0
    assert buf.try_append(None, b"v" * 10, 5, 1000) == 0
    assert buf.try_append(b"k", memoryview(b"abc"), 7, 1000) == 1
    assert buf.append(None, None, 3, [("h", b"1"), ("e", None)]) == 2
    assert (buf.count, buf.base_timestamp, buf.max_timestamp) == (3, 5, 7)
    assert buf.try_append(None, b"x", 9, -1) == -1
    view = buf.view()
    view[0:8] = b"\x01" * 8  # writable: the batch header is filled in place
    with pytest.raises(BufferError):
        buf.append(None, b"x", 9)
    assert buf.try_append(None, b"x", 9, 0) == -1  # a sealed batch (limit 0) just refuses
    view.release()
    assert buf.append(None, b"x", 9) == 3
    assert buf.getvalue()[:8] == b"\x01" * 8
    with pytest.raises(OverflowError):
        buf.append(None, b"x", 1 << 70)
    with pytest.raises(TypeError):
        buf.append(None, "text", 9)
    before = (buf.count, buf.size)
    for bad_headers in ([("h",)], [(b"not-str", b"v")], ["hv"], 5, [("h", 7)]):
        with pytest.raises((TypeError, ValueError)):
            buf.append(None, b"x", 9, bad_headers)
    assert (buf.count, buf.size) == before  # a refused record leaves nothing behind
    assert not buf.sealed
    buf.seal()  # drained: the lock-free send() must see -1, anyone else an error
    assert buf.sealed and buf.try_append(None, b"x", 9, 1000) == -1
    with pytest.raises(BufferError):
        buf.append(None, b"x", 9)
    assert buf.count == 4


def _python(code: str, **env: str) -> str:
    return subprocess.run(
        [sys.executable, "-c", code],
        # the switch comes only from `env`, whatever the suite itself runs with
        env={
            **{k: v for k, v in os.environ.items() if k != "KAFKALITE_NO_SPEEDUPS"},
            "PYTHONPATH": str(SRC),
            **env,
        },
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def test_env_var_forces_the_fallback() -> None:
    code = (
        "from kafkalite.records import speedups as s; print(s.SPEEDUPS, s.RecordBuffer.__module__)"
    )
    assert _python(code, KAFKALITE_NO_SPEEDUPS="1") == "False kafkalite.records.builder"
    if c_speedups is not None:
        assert _python(code) == "True kafkalite.records._speedups"
        assert _python(code, KAFKALITE_NO_SPEEDUPS="0") == "True kafkalite.records._speedups"


def test_imports_without_the_extension() -> None:
    code = (
        "import sys; sys.modules['kafkalite.records._speedups'] = None\n"
        "import kafkalite.client, kafkalite.records.speedups as s\n"
        "from kafkalite.client.partitioner import murmur2\n"
        "print(s.SPEEDUPS, s.murmur2, murmur2.__name__)"
    )
    assert _python(code) == "False None py_murmur2"
