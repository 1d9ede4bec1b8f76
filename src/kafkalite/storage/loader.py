"""Loading a partition directory at startup: finish interrupted compaction swaps, drop leftovers,
and recover segments after the recovery point (framing + CRC-32C scan, truncate torn tails).

Used by Log.open: the segment list and log end offset, the leader-epoch cache cut to them, and the
partition.metadata file.
"""

from __future__ import annotations

import logging
import os
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from kafkalite.storage.epoch_cache import LEADER_EPOCH_CHECKPOINT, LeaderEpochFileCache
from kafkalite.storage.file_cache import read_file
from kafkalite.storage.segment import LogSegment
from kafkalite.storage.segment_files import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
)
from kafkalite.storage.segment_scan import read_header

log = logging.getLogger("kafkalite.storage.log")

PARTITION_METADATA_FILE = "partition.metadata"

SEGMENT_FILE_RE = re.compile(r"^(\d{20})\.(log|index|timeindex)((?:\.[a-z]+)?)$")


@dataclass
class RecoveryStats:
    """What loading one partition did: segments scanned batch by batch, bytes cut off, segments dropped."""

    segments_scanned: int = 0
    bytes_truncated: int = 0
    segments_dropped: int = 0


class NewSegment(Protocol):
    def __call__(self, base_offset: int, suffix: str = "", create: bool = True) -> LogSegment: ...


def load_segments(
    directory: Path,
    new_segment: NewSegment,
    recovery_point: int,
    log_start_offset: int,
    stats: RecoveryStats | None = None,
    *,
    clean_shutdown: bool = False,
    names: set[str] | None = None,
) -> tuple[list[LogSegment], int]:
    """Open every segment of a partition directory and return (segments, log end offset).

    Leftover .deleted/.cleaned files are removed and interrupted swaps completed; segments that may
    hold offsets at or above `recovery_point` (and the last one) are scanned batch by batch and
    truncated at the first torn/corrupt batch, dropping every later segment; the others only load
    and sanity-check their indexes (rebuilding them when damaged or missing). `names`, the
    directory's listing when the caller has one, is used instead of listing it and kept up to date."""
    bases: set[int] = set()
    swaps: list[int] = []
    listing = names if names is not None else set(os.listdir(directory))

    def drop(entry: str) -> None:
        (directory / entry).unlink(missing_ok=True)
        listing.discard(entry)

    for entry in list(listing):
        m = SEGMENT_FILE_RE.match(entry)
        if m is None:
            if entry.endswith(".tmp"):
                drop(entry)
            continue
        base, kind, suffix = int(m.group(1)), m.group(2), m.group(3)
        if suffix in (DELETED_SUFFIX, CLEANED_SUFFIX):
            drop(entry)
        elif suffix == SWAP_SUFFIX:
            if kind == "log":
                swaps.append(base)
            else:
                drop(entry)
        elif suffix == "" and kind == "log":
            bases.add(base)
        elif suffix:
            drop(entry)
    if swaps:
        for base in sorted(swaps):
            _complete_swap(directory, new_segment, base, bases)
        listing.clear()  # (files were renamed and removed: list again)
        listing.update(os.listdir(directory))
    # index files without a log file
    for entry in list(listing):
        m = SEGMENT_FILE_RE.match(entry)
        if m and m.group(3) == "" and m.group(2) != "log" and int(m.group(1)) not in bases:
            drop(entry)

    ordered = sorted(bases)
    segments: list[LogSegment] = []
    expected_next: int | None = None
    for i, base in enumerate(ordered):
        seg = new_segment(base, create=False)
        if expected_next is not None and base < expected_next:
            log.warning(
                "%s: segment %d overlaps the previous one; dropping it and later ones",
                directory,
                base,
            )
            seg.delete_files()
            for later in ordered[i + 1 :]:
                new_segment(later, create=False).delete_files()
            break
        is_last = i == len(ordered) - 1
        if is_last:
            # after a crash the active segment is always scanned; after a clean shutdown (whose
            # recovery point is the log end) only if it holds offsets past it: as in Kafka, a clean
            # restart reads no batch
            needs_recovery = not clean_shutdown or base >= recovery_point or not seg.load()
            needs_recovery = needs_recovery or seg.next_offset > recovery_point
        else:
            needs_recovery = ordered[i + 1] > recovery_point
            if not needs_recovery and not seg.load():
                log.warning("%s: rebuilding indexes of segment %d", directory, base)
                needs_recovery = True
        if needs_recovery:
            result = seg.recover(expected_next)
            if stats is not None:
                stats.segments_scanned += 1
                stats.bytes_truncated += result.truncated_bytes
                if result.truncated_bytes:
                    stats.segments_dropped += len(ordered) - i - 1
            if result.truncated_bytes:
                log.warning(
                    "%s: truncated %d bytes of torn/corrupt data from segment %d at byte %d",
                    directory,
                    result.truncated_bytes,
                    base,
                    result.valid_bytes,
                )
                segments.append(seg)
                for later in ordered[i + 1 :]:
                    log.warning("%s: dropping segment %d after the corruption", directory, later)
                    new_segment(later, create=False).delete_files()
                break
        segments.append(seg)
        expected_next = seg.next_offset
    # an empty segment in the middle can only come from a crash right after a roll
    while len(segments) > 1 and segments[-2].size == 0:
        segments[-2].delete_files()
        del segments[-2]
    if not segments:
        segments.append(new_segment(max(0, log_start_offset)))
    leo = segments[-1].next_offset
    if segments[-1].size == 0:
        leo = max(leo, segments[-1].base_offset)
    if log_start_offset > leo:
        log.warning(
            "%s: log start %d is past the end %d; starting empty",
            directory,
            log_start_offset,
            leo,
        )
        for s in segments:
            s.delete_files()
        segments = [new_segment(log_start_offset)]
        leo = log_start_offset
    for s in segments[:-1]:
        s.seal()
    return segments, leo


