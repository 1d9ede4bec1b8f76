"""A segment's files on disk: their names (`<base offset>.log`, `.index`, `.timeindex`, `.txnindex`,
with a suffix while deleted, cleaned or swapped), which index files exist, and new empty ones.

Used by LogSegment when it is made; knows file names only.
"""

from __future__ import annotations

import os
from pathlib import Path

from kafkalite.storage.txn_index import TXN_INDEX_SUFFIX

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"


def segment_file_name(base_offset: int, suffix: str = LOG_SUFFIX) -> str:
    return f"{base_offset:020d}{suffix}"


def create_empty_indexes(directory: Path, base_offset: int, suffix: str) -> None:
    """Empty offset and time index files for a new segment (written again only with entries),
    and no transaction index left from an earlier segment of that name."""
    for ext in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
        p = directory / (segment_file_name(base_offset, ext) + suffix)
        os.close(os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644))
    (directory / (segment_file_name(base_offset, TXN_INDEX_SUFFIX) + suffix)).unlink(
        missing_ok=True
    )


def absent_index_files(
    directory: Path,
    base_offset: int,
    suffix: str,
    create: bool,
    fresh_dir: bool,
    known_size: int | None,
    names: set[str] | None,
) -> tuple[tuple[bool, ...], bool]:
    """Which of a segment's index files (offset, time, transaction) are known not to exist (a
    new directory has none, and `names`, the directory's listing while the log loads, says), and
    whether its offset or time index is missing for a segment being opened from its files."""
    absent: tuple[bool, ...]
    if create:
        absent = (fresh_dir, fresh_dir, True)
    elif names is not None:
        stem = segment_file_name(base_offset, "")
        absent = tuple(
            stem + ext + suffix not in names
            for ext in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
        )
    else:
        absent = (False, False, False)
    missing = (
        not create
        and known_size is None
        and (
            absent[0] or absent[1]
            if names is not None
            else not all(
                (directory / (segment_file_name(base_offset, ext) + suffix)).exists()
                for ext in (INDEX_SUFFIX, TIME_INDEX_SUFFIX)
            )
        )
    )
    return absent, missing
