"""Opening a partition log's parts: from its files (recovering them), as a new empty directory, or
from a clean shutdown's manifest entry — the LocalLog, epoch cache, producer state and offsets.

Used by Log.open / create / restore, which build a Log of the LogParts answered here.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from kafkalite.storage.config import LogConfig
from kafkalite.storage.epoch_cache import LeaderEpochFileCache
from kafkalite.storage.loader import (
    RecoveryStats,
    load_epoch_cache,
    load_segments,
    write_partition_metadata,
)
from kafkalite.storage.local_log import LocalLog
from kafkalite.storage.log_manifest import LogState
from kafkalite.storage.log_producers import LogProducers
from kafkalite.storage.producer_snapshot import delete_snapshots_above
from kafkalite.storage.producer_state import ProducerStateManager
from kafkalite.storage.segment import LogSegment
from kafkalite.storage.types import now_ms


@dataclass
class LogParts:
    """What a Log is built of, as opening found it."""

    local: LocalLog
    producers: LogProducers
    epochs: LeaderEpochFileCache
    topic_id: uuid.UUID | None
    high_watermark: int = 0
    first_dirty_offset: int = 0
    recovery: RecoveryStats = field(default_factory=RecoveryStats)


def empty_parts(directory: Path, config: LogConfig, topic_id: uuid.UUID | None) -> LogParts:
    """Parts with no segments yet (the caller loads them)."""
    local = LocalLog(directory, config, now_ms)
    return LogParts(local, LogProducers(local), LeaderEpochFileCache(directory), topic_id)


def open_parts(
    directory: Path,
    config: LogConfig,
    topic_id: uuid.UUID | None,
    recovery_point: int,
    log_start_offset: int,
    high_watermark: int,
    clean_shutdown: bool,
) -> LogParts:
    """The parts of the log in `directory` (created if missing), recovered from its files (see
    Log.open)."""
    # the directory is listed once; loading asks the listing, not the file system, what exists
    try:
        names = set(os.listdir(directory))
    except FileNotFoundError:
        directory.mkdir(parents=True, exist_ok=True)
        names = set()
    parts = empty_parts(directory, config, topic_id)
    local = parts.local
    local.parent_dirty = not names  # made just now (or found empty): the log dir syncs it
    local.names = names
    try:
        segments, leo = load_segments(
            directory,
            local.new_segment,
            recovery_point,
            log_start_offset,
            parts.recovery,
            clean_shutdown=clean_shutdown,
            names=names,
        )
        # snapshots past the recovered end describe batches that did not survive: never use them
        delete_snapshots_above(directory, leo, names)
        # recovered (rescanned) data is not known to be on disk: it stays above the recovery
        # point until the flush policy syncs it
        start = max(log_start_offset, segments[0].base_offset)
        local.load(segments, leo, start, recovery_point)
        parts.first_dirty_offset = start
        parts.high_watermark = min(max(high_watermark, start), leo)
        parts.epochs = load_epoch_cache(directory, segments, start, leo, names)
        parts.topic_id = write_partition_metadata(directory, topic_id, names)
        # producers' state (and with it open transactions and the last stable offset) from the
        # newest snapshot plus the headers past it: every append and fetch needs it
        parts.producers.loaded(parts.high_watermark)
    finally:
        local.names = None
    return parts


def new_parts(directory: Path, config: LogConfig, topic_id: uuid.UUID | None) -> LogParts | None:
    """The parts of a new, empty log in a directory made for it (see Log.create); None when the
    directory is already there (the log is then opened from its files)."""
    try:
        os.mkdir(directory)
    except FileExistsError:
        return None
    parts = empty_parts(directory, config, topic_id)
    seg = LogSegment(
        directory,
        0,
        index_interval_bytes=config.index_interval_bytes,
        max_index_bytes=config.segment_index_bytes,
        create=True,
        fresh_dir=True,
    )
    parts.local.load([seg], 0, 0, 0)
    parts.local.parent_dirty = True
    parts.epochs = LeaderEpochFileCache(directory, new_log=True)
    parts.topic_id = write_partition_metadata(directory, topic_id, None)
    parts.producers.state = ProducerStateManager()
    return parts


def restored_parts(directory: Path, config: LogConfig, state: LogState) -> LogParts:
    """The parts of a log as a clean shutdown closed it, from its manifest entry (see
    Log.restore); ValueError when the entry does not hold together."""
    tid = uuid.UUID(state.topic_id) if state.topic_id else None
    parts = empty_parts(directory, config, tid)
    segs: list[LogSegment] = []
    for st in state.segments:
        seg = LogSegment(
            directory,
            st[0],
            index_interval_bytes=config.index_interval_bytes,
            max_index_bytes=config.segment_index_bytes,
            known_size=st[1],
        )
        seg.restore(st)
        segs.append(seg)
    last = segs[-1]
    end = last.next_offset if last.size else max(last.next_offset, last.base_offset)
    if end != state.log_end or not 0 <= state.log_start <= state.log_end:
        raise ValueError(f"log end {state.log_end} but its last segment ends at {end}")
    local = parts.local
    local.load(segs, state.log_end, state.log_start, state.log_end, dir_dirty=False)
    parts.first_dirty_offset = state.log_start
    parts.high_watermark = min(max(state.high_watermark, state.log_start), state.log_end)
    parts.epochs.load_entries(state.epochs)
    if not state.stable:  # an open transaction: the last stable offset needs the state now
        parts.producers.loaded(parts.high_watermark)
    return parts


def manifest_entry(
    local: LocalLog,
    producers: LogProducers,
    epochs: LeaderEpochFileCache,
    high_watermark: int,
    topic_id: uuid.UUID | None,
) -> LogState:
    """A closed log's manifest entry, from its parts (see `restored_parts`)."""
    state = producers.state
    return LogState(
        local.dir.name,
        str(topic_id) if topic_id is not None else None,
        local.log_start_offset,
        local.log_end_offset,
        high_watermark,
        epochs.entries(),
        state is None or not state.has_unstable(),
        [seg.state() for seg in local.segments],
    )
