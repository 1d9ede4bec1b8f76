"""Storage benchmark: Log.append throughput (1 KiB / 16 KiB batches, no fsync and group-commit fsync)
and Log.read + os.sendfile throughput, each printed beside a raw peer measured in the same run.

Also (--partitions N): appends and reads round-robin over N partitions with the open-files cache
smaller than the partitions (--open-files), beside the same with every file kept open.

Run: .venv/bin/python bench/bench_storage.py [--mb 128] [--dir /tmp] [--partitions 2000]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import socket
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from kafkalite.records.batch import build_batch
from kafkalite.storage import Log, LogConfig
from kafkalite.storage.file_cache import process_file_cache
from kafkalite.storage.segment_scan import read_header


def make_payload(batch_size: int) -> bytes:
    overhead = len(build_batch([(None, b"")]))
    return build_batch([(None, os.urandom(max(0, batch_size - overhead - 3)))])


def mbps(nbytes: int, seconds: float) -> float:
    return nbytes / seconds / 1e6


def raw_write(path: Path, payload: bytes, count: int, *, fsync_each: bool = False) -> float:
    """Same bytes, one write per batch, to a plain file (page cache unless fsync_each)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        t0 = time.perf_counter()
        for _ in range(count):
            os.write(fd, payload)
            if fsync_each:
                os.fdatasync(fd)
        return time.perf_counter() - t0
    finally:
        os.close(fd)
        path.unlink()