def _complete_swap(directory: Path, new_segment: NewSegment, base: int, bases: set[int]) -> None:
    """Finish a compaction swap interrupted by a crash: the .swap segment replaces the live
    segments whose base offsets fall inside its offset range."""
    seg = new_segment(base, suffix=SWAP_SUFFIX, create=False)
    seg.recover()
    for b in sorted(bases):
        if base <= b < max(seg.next_offset, base + 1):
            new_segment(b, create=False).delete_files()
            bases.discard(b)
    seg.offset_index.reset()
    seg.time_index.reset()
    seg.change_suffix(SWAP_SUFFIX, "")
    seg.close()
    for ext in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
        (directory / (f"{base:020d}{ext}")).unlink(missing_ok=True)
    bases.add(base)


def load_epoch_cache(
    directory: Path,
    segments: Sequence[LogSegment],
    log_start: int,
    log_end: int,
    names: set[str] | None,
) -> LeaderEpochFileCache:
    """The leader-epoch cache from its checkpoint, or rebuilt from the batches' partition
    leader epochs when the file is missing or damaged; cut to the recovered log either way."""
    if names is not None and LEADER_EPOCH_CHECKPOINT not in names:
        entries = None
    else:
        entries = LeaderEpochFileCache.read_file(directory)
    rebuilt = entries is None
    if entries is None:
        entries = _epochs_from_batches(segments)
    # a rebuilt cache is written as a new log's is: at once unless its entries all start at 0
    # (then by the next flush: until then the batches say the same)
    cache = LeaderEpochFileCache(directory, entries, new_log=rebuilt)
    cache.truncate_from_end(log_end)
    cache.truncate_from_start(log_start)
    if rebuilt:
        if entries:
            cache.save()
    elif entries and cache.entries() != entries:
        cache.flush()
    return cache


def _epochs_from_batches(segments: Sequence[LogSegment]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for seg in segments:
        pos = 0
        fh = seg.handle()
        while True:
            h = read_header(fh.fd, pos, seg.size)
            if h is None:
                break
            if h.partition_leader_epoch >= 0 and (not out or h.partition_leader_epoch > out[-1][0]):
                out.append((h.partition_leader_epoch, h.base_offset))
            pos += h.size
    return out


def write_partition_metadata(
    directory: Path, topic_id: uuid.UUID | None, names: set[str] | None
) -> uuid.UUID | None:
    """Write partition.metadata with `topic_id` (unless it says so already); without a topic id,
    answer the one the file holds (None when there is none)."""
    p = directory / PARTITION_METADATA_FILE
    there = PARTITION_METADATA_FILE in names if names is not None else p.exists()
    if topic_id is None:
        if there:
            for line in read_file(p).decode(errors="replace").splitlines():
                k, _, v = line.partition(":")
                if k.strip() == "topic_id":
                    try:
                        topic_id = uuid.UUID(v.strip())
                    except ValueError:
                        pass
        return topic_id
    text = f"version: 0\ntopic_id: {topic_id}\n"
    if not there or read_file(p) != text.encode():
        tmp = p.with_suffix(".tmp")
        tmp.write_text(text)
        os.replace(tmp, p)
    return topic_id
