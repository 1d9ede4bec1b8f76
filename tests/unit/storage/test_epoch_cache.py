"""The leader-epoch cache and the high watermark as storage keeps them: OffsetForLeaderEpoch answers
(against a brute-force model), truncation at both ends, the checkpoint files across restarts, and
rebuilding a lost or damaged leader-epoch-checkpoint from the batches' partition leader epochs.
"""

from __future__ import annotations

import itertools
import time
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from storage_helpers import make_batch, read_all

from kafkalite.records.header import iter_batch_headers
from kafkalite.storage import Log, LogConfig, LogManager
from kafkalite.storage.epoch_cache import LEADER_EPOCH_CHECKPOINT, LeaderEpochFileCache


def test_assign_ignores_older_epochs_and_replaces_entries_that_start_later(tmp_path: Path) -> None:
    c = LeaderEpochFileCache(tmp_path)
    assert c.latest_epoch == -1 and c.end_offset_for(0, 10) == (-1, -1)
    assert c.assign(1, 0) and c.assign(3, 10)
    assert not c.assign(2, 20)  # older than the latest
    assert not c.assign(3, 30)  # not newer
    assert c.assign(5, 10)  # epoch 3 began at 10 and never got a record: epoch 5 replaces it
    assert c.entries() == [(1, 0), (5, 10)]
    assert LeaderEpochFileCache.read_file(tmp_path) == [(1, 0), (5, 10)]


def test_end_offsets_follow_kafkas_rules(tmp_path: Path) -> None:
    c = LeaderEpochFileCache(tmp_path, [(1, 0), (3, 10), (6, 25)])
    assert c.end_offset_for(6, 40) == (6, 40)  # the latest epoch ends at the log end
    assert c.end_offset_for(3, 40) == (3, 25)
    assert c.end_offset_for(4, 40) == (3, 25)  # unknown epoch between two: the one below it
    assert c.end_offset_for(0, 40) == (0, 0)  # older than the first: its start (Kafka's rule)
    assert c.end_offset_for(7, 40) == (-1, -1)  # newer than the latest
    c.truncate_from_end(12)
    assert c.entries() == [(1, 0), (3, 10)]
    c.truncate_from_start(11)
    assert c.entries() == [(3, 11)]
    c.clear()
    assert c.entries() == [] and LeaderEpochFileCache.read_file(tmp_path) == []


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 30), st.integers(0, 200)), max_size=12),
    st.integers(-1, 35),
    st.integers(0, 300),
)
def test_end_offset_for_matches_a_brute_force_model(
    assigns: list[tuple[int, int]], requested: int, extra: int
) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        c = LeaderEpochFileCache(Path(d))
        for epoch, start in assigns:
            c.assign(epoch, start)
        entries = c.entries()
        # entries strictly increase in epoch and start offset
        assert all(a[0] < b[0] and a[1] < b[1] for a, b in itertools.pairwise(entries))
        leo = (entries[-1][1] if entries else 0) + extra
        got = c.end_offset_for(requested, leo)
        if not entries or requested < 0 or requested > entries[-1][0]:
            assert got == (-1, -1)
            return
        if requested < entries[0][0]:
            assert got == (requested, entries[0][1])
            return
        below = [e for e in entries if e[0] <= requested]
        epoch = below[-1][0]
        later = [e for e in entries if e[0] > epoch]
        assert got == (epoch, later[0][1] if later else leo)


def test_log_records_epochs_as_leader_and_as_follower(tmp_path: Path) -> None:
    leader = Log.open(tmp_path / "l-0", LogConfig())
    leader.append_as_leader(make_batch(2), 1)
    leader.begin_leader_epoch(4)  # a new leader epoch starts at the log end (2)
    leader.append_as_leader(make_batch(3), 4)
    assert leader.leader_epoch_cache.entries() == [(1, 0), (4, 2)]
    assert leader.end_offset_for_epoch(1) == (1, 2) and leader.end_offset_for_epoch(4) == (4, 5)
    follower = Log.open(tmp_path / "f-0", LogConfig())
    blob = read_all(leader)
    follower.append_as_follower(blob)
    assert read_all(follower) == blob  # byte for byte
    assert follower.leader_epoch_cache.entries() == [(1, 0), (4, 2)]
    assert follower.latest_epoch == 4
    follower.truncate_to(2)
    assert follower.leader_epoch_cache.entries() == [(1, 0)] and follower.latest_epoch == 1
    assert follower.log_end_offset == 2 and follower.high_watermark == 0
    leader.close()
    follower.close()


def test_a_lost_or_damaged_epoch_checkpoint_is_rebuilt_from_the_batches(tmp_path: Path) -> None:
    lg = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=400))
    for epoch in (0, 0, 2, 2, 5):
        lg.append_as_leader(make_batch(1, value_size=100), epoch)
    expected = lg.leader_epoch_cache.entries()
    assert expected == [(0, 0), (2, 2), (5, 4)]
    lg.close()
    path = tmp_path / "t-0" / LEADER_EPOCH_CHECKPOINT
    for damage in ("", "0\n9\n1 2\n", "garbage"):
        path.write_text(damage)
        again = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=400))
        assert again.leader_epoch_cache.entries() == expected
        again.close()
    path.unlink()
    again = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=400))
    assert again.leader_epoch_cache.entries() == expected and path.exists()
    again.close()


def test_high_watermark_survives_a_restart_through_its_checkpoint(tmp_path: Path) -> None:
    m = LogManager([tmp_path / "d"])
    m.startup()
    lg = m.get_or_create_log("t", 0)
    for _ in range(6):
        lg.append_as_leader(make_batch(1), 0)
    assert lg.update_high_watermark(4) == 4
    m.shutdown()
    text = (tmp_path / "d" / "replication-offset-checkpoint").read_text().split()
    assert text[:2] == ["0", "1"] and text[2:] == ["t", "0", "4"]
    m = LogManager([tmp_path / "d"])
    m.startup()
    again = m.get_log("t", 0)
    assert again is not None and again.high_watermark == 4 and again.log_end_offset == 6
    # a checkpoint above the recovered log end is clamped to it
    again.truncate_to(3)
    assert again.high_watermark == 3
    m.shutdown()


def test_replica_batches_keep_their_offsets_past_a_compaction_gap(tmp_path: Path) -> None:
    leader = Log.open(tmp_path / "l-0", LogConfig())
    for _ in range(3):
        leader.append_as_leader(make_batch(1), 2)
    blob = read_all(leader)
    headers = list(iter_batch_headers(blob))
    follower = Log.open(tmp_path / "f-0", LogConfig())
    first = headers[0][1].size
    follower.append_as_follower(blob[:first])
    # the leader's compacted log no longer has offset 1: the follower takes offset 2 next
    follower.append_as_follower(blob[headers[2][0] :])
    assert follower.log_end_offset == 3
    leader.close()
    follower.close()


def test_a_follower_keeps_the_leaders_log_append_time_bytes(tmp_path: Path) -> None:
    cfg = LogConfig(message_timestamp_type="LogAppendTime")
    leader = Log.open(tmp_path / "l-0", cfg)
    leader.append_as_leader(make_batch(3), 1)
    blob = read_all(leader)
    time.sleep(0.01)
    follower = Log.open(tmp_path / "f-0", cfg)
    follower.append_as_follower(blob)
    assert read_all(follower) == blob
    leader.close()
    follower.close()