def raw_write_bulk(path: Path, payload: bytes, count: int, chunk_bytes: int = 1 << 20) -> float:
    """Same bytes written in chunks of whole batches (1 MiB: the page-cache ceiling for this disk)."""
    per = max(1, chunk_bytes // len(payload))
    chunk = payload * per
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        t0 = time.perf_counter()
        for _ in range(count // per):
            os.write(fd, chunk)
        if count % per:
            os.write(fd, payload * (count % per))
        return time.perf_counter() - t0
    finally:
        os.close(fd)
        path.unlink()


def log_append_as_broker(root: Path, payload: bytes, count: int) -> tuple[float, Log]:
    """`count` appends the way broker/apis/data/produce.py makes them: `lg.append_as_leader(data, 0)`,
    `data` being the bytearray its validation copied the request's batch into (stamped in place;
    the copy is the request decoder's, so one bytearray is reused here)."""
    lg = Log.open(root / "bench-0", LogConfig(segment_bytes=256 << 20))
    data = bytearray(payload)
    t0 = time.perf_counter()
    append_as_leader = lg.append_as_leader
    for _ in range(count):
        append_as_leader(data, 0)
    return time.perf_counter() - t0, lg


def log_append_bytes(root: Path, payload: bytes, count: int) -> tuple[float, Log]:
    """`count` calls of the general `Log.append(bytes)` (an AppendInfo per call; the immutable
    batch is copied to be stamped, or written with pwritev from 4 KiB up): other callers' path."""
    lg = Log.open(root / "bench-0", LogConfig(segment_bytes=256 << 20))
    t0 = time.perf_counter()
    append = lg.append
    for _ in range(count):
        append(payload)
    return time.perf_counter() - t0, lg


def count_log_writes(root: Path, payload: bytes, count: int) -> int:
    """Write calls (to the .log and index files) the broker's append makes for `count` batches,
    counted in an untimed pass, so the raw peer's call count can be checked against it."""
    import kafkalite.storage.segment as log_mod

    calls = [0]
    real, real_log, real_logv = os.pwrite, log_mod._pwrite, log_mod._pwritev

    def counting(fd: int, data: Any, pos: int) -> int:
        calls[0] += 1
        return real(fd, data, pos)

    def counting_v(fd: int, data: Any, pos: int) -> int:
        calls[0] += 1
        return real_logv(fd, data, pos)

    # the os module is shared (segment and index files); segment.py binds its calls at import
    os.pwrite = counting
    log_mod._pwrite, log_mod._pwritev = counting, counting_v
    try:
        lg = Log.open(root / "count-0", LogConfig(segment_bytes=256 << 20))
        data = bytearray(payload)
        for _ in range(count):
            lg.append_as_leader(data, 0)
        lg.close()  # index entries are written in batches: count those too
        n = calls[0]
    finally:
        os.pwrite = real
        log_mod._pwrite, log_mod._pwritev = real_log, real_logv
    shutil.rmtree(root / "count-0")
    return n


def log_append_group_commit(
    root: Path, payload: bytes, count: int, threads: int
) -> tuple[float, int]:
    lg = Log.open(root / "gc-0", LogConfig(segment_bytes=256 << 20, flush_messages=1))
    per = count // threads
    fsyncs = [0]
    real = os.fdatasync

    def counting(fd: int) -> None:
        fsyncs[0] += 1
        real(fd)

    import kafkalite.storage.segment as seg_mod

    seg_mod.os.fdatasync = counting  # type: ignore[attr-defined]

    def worker() -> None:
        for _ in range(per):
            info = lg.append(payload)
            lg.flush(info.last_offset + 1)

    ts = [threading.Thread(target=worker) for _ in range(threads)]
    t0 = time.perf_counter()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    dt = time.perf_counter() - t0
    seg_mod.os.fdatasync = real  # type: ignore[attr-defined]
    lg.close()
    shutil.rmtree(root / "gc-0")
    return dt, fsyncs[0]


class Sink:
    """A loopback TCP connection whose far end drains everything in a thread."""

    def __init__(self) -> None:
        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        self.tx = socket.create_connection(srv.getsockname())
        self.rx, _ = srv.accept()
        srv.close()
        self.received = 0
        self.expected = 0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._drain, daemon=True)
        self.thread.start()

    def _drain(self) -> None:
        buf = bytearray(4 << 20)
        while True:
            n = self.rx.recv_into(buf)
            if not n:
                break
            self.received += n
        self.done.set()

    def close(self) -> None:
        self.tx.close()
        self.done.wait(60)
        self.rx.close()


def sendfile_all(sock: socket.socket, fd: int, pos: int, length: int) -> None:
    out = sock.fileno()
    end = pos + length
    while pos < end:
        pos += os.sendfile(out, fd, pos, end - pos)


def bench_read(lg: Log, max_bytes: int) -> tuple[float, float, int]:
    # a consumer-like loop: read from an offset, send the slice, continue at the next offset
    # (a client learns it from the last batch header it received; here: the header at the end)
    segs = {seg.base_offset: seg for seg in lg.segments}
    total = lg.size_in_bytes
    sink = Sink()
    t0 = time.perf_counter()
    off = lg.log_start_offset
    sent = 0
    leo = lg.log_end_offset
    while off < leo:
        info = lg.read(off, max_bytes)
        sl = info.slice
        if sl is None:
            break
        sendfile_all(sink.tx, sl.fileno, sl.position, sl.length)
        sent += sl.length
        seg_base = info.offset_metadata.segment_base_offset
        end_pos = sl.position + sl.length
        # next offset: the batch that starts at end_pos (or the next segment)
        seg = segs[seg_base]
        if end_pos >= seg.size:
            off = seg.next_offset
        else:
            fh = seg.handle()
            h = read_header(fh.fd, end_pos, seg.size)
            assert h is not None
            off = h.base_offset
    sink.close()
    dt = time.perf_counter() - t0
    # raw peer: sendfile the same segment files front to back in max_bytes chunks
    sink = Sink()
    t1 = time.perf_counter()
    for seg in lg.segments:
        pos = 0
        fh = seg.handle()
        while pos < seg.size:
            n = min(max_bytes, seg.size - pos)
            sendfile_all(sink.tx, fh.fd, pos, n)
            pos += n
    sink.close()
    dt_raw = time.perf_counter() - t1
    assert sent == total, (sent, total)
    return dt, dt_raw, sent


def fd_count() -> int:
    return len(os.listdir("/proc/self/fd"))


def bench_partitions(
    root: Path, payload: bytes, partitions: int, rounds: int, open_files: int
) -> None:
    """Round-robin appends (`rounds` per partition) then one read of each partition's data, with
    the FileCache at `open_files` (evicting) and at 4 files per partition (nothing evicted)."""
    cache = process_file_cache()
    old = cache.capacity
    base = fd_count()
    print(
        f"\n[{partitions} partitions, {len(payload)} B batches, {rounds} per partition] open-files cache"
    )
    try:
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        every = 4 * partitions + 16
        caps = [every, open_files] if every < soft - 256 else [open_files]
        if len(caps) == 1:
            print(f"  (every file open would need {every:,} descriptors: over the limit {soft:,})")
        for cap in caps:
            cache.configure(cap)
            opens0, evict0 = cache.opens, cache.evictions
            d = root / f"parts-{cap}"
            tc = time.perf_counter()
            logs = [
                Log.open(d / f"p-{i}", LogConfig(segment_bytes=64 << 20)) for i in range(partitions)
            ]
            dt_create = time.perf_counter() - tc
            data = bytearray(payload)
            for lg in logs:  # untimed: the first append of a leader epoch writes its checkpoint
                lg.append_as_leader(data, 0)
            peak = 0
            t0 = time.perf_counter()
            for _r in range(rounds):
                for lg in logs:
                    lg.append_as_leader(data, 0)
                peak = max(peak, fd_count())
            dt_app = time.perf_counter() - t0
            t1 = time.perf_counter()
            nread = 0
            for lg in logs:
                info = lg.read(0, 1 << 20)
                assert info.slice is not None
                nread += len(info.slice.read_bytes())
            dt_read = time.perf_counter() - t1
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            nbytes = rounds * partitions * len(payload)
            assert nread == nbytes + partitions * len(payload)
            label = "every file open" if cap > 2 * partitions else f"cache of {cap} files"
            print(
                f"  {label:<22} append {mbps(nbytes, dt_app):7.1f} MB/s ({rounds * partitions / dt_app:,.0f} "
                f"batches/s)  read {mbps(nread, dt_read):7.1f} MB/s  peak fds {peak - base:,}  "
                f"opens {cache.opens - opens0:,} evictions {cache.evictions - evict0:,}  "
                f"create {dt_create:.1f} s  max RSS {rss:.0f} MiB"
            )
            for lg in logs:
                lg.close()
            shutil.rmtree(d)
    finally:
        cache.configure(old)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--mb", type=int, default=64, help="megabytes per scenario and round")
    ap.add_argument(
        "--rounds", type=int, default=3, help="rounds per scenario (the median is kept)"
    )
    ap.add_argument("--dir", default=None, help="directory on the disk to measure")
    ap.add_argument("--threads", type=int, default=4, help="appending threads for group commit")
    ap.add_argument("--fsync-mb", type=int, default=8, help="megabytes for the fsync scenarios")
    ap.add_argument(
        "--partitions", type=int, default=0, help="partitions for the open-files section"
    )
    ap.add_argument("--open-files", type=int, default=256, help="open-files cache in that section")
    ap.add_argument(
        "--only-partitions", action="store_true", help="run only the open-files section"
    )
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="kafkalite-bench-", dir=args.dir))
    print(f"kafkalite storage benchmark in {root}  ({args.mb} MB per scenario)")
    try:
        if args.partitions:
            bench_partitions(root, make_payload(1024), args.partitions, 8, args.open_files)
        if args.only_partitions:
            return
        for size in (1024, 16 * 1024):
            payload = make_payload(size)
            count = args.mb * (1 << 20) // len(payload)
            nbytes = count * len(payload)
            label = f"{size // 1024:>2} KiB batches"
            # interleave raw and Log rounds; the median of each is compared (this host is noisy)
            raws: list[float] = []
            bulks: list[float] = []
            apps: list[float] = []
            app_bytes: list[float] = []
            log_writes = count_log_writes(root, payload, count)
            lg: Log | None = None
            for _r in range(args.rounds):
                raws.append(raw_write(root / "raw.bin", payload, count))
                bulks.append(raw_write_bulk(root / "bulk.bin", payload, count))
                if lg is not None:
                    lg.close()
                    shutil.rmtree(root / "bench-0")
                dt, lg = log_append_bytes(root, payload, count)
                app_bytes.append(dt)
                lg.close()
                shutil.rmtree(root / "bench-0")
                dt, lg = log_append_as_broker(root, payload, count)
                apps.append(dt)
            assert lg is not None
            raw_dt, bulk_dt = statistics.median(raws), statistics.median(bulks)
            app_dt, app_bytes_dt = statistics.median(apps), statistics.median(app_bytes)
            print(
                f"\n[{label}] append, no fsync (median of {args.rounds}; one thread, CPU s/GB "
                f"= {app_dt / nbytes * 1e9:.2f} for Log.append_as_leader)"
            )
            print(
                f"  Log.append_as_leader       {mbps(nbytes, app_dt):9.1f} MB/s  ({count / app_dt:,.0f} batches/s, "
                f"{nbytes} bytes, {log_writes:,} write calls incl. index files)\n"
                "    (the broker's produce call: its validated bytearray, offsets stamped in place)"
            )
            print(
                f"  raw write, one per batch   {mbps(nbytes, raw_dt):9.1f} MB/s   ratio {raw_dt / app_dt:6.1%}  (target >= 50%; "
                f"{nbytes} bytes in {count:,} write calls)"
            )
            print(
                f"  raw write, 1 MiB chunks    {mbps(nbytes, bulk_dt):9.1f} MB/s   ratio {bulk_dt / app_dt:6.1%}"
            )
            print(
                f"  Log.append of bytes        {mbps(nbytes, app_bytes_dt):9.1f} MB/s   ratio {raw_dt / app_bytes_dt:6.1%}  "
                "of the raw one-per-batch write (the general call: AppendInfo, immutable input)"
            )
            max_bytes = 1 << 20
            rds: list[float] = []
            rd_raws: list[float] = []
            sent = 0
            for _r in range(args.rounds):
                a, b, sent = bench_read(lg, max_bytes)
                rds.append(a)
                rd_raws.append(b)
            rd, rd_raw = statistics.median(rds), statistics.median(rd_raws)
            print(
                f"[{label}] read -> os.sendfile to loopback TCP, max_bytes={max_bytes >> 10} KiB (median of {args.rounds})"
            )
            print(f"  Log.read + sendfile        {mbps(sent, rd):9.1f} MB/s")
            print(
                f"  raw sendfile of the files  {mbps(sent, rd_raw):9.1f} MB/s   ratio {rd_raw / rd:6.1%}  (target >= 70%)"
            )
            lg.close()
            shutil.rmtree(root / "bench-0")
            # fsync: group commit vs raw write+fdatasync per batch
            fcount = args.fsync_mb * (1 << 20) // len(payload) // args.threads * args.threads
            fbytes = fcount * len(payload)
            raw_f = raw_write(root / "rawf.bin", payload, fcount, fsync_each=True)
            gc_dt, fsyncs = log_append_group_commit(root, payload, fcount, args.threads)
            print(
                f"[{label}] append with fsync (flush.messages=1, {args.threads} appending threads)"
            )
            print(
                f"  Log.append + group commit  {mbps(fbytes, gc_dt):9.1f} MB/s  "
                f"({fcount / gc_dt:,.0f} appends/s, {fsyncs} fsyncs for {fcount} appends)"
            )
            print(
                f"  raw write+fdatasync/batch  {mbps(fbytes, raw_f):9.1f} MB/s   "
                f"(one thread; group commit is {raw_f / gc_dt:.1f}x that)"
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
