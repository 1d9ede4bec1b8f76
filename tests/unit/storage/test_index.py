"""OffsetIndex / TimeIndex: lookups at and between entries, persistence and sanity checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkalite.storage.index import CorruptIndex, OffsetIndex, TimeIndex


def test_offset_index_lookup_and_reload(tmp_path: Path) -> None:
    idx = OffsetIndex(tmp_path / "a.index", 100, 1 << 20)
    for i in range(1, 11):
        idx.append(100 + i * 10, i * 1000)
    assert idx.lookup(99) == (100, 0)
    assert idx.lookup(100) == (100, 0)
    assert idx.lookup(110) == (110, 1000)
    assert idx.lookup(119) == (110, 1000)
    assert idx.lookup(10**9) == (200, 10_000)
    assert idx.lookup_position(1999) == (110, 1000)
    assert idx.lookup_position(2000) == (120, 2000)
    assert idx.lookup_position(5) == (100, 0)
    idx.flush()
    idx.close()
    again = OffsetIndex(tmp_path / "a.index", 100, 1 << 20)
    again.load(log_size=20_000)
    assert again.entries() == [(100 + i * 10, i * 1000) for i in range(1, 11)]
    again.truncate_to(150)
    assert again.lookup(10**9) == (140, 4000)
    assert (tmp_path / "a.index").stat().st_size == 4 * 8
    again.close()


def test_offset_index_rejects_damage(tmp_path: Path) -> None:
    idx = OffsetIndex(tmp_path / "b.index", 0, 1 << 20)
    for i in range(1, 5):
        idx.append(i, i * 100)
    idx.close()
    p = tmp_path / "b.index"
    data = bytearray(p.read_bytes())
    data[9] ^= 0x7F  # second entry's offset
    p.write_bytes(bytes(data))
    with pytest.raises(CorruptIndex):
        OffsetIndex(p, 0, 1 << 20).load(log_size=10_000)
    p.write_bytes(bytes(data[:13]))
    with pytest.raises(CorruptIndex):
        OffsetIndex(p, 0, 1 << 20).load(log_size=10_000)
    # positions past the log are rejected too
    good = OffsetIndex(tmp_path / "c.index", 0, 1 << 20)
    good.append(1, 5000)
    good.close()
    with pytest.raises(CorruptIndex):
        OffsetIndex(tmp_path / "c.index", 0, 1 << 20).load(log_size=100)


def test_time_index(tmp_path: Path) -> None:
    idx = TimeIndex(tmp_path / "a.timeindex", 50, 1 << 20)
    idx.maybe_append(1000, 55)
    idx.maybe_append(900, 60)  # not increasing: ignored
    idx.maybe_append(2000, 70)
    assert len(idx) == 2
    assert idx.lookup_before(500) == 50
    assert idx.lookup_before(1000) == 50
    assert idx.lookup_before(1001) == 55
    assert idx.lookup_before(5000) == 70
    assert idx.last_entry == (2000, 70)
    idx.close()
    again = TimeIndex(tmp_path / "a.timeindex", 50, 1 << 20)
    again.load(next_offset_bound=100)
    assert again.entries() == [(1000, 55), (2000, 70)]
    with pytest.raises(CorruptIndex):
        TimeIndex(tmp_path / "a.timeindex", 50, 1 << 20).load(next_offset_bound=60)


def test_index_full(tmp_path: Path) -> None:
    idx = OffsetIndex(tmp_path / "f.index", 0, 24)
    for i in range(1, 4):
        assert not idx.is_full
        idx.append(i, i)
    assert idx.is_full
