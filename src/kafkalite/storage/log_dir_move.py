"""Moving a partition's log to another log dir of the same broker while it serves (AlterReplicaLogDirs):
a future log `<topic>-<p>.<uuid>-future` in the target dir copies it, catches up, then takes its place.
"""

from __future__ import annotations

import logging
import os
import uuid
from pathlib import Path

from kafkalite.storage.log import Log
from kafkalite.storage.segment import LogSegment
from kafkalite.storage.types import parse_topic_partition

log = logging.getLogger(__name__)

FUTURE_DIR_SUFFIX = "-future"
COPY_CHUNK_BYTES = 1024 * 1024


def future_dir(dest: Path, topic: str, partition: int) -> Path:
    """Kafka's name of a log being moved into `dest`: `<topic>-<partition>.<uuid>-future`."""
    return dest / f"{topic}-{partition}.{uuid.uuid4().hex}{FUTURE_DIR_SUFFIX}"


class ReplicaMove:
    """One partition's copy from its current log (`source`) into `future` in the dir `dest`."""

    def __init__(self, source: Log, future: Log, dest: Path) -> None:
        self.source = source
        self.future = future
        self.dest = dest
        self.bytes_copied = 0
        if future.log_end_offset == 0 and source.log_start_offset > 0:
            future.truncate_fully_and_start_at(source.log_start_offset)

    @property
    def lag(self) -> int:
        """Offsets the future log is behind the current one (DescribeLogDirs' offset lag)."""
        return max(0, self.source.log_end_offset - self.future.log_end_offset)

    def _realign(self) -> None:
        """Follow what the source did since the last step: retention past our end (start again at
        its log start) and truncation (a follower's divergent suffix: cut ours where it diverges)."""
        src, fut = self.source, self.future
        if src.log_start_offset > fut.log_end_offset:
            fut.truncate_fully_and_start_at(src.log_start_offset)
            return
        epoch = fut.latest_epoch
        if epoch >= 0:
            src_epoch, end = src.end_offset_for_epoch(epoch)
            if src_epoch != epoch or end < fut.log_end_offset:
                cut = min(end, fut.log_end_offset) if end >= 0 else src.log_start_offset
                fut.truncate_to(max(cut, fut.log_start_offset))
        if src.log_end_offset < fut.log_end_offset:
            fut.truncate_to(src.log_end_offset)

    def copy_step(self, max_bytes: int = COPY_CHUNK_BYTES) -> bool:
        """Copy the next batches (whole batches, offsets and epochs kept); True when caught up."""
        self._realign()
        src, fut = self.source, self.future
        end = src.log_end_offset
        if fut.log_end_offset >= end:
            return True
        info = src.read(fut.log_end_offset, max_bytes, max_offset=end, min_one_message=True)
        if info.slice is None or info.slice.length == 0:
            return fut.log_end_offset >= src.log_end_offset
        data = info.slice.read_bytes()
        fut.append_as_follower(data)
        self.bytes_copied += len(data)
        return fut.log_end_offset >= src.log_end_offset

    def finish(self, retired_dir: Path) -> tuple[LogSegment, ...]:
        """Under the source's lock: the last batches; the future log is flushed; the source's dir
        is renamed `retired_dir` (to be deleted), then the future's to `<topic>-<partition>` in
        `dest`; it is reopened and the source takes its files. Returns the source's old segments.

        A crash between the renames leaves only the complete future dir, which the next start
        makes the partition's log (LogManager.startup); never two current dirs of one partition."""
        src = self.source

        def swap() -> Log:
            while not self.copy_step():
                pass
            fut = self.future
            fut.close()  # flushed: the reopen needs no recovery
            final = self.dest / f"{src.topic}-{src.partition}"
            old = src.dir
            os.rename(old, retired_dir)
            try:
                os.rename(fut.dir, final)
            except BaseException:
                os.rename(retired_dir, old)  # the copy is dropped, the log stays where it was
                raise
            _fsync_dir(old.parent)
            _fsync_dir(self.dest)
            return Log.open(
                final,
                src.config,
                src.topic_id,
                recovery_point=fut.log_end_offset,
                log_start_offset=fut.log_start_offset,
                high_watermark=src.high_watermark,
                clean_shutdown=True,
            )

        return src.take_place_of_files(swap)

    def abort(self) -> None:
        """Drop the copy (its dir and files)."""
        self.future.delete()


class RetiredSegments:
    """A moved log's old segments, closed once the file-delete delay has let in-flight reads end."""

    def __init__(self, segments: tuple[LogSegment, ...]) -> None:
        self.segments = segments

    def close(self, *, flush: bool = False) -> None:
        for s in self.segments:
            s.close(discard=True)


def _fsync_dir(d: Path) -> None:
    fd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def future_partition(name: str) -> tuple[str, int] | None:
    """`<topic>-<partition>.<uuid>-future` -> (topic, partition), or None."""
    if not name.endswith(FUTURE_DIR_SUFFIX):
        return None
    stem, dot, _ = name[: -len(FUTURE_DIR_SUFFIX)].rpartition(".")
    return parse_topic_partition(stem) if dot else None
