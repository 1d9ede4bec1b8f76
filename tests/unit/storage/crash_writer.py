"""Child process for test_process_crash: appends with flush.messages=1 from two threads and prints
`offset value` for every append only after its fsync returned (then waits to be SIGKILLed)."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

from kafkalite.records.batch import build_batch
from kafkalite.storage import LogConfig, LogManager


def main() -> None:
    log_dir, tag = Path(sys.argv[1]), sys.argv[2]
    cfg = LogConfig(flush_messages=1, segment_bytes=16 * 1024, index_interval_bytes=512)
    mgr = LogManager([log_dir], cfg, checkpoint_interval_ms=20, flush_check_interval_ms=10)
    mgr.startup()
    mgr.start_background()
    lg = mgr.get_or_create_log("crash", 0)
    out_lock = threading.Lock()

    def writer(t: int) -> None:
        for i in range(10**9):
            value = b"%s-%d-%d" % (tag.encode(), t, i)
            info = lg.append(build_batch([(b"k", value), (None, value + b"!")]))
            lg.flush(info.last_offset + 1)
            with out_lock:
                sys.stdout.write(f"{info.first_offset} {value.decode()}\n")
                sys.stdout.flush()

    threads = [threading.Thread(target=writer, args=(t,), daemon=True) for t in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()


if __name__ == "__main__":
    main()
